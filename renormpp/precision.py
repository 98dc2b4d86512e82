"""Every product at full float32 precision, on every backend.

XLA's default for float32 products on Ampere and Hopper GPUs (and TPUs) is a reduced precision (TF32: a 10-bit
mantissa). For the potential of a network at the paper's size that is a rounding noise of order 1 in energy units
(1.38 at Fig. 1a's alpha = 10 on an H100, 0.001 on CPU), and a Metropolis test that weighs the noise freezes the
chains. renormpp traces its samplers' programs (the potential, its force, the step, the record, the compiled blocks,
the exact readout's gradient) in :func:`full_precision`; ``tests/test_precision.py`` checks every product of them.
"""
from __future__ import annotations

import jax


def full_precision():
    """A context (or decorator) in which every product of float32 arrays that JAX traces is computed at full float32
    precision (``jax.default_matmul_precision("highest")``). On a CPU every product is computed at full precision
    anyway: it costs nothing there (``benchmarks/precision.py``)."""
    return jax.default_matmul_precision("highest")
