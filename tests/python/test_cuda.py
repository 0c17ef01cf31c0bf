"""CUDA-only checks (skipped without a GPU): the capture adds no device synchronization by
default, `async` split sizes arrive in order, and an explicitly allowed sync is what PyTorch's
sync debug mode sees. Calls maybe_fuse_ops directly, since the stand-in's own forward reads
split sizes on the host."""
from __future__ import annotations

import os
import tempfile
import unittest
import warnings

import torch

import fusertrace_capture as fc
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import MXFP8BlockScaling

import ftutil

HAS_CUDA = torch.cuda.is_available() and hasattr(torch.cuda, "set_sync_debug_mode")


@unittest.skipUnless(HAS_CUDA, "no CUDA device (or no torch.cuda.set_sync_debug_mode)")
class TestNoSync(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        g, d = 4, 64
        m = te.ops.Sequential(te.ops.GroupedLinear(g, d, 4 * d, bias=False, device="cuda"),
                              te.ops.ScaledSwiGLU(glu_interleave_size=32),
                              te.ops.GroupedLinear(g, 2 * d, d, bias=True, device="cuda"))
        self.fz = m._make_module_groups(m._modules.values())[0]
        self.x = torch.randn(64, d, device="cuda")
        self.probs = torch.rand(64, device="cuda")
        self.recipe = MXFP8BlockScaling()

    def tearDown(self):
        torch.cuda.set_sync_debug_mode(0)
        fc.disable()
        self.tmp.cleanup()

    def run_calls(self, n=20, **kw):
        out = os.path.join(self.tmp.name, "out")
        fc.enable(out, jsonl=True, **kw)
        expect = []
        torch.cuda.set_sync_debug_mode("error")  # any synchronizing call raises
        try:
            for i in range(n):
                s = torch.full((4,), 16, dtype=torch.int64, device="cuda")
                s[i % 4] += i  # GPU-side values, different per call
                expect.append([16 + (i if j == i % 4 else 0) for j in range(4)])
                self.fz.maybe_fuse_ops(True, self.recipe, self.x, [[s], [self.probs], [s]])
        finally:
            torch.cuda.set_sync_debug_mode(0)
        fc.disable()
        calls = [r for r in ftutil.read_jsonl(os.path.join(out, "rank0.jsonl"))
                 if r["t"] == "call"]
        return calls, expect

    def test_host_mode_default_no_sync_no_splits(self):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            calls, _ = self.run_calls()
        self.assertFalse([x for x in w if "capture stopped" in str(x.message)])
        self.assertEqual(len(calls), 20)
        self.assertTrue(all("m_splits" not in c for c in calls))
        self.assertTrue(all(c["device"] == torch.cuda.current_device() for c in calls))
        self.assertTrue(all(c["graph"] is False for c in calls))

    def test_async_mode_no_sync_splits_in_order(self):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            calls, expect = self.run_calls(splits="async")
        self.assertFalse([x for x in w if "capture stopped" in str(x.message)])
        self.assertEqual([c["seq"] for c in calls], list(range(20)))
        self.assertEqual([c["m_splits"] for c in calls], expect)

    def test_allowed_sync_is_a_sync(self):
        """host + allow_sync reads on the host: the sync debug mode catches it (so the check
        above can fail), and the capture stops with a warning instead of breaking TE."""
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            calls, _ = self.run_calls(splits="host", allow_sync=True)
        self.assertTrue([x for x in w if "capture stopped" in str(x.message)])
        self.assertEqual(len(calls), 0)


if __name__ == "__main__":
    unittest.main()
