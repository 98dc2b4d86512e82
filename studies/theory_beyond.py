"""Beyond leading order (issue 15): the cost of the corrected and ReLU theories, their Delta and z against sampled finite
networks (problem 1 and the demo sweep), and a finite-size-scaling extrapolation.

Run:  .venv/bin/python studies/theory_beyond.py                 (about 25 min on 2 cores; resumable: runs/beyond/)
      .venv/bin/python studies/theory_beyond.py --only cost     (a minute)
      .venv/bin/python studies/theory_beyond.py --quick         (smoke run at small sizes)

[1] cost: rp.theory.solve + generalization error on 1000 test points at P = 2000, D = 10 (synthetic erf teacher, N0 = 784,
    N1 = 1000, erf): exact, corrected (target: within 3x exact), and relu exact; medians of 3, timed in turn.
[2] validation: Delta and z of every theory against the default sampler (kinetic Langevin + exact Gibbs draws of v,
    Rao-Blackwellized observables) for eps_g and every overlap entry, on problem 1 (P=500, N0=100, N1=250, D=3, linear
    teacher) and on the demo sweep (P=200, N0=50, D=3, N1 = 50 ... 800), through `renormpp run` (renormpp.experiments).
[3] scaling: P and N1 grow together at alpha = 2 (s = 1, 2, 4; P = 100 s), N0 fixed at 50 and growing with P; the report
    extrapolates Delta = MC - theory to 1/N1 = 0 for every theory.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import renormpp as rp
from renormpp.experiments import demo

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
from theory_speed import machine_info  # noqa: E402

OUT = Path("runs/beyond")


def cost(quick):
    P, D, N0 = (300, 4, 50) if quick else (2000, 10, 784)
    d = rp.datasets.synthetic(P=P, P_test=1000, N0=N0, D=D, teacher="erf_1hl", seed=0)
    runs = {"exact": [], "corrected": [], "relu exact": []}
    for _ in range(3):
        for name in runs:
            kw = dict(method="corrected" if name == "corrected" else "exact",
                      activation="relu" if name.startswith("relu") else "erf")
            t = time.perf_counter()
            fit = rp.theory.solve(d.X, d.Y, N1=P // 2, T=0.01, **kw)
            fit.generalization_error(d.X_test, d.Y_test)
            runs[name].append(time.perf_counter() - t)
    print(f"[1] solve + eps_g on 1000 test points, P={P}, D={D}, N0={N0}, N1={P // 2}: medians of 3")
    med = print_medians(runs, "exact")
    print(f"    target: corrected within 3x exact -> {'PASS' if med['corrected'] <= 3 * med['exact'] else 'FAIL'}\n")


def print_medians(runs: dict, base) -> dict:
    """Print the median of each entry's timings and its ratio to ``base``'s; returns the medians."""
    med = {k: statistics.median(v) for k, v in runs.items()}
    for k, v in med.items():
        print(f"    {str(k):12s} {v:7.2f} s  ({v / med[base]:.2f}x {base})  runs {np.round(runs[k], 2).tolist()}")
    return med


def table(out: Path, title: str, theories=None):
    import pandas as pd

    pooled = pd.read_csv(out / "pooled.csv")
    if theories is not None:
        pooled = pooled[pooled.theory.isin(theories)]
    print(f"    {title}")
    for N1, g in pooled.groupby("N1"):
        print(f"    N1 = {N1:g}:  quantity   MC +- error   | " + " | ".join(f"{t}: Delta, z" for t in g.theory.unique()))
        for q, r in g.groupby("quantity", sort=False):
            cells = " | ".join(f"{row.delta:.2%}, {row.z:+.1f}" if np.isfinite(row.prediction) else "n/a"
                               for row in r.itertuples())
            first = r.iloc[0]
            print(f"      {q:14s} {first.mc_mean:.5f} +- {first.mc_error:.5f} | {cells}")


def validation(quick):
    print("[2] Delta (relative) and z against the sampled networks, seeds pooled")
    problem1 = {"data": {"name": "synthetic", "P": 100 if quick else 500, "P_test": 500, "N0": 20 if quick else 100,
                         "D": 3, "teacher": "linear"},
                "model": {"N1": [50 if quick else 250], "T": 0.01},
                "sampler": {"kind": "kinetic", "rao_blackwell": True, "num_samples": 300 if quick else 3000},
                "run": {"out": str(OUT / "problem1"), "progress": False}}
    out = rp.experiments.run(problem1)
    table(out, "problem 1")
    sweep = {**demo.CONFIG, "sampler": {**demo.CONFIG["sampler"], "rao_blackwell": True},
             "run": {**demo.CONFIG["run"], "out": str(OUT / "demo"), "progress": False}}
    if quick:
        sweep = {**sweep, "model": {**sweep["model"], "N1": [50, 200]}, "sampler": {**sweep["sampler"],
                                                                                    "num_samples": 300}}
    table(rp.experiments.run(sweep), "the demo sweep")
    print()


def scaling(quick):
    import pandas as pd

    print("[3] finite-size scaling at alpha = 2: Delta_inf (relative) of each theory, extrapolated to 1/N1 = 0")
    for grow in (False, True):
        cfg = {"data": {"name": "synthetic", "P": 50 if quick else 100, "P_test": 500, "N0": 25 if quick else 50,
                        "D": 2, "teacher": "linear"},
               "model": {"N1": [25 if quick else 50], "T": 0.01},
               "sampler": {"kind": "kinetic", "rao_blackwell": True, "num_samples": 300 if quick else 2000},
               "scaling": {"scales": [1, 2, 4], "grow_N0": grow},
               "run": {"out": str(OUT / f"scaling_{'grow' if grow else 'fixed'}_N0"), "progress": False}}
        out = rp.experiments.run(cfg)
        fits = pd.read_csv(out / "extrapolation.csv")
        print(f"    N0 {'grows with P' if grow else 'fixed'} ({out / 'report.md'}):")
        for r in fits.itertuples():
            print(f"      {r.quantity:24s} {r.theory:15s} Delta_inf = {r.delta_inf:+.2%} +- {r.delta_inf_error:.2%}, "
                  f"slope {r.slope:+.3g} +- {r.slope_error:.2g}, chi2/dof {r.chi2_dof:.2g}")
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", choices=("cost", "validation", "scaling"))
    a = ap.parse_args()
    global OUT
    if a.quick:
        OUT = Path("runs/beyond-quick")
    print(machine_info())
    warnings.simplefilter("ignore")
    for name, fn in (("cost", cost), ("validation", validation), ("scaling", scaling)):
        if a.only in (None, name):
            fn(a.quick)
    print("load average at end (1/5/15 min): " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
