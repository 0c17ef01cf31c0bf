"""A small mixture-of-experts training loop on the TE stand-in, run under the capture.

Real PyTorch on the CPU: a frozen input projection (te.ops BasicLinear + Bias + ReLU), two MoE
blocks (GroupedLinear, ScaledSwiGLU, GroupedLinear with router probabilities that need grad), the
first under torch.utils.checkpoint (no-grad forward, grad-enabled recompute in backward), an op
called directly (a transient fuser per call), microbatches, an optimizer, no-grad evaluation,
and the recipe changes of docs/fuser-model.md, "Call patterns" (one MXFP8 object for training, NVFP4 with
and without RHT, DelayedScaling with a new amax history length, BF16 evaluation, fresh default
recipes from te.autocast(recipe=None)).

Usage: python3 train_loop.py [--steps N] [--enable DIR] [--hang]
  --enable DIR  call fusertrace_capture.enable(DIR) itself (otherwise the capture is expected to
                be on already: python3 -m fusertrace_capture.run, or FUSERTRACE_CAPTURE)
  --hang        after the first step, print "ready" and keep training until killed (signal test)
"""
import argparse
import sys

import torch
import torch.utils.checkpoint

import fusertrace_capture as fc
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import (DelayedScaling, MXFP8BlockScaling,
                                              NVFP4BlockScaling)

D, G, T, IN, CLASSES = 64, 4, 64, 32, 8


class MoEBlock(torch.nn.Module):
    def __init__(self, checkpointed: bool) -> None:
        super().__init__()
        self.router = torch.nn.Linear(D, G)
        self.mlp = te.ops.Sequential(
            te.ops.GroupedLinear(G, D, 4 * D, bias=False),
            te.ops.ScaledSwiGLU(glu_interleave_size=32),
            te.ops.GroupedLinear(G, 2 * D, D, bias=True),
        )
        self.checkpointed = checkpointed

    def _mlp(self, x, splits, probs, quant=None):
        if quant is None or not torch.is_grad_enabled():
            return x + self.mlp(x, splits, probs, splits)
        # The recompute in backward: re-enter the forward's autocast with the same recipe
        # object, as TE's distributed.checkpoint does (docs/fuser-model.md, "Call patterns").
        with fc.phase("recompute"), te.autocast(enabled=quant[0], recipe=quant[1]):
            return x + self.mlp(x, splits, probs, splits)

    def forward(self, x, splits):
        probs = torch.sigmoid(self.router(x)).mean(-1)
        if self.checkpointed and torch.is_grad_enabled():
            state = te.FP8GlobalStateManager
            enabled = state.is_fp8_enabled()
            quant = (enabled, state.get_fp8_recipe() if enabled else None)
            return torch.utils.checkpoint.checkpoint(
                lambda *a: self._mlp(*a, quant=quant), x, splits, probs)
        return self._mlp(x, splits, probs)


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = te.ops.Sequential(te.ops.BasicLinear(IN, D), te.ops.Bias(D), te.ops.ReLU())
        for p in self.embed.parameters():  # the frozen layer
            p.requires_grad_(False)
        self.blocks = torch.nn.ModuleList([MoEBlock(True), MoEBlock(False)])
        self.scale = te.ops.ConstantScale(0.5)  # called directly: a transient fuser per call
        self.head = torch.nn.Linear(D, CLASSES)

    def forward(self, x, splits):
        x = self.embed(x)
        for b in self.blocks:
            x = b(x, splits)
        return self.head(self.scale(x))


def batch(gen):
    x = torch.randn(T, IN, generator=gen)
    cuts = sorted(torch.randint(0, T + 1, (G - 1,), generator=gen).tolist())
    splits = torch.tensor([b - a for a, b in zip([0] + cuts, cuts + [T])], dtype=torch.int64)
    y = torch.randint(0, CLASSES, (T,), generator=gen)
    return x, splits, y


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--microbatches", type=int, default=2)
    ap.add_argument("--enable")
    ap.add_argument("--hang", action="store_true")
    ns = ap.parse_args()
    if ns.enable:
        fc.enable(ns.enable)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    model = Model()
    fc.label_modules(model)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    train_recipe = MXFP8BlockScaling()
    losses = []
    step = 0
    while step < ns.steps or ns.hang:
        recipe = train_recipe
        if step == 2:
            recipe = NVFP4BlockScaling()  # type switch A -> B -> A over steps 1..3
        opt.zero_grad()
        for mb in range(ns.microbatches):
            fc.set_step(step, mb)
            x, splits, y = batch(gen)
            with te.autocast(recipe=recipe):
                out = model(x, splits)
            loss = torch.nn.functional.cross_entropy(out, y)
            loss.backward()
            losses.append(loss.item())
        opt.step()
        if ns.hang and step == 0:
            print("ready", flush=True)
        if step % 2 == 1:
            x, splits, _ = batch(gen)
            with torch.no_grad(), fc.phase("eval"):
                with te.autocast(recipe=NVFP4BlockScaling(disable_rht=True)):
                    model(x, splits)
                model(x, splits)  # BF16 evaluation (quantization off)
                with te.autocast(recipe=DelayedScaling(amax_history_len=16 * (step + 1))):
                    model(x, splits)
                with te.autocast(recipe=None):  # a fresh default recipe object per entry
                    model(x, splits)
        step += 1
    fc.set_step(None)
    if not all(torch.isfinite(torch.tensor(losses))):
        print("non-finite loss", file=sys.stderr)
        return 1
    print(f"trained {ns.steps} steps, last loss {losses[-1]:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
