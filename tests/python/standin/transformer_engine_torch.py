"""Stand-in for TE's C++ extension module, transformer_engine_torch: only what the capture hook
reads from it (get_cublasLt_version, TE's integer major*10000 + minor*100 + patch). TE's
transformer_engine.pytorch imports it; so does the stand-in's."""


def get_cublasLt_version() -> int:  # pylint: disable=invalid-name
    return 130400
