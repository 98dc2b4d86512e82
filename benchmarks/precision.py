"""What full float32 precision costs the default sampler here (issue 45, item 1).

The samplers trace every product under ``rp.infer.full_precision()`` (GPUs otherwise compute float32 products in
TF32). On a CPU every product is computed at full precision whatever is asked, so the cost should be nil; this
measures it: seconds per draw of the default kinetic sampler (v integrated out, two vectorized chains) at two widths,
with the context and with it replaced by a no-op (the exact readout's gradient keeps its context, applied at import),
alternating, median of the repeats.

    python benchmarks/precision.py            # P = 1000, N0 = 144, N1 = 100 and 1000
    python benchmarks/precision.py --smoke    # a tiny size (seconds)
"""
from __future__ import annotations

import argparse
import contextlib
import platform
import time

import jax
import numpy as np

import renormpp as rp
from renormpp import precision as precision_module
from renormpp import readout
from renormpp.infer import adapter, binding, chains, observed

#: the modules that trace under full_precision (each imported the name)
MODULES = (precision_module, binding, adapter, chains, observed, readout)


class _Default(contextlib.ContextDecorator):
    """A no-op in place of the context: the backend's default precision."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@contextlib.contextmanager
def precision(full: bool):
    """The samplers' own context (full) or a no-op in its place (the backend's default precision)."""
    saved = [m.full_precision for m in MODULES]
    if not full:
        for m in MODULES:
            m.full_precision = _Default
    try:
        yield
    finally:
        for m, f in zip(MODULES, saved):
            m.full_precision = f


def seconds_per_draw(data, N1: int, full: bool, draws: int) -> float:
    with precision(full):
        kernel = rp.infer.KineticLangevin(rp.models.one_hidden_layer, step_size=1e-4, inner_steps=4)
        run = rp.infer.Chains(kernel, num_chains=2)
        state = run.init(jax.random.PRNGKey(0), 10, data.X, data.Y, N1=N1, T=0.01, integrate_v=True)
        state, _, _ = run.run(state, draws)  # compiles
        t = time.perf_counter()
        run.run(state, draws)
        return (time.perf_counter() - t) / draws


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--widths", type=int, nargs="+", help="the widths N1 (default 100 1000)")
    args = parser.parse_args(argv)
    P, N0, widths, draws = (40, 10, (8,), 5) if args.smoke else (1000, 144, (100, 1000), 20)
    widths = args.widths or widths
    data = rp.datasets.synthetic(P=P, P_test=10, N0=N0, D=2, teacher="linear", seed=0)
    print(f"{platform.processor() or platform.machine()}, {jax.devices()[0].platform}, P = {P}, N0 = {N0}")
    print("| N1 | full precision: ms/draw | backend default: ms/draw | ratio |")
    print("|---:|---:|---:|---:|")
    for N1 in widths:
        full, default = [], []
        for _ in range(args.repeats):  # alternating, so that a noisy machine hits both alike
            full.append(seconds_per_draw(data, N1, True, draws))
            default.append(seconds_per_draw(data, N1, False, draws))
        f, g = np.median(full) * 1e3, np.median(default) * 1e3
        print(f"| {N1} | {f:.1f} | {g:.1f} | {f / g:.2f} |")


if __name__ == "__main__":
    main()
