"""Deep networks (issue 16): the depth-L Wishart-ansatz theory against sampled finite deep networks, and its cost.

Run:  .venv/bin/python studies/deep.py            (about 8 min on 2 cores; resumable: runs/deep/)
      .venv/bin/python studies/deep.py --quick    (smoke run at small sizes)

[1] cost: rp.theory.solve (exact) + generalization error on 1000 test points at P = 2000, D = 10, depth 1, 2, 3
    (synthetic erf teacher, N0 = 784, N = 1000); medians of 3 (target: depth L at the speed of depth 1).
[2] validation: Delta and z of the exact, one-loop and infinite-width theories against the default sampler (kinetic
    Langevin + exact Gibbs draws of v, Rao-Blackwellized observables) for eps_g and every overlap entry, at depth 1,
    2 and 3 and two sizes: (P, N0, N, D) = (100, 50, 50, 2) and (200, 100, 100, 2), synthetic erf teacher, through
    `renormpp run` with model.depth.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import renormpp as rp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
from theory_beyond import print_medians, table  # noqa: E402
from theory_speed import machine_info  # noqa: E402

OUT = Path("runs/deep")


def cost(quick):
    P, D, N0 = (300, 4, 50) if quick else (2000, 10, 784)
    d = rp.datasets.synthetic(P=P, P_test=1000, N0=N0, D=D, teacher="erf_1hl", seed=0)
    runs = {f"depth {L}": [] for L in (1, 2, 3)}
    for _ in range(3):
        for name in runs:
            t = time.perf_counter()
            fit = rp.theory.solve(d.X, d.Y, N1=P // 2, T=0.01, depth=int(name.split()[1]))
            fit.generalization_error(d.X_test, d.Y_test)
            runs[name].append(time.perf_counter() - t)
    print(f"[1] exact solve + eps_g on 1000 test points, P={P}, D={D}, N0={N0}, N={P // 2}: medians of 3")
    print_medians(runs, "depth 1")
    print()


def validation(quick):
    print("[2] Delta (relative) and z against the sampled deep networks")
    sizes = [(60, 30, 30)] if quick else [(100, 50, 50), (200, 100, 100)]
    for P, N0, N in sizes:
        for L in (1, 2, 3):
            cfg = {"data": {"name": "synthetic", "P": P, "P_test": 500, "N0": N0, "D": 2, "teacher": "erf_1hl"},
                   "model": {"N1": [N], "T": 0.01, "depth": L},
                   "sampler": {"kind": "kinetic", "rao_blackwell": True, "num_samples": 300 if quick else 3000},
                   "run": {"out": str(OUT / f"P={P}_N={N}_L={L}"), "progress": False}}
            t = time.perf_counter()
            out = rp.experiments.run(cfg)
            table(out, f"P={P}, N0={N0}, N={N}, D=2, depth {L} ({time.perf_counter() - t:.0f} s)",
                  theories=("exact", "one_loop", "infinite_width"))
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", choices=("cost", "validation"))
    a = ap.parse_args()
    global OUT
    if a.quick:
        OUT = Path("runs/deep-quick")
    print(machine_info())
    warnings.simplefilter("ignore")
    for name, fn in (("cost", cost), ("validation", validation)):
        if a.only in (None, name):
            fn(a.quick)
    print("load average at end (1/5/15 min): " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
