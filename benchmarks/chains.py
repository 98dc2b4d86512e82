"""Seconds per draw against the number of chains, vectorized on one device (issue 45, item 2).

The default sampler (kinetic Langevin, v integrated out, 4 updates per draw) on the linear teacher at P = 1000,
N0 = 144, D = 2, with 2, 8 and 32 chains in one program (``sampler.num_chains``; ``Chains`` vmaps the step over
them): seconds per draw of all chains, and per chain-draw. On 2 cores the chains share the cores, so more chains buy
starts and R-hat at a cost per chain-draw that this measures; on a GPU the chains fill the device (benchmarks/README.md).

    python benchmarks/chains.py [--chains 2 8 32] [--widths 100 1000] [--draws 10]
    python benchmarks/chains.py --smoke
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import numpy as np

import renormpp as rp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from theory_speed import machine_info  # noqa: E402


def seconds_per_draw(data, N1: int, chains: int, draws: int) -> tuple[float, float]:
    """(compile and first block seconds, seconds per draw of all chains)."""
    kernel = rp.infer.KineticLangevin(rp.models.one_hidden_layer, step_size=1e-4, inner_steps=4)
    run = rp.infer.Chains(kernel, num_chains=chains)
    t = time.perf_counter()
    state = run.init(jax.random.PRNGKey(0), 10, data.X, data.Y, N1=N1, T=0.01, integrate_v=True)
    state, _, _ = run.run(state, draws)
    first = time.perf_counter() - t
    t = time.perf_counter()
    run.run(state, draws)
    return first, (time.perf_counter() - t) / draws


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chains", type=int, nargs="+", default=[2, 8, 32])
    ap.add_argument("--widths", type=int, nargs="+", default=[100, 1000])
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument("--smoke", action="store_true", help="P = 40, N0 = 10, N1 = 8, 2 and 4 chains, 3 draws")
    args = ap.parse_args(argv)
    P, N0 = (40, 10) if args.smoke else (1000, 144)
    chains, widths, draws = ([2, 4], [8], 3) if args.smoke else (args.chains, args.widths, args.draws)
    data = rp.datasets.synthetic(P=P, P_test=10, N0=N0, D=2, teacher="linear", seed=0)
    print(machine_info())
    print(f"device: {jax.devices()[0].device_kind}; P = {P}, N0 = {N0}, D = 2")
    print("| N1 | chains | init + first block (s) | ms per draw (all chains) | ms per chain-draw | vs 2 chains |")
    print("|---:|---:|---:|---:|---:|---:|")
    for N1 in widths:
        base = None
        for c in chains:
            first, per = seconds_per_draw(data, N1, c, draws)
            per_chain = per / c
            base = per_chain if base is None else base
            print(f"| {N1} | {c} | {first:.1f} | {per * 1e3:.1f} | {per_chain * 1e3:.1f} | {per_chain / base:.2f} |",
                  flush=True)


if __name__ == "__main__":
    main()
