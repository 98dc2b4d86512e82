"""How far a sampled theory moves with its seed, and what replicates (`rp.theory.solve(..., replicates=R)`, Eqs.
(R1)-(R2)) make of it: specialists in the field of an adaptive bulk at k = 0 (the shared field, its default
settings) on the hyperplane problem of tests/hyperplane.py (P = 60, N0 = 6, D = 2, T = 0.05) at N1 = 6 and 12,
against NUTS with v integrated out. Per width: each seed's ε_g, their standard deviation (a single solve's seed
noise), the replicates' ε_g (R2) with its error, the bias (R2) removes, and Δ, z against NUTS; the number of
replicates an error of 0.3% of ε_g would take.

Run:  .venv/bin/python studies/replicates.py        (resumable: each seed's fit and each NUTS run is kept in --out,
      default runs/replicates/; --seeds 8 the replicates per width, --widths 6,12)
"""
from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import renormpp as rp
from renormpp.theory.replicates import Replicates

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
from hyperplane import hyperplane_problem, nuts_posterior  # noqa: E402

T = 0.05


def fit_of(X, Y, N1, seed, out: Path):
    """The k = 0 solve at ``seed`` (kept as a pickle) and its seconds."""
    path = out / f"fit_N1{N1}_seed{seed}.pkl"
    if path.exists():
        return pickle.loads(path.read_bytes())
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = rp.theory.field_specialists.solve(X, Y, N1=N1, k=0, T=T, seed=seed)
    rec = (fit, time.perf_counter() - t)
    out.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(rec))
    return rec


def nuts_of(X, Y, X0, Y0, N1, out: Path) -> dict:
    path = out / f"nuts_N1{N1}.json"
    if path.exists():
        return json.loads(path.read_text())
    _, eps, _ = nuts_posterior(X, Y, X0, Y0, N1=N1, T=T, key=N1)
    rec = dict(eps_g=float(eps.mean()), error=float(eps.reshape(20, -1).mean(axis=1).std(ddof=1) / np.sqrt(20)))
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec))
    return rec


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/replicates")
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--widths", default="6,12")
    args = ap.parse_args(argv)
    out = Path(args.out)
    X, Y, X0, Y0, _ = hyperplane_problem()
    print("| N1 (α) | NUTS ε_g | single solves: ε_g per seed | sd (of ε_g) | s per solve | replicates (R2) ± error "
          "| bias removed | Δ | z | R for 0.3% |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for N1 in (int(w) for w in args.widths.split(",")):
        ref = nuts_of(X, Y, X0, Y0, N1, out)
        fits, secs = zip(*(fit_of(X, Y, N1, s, out) for s in range(args.seeds)))
        rep = Replicates(tuple(fits), tuple(range(args.seeds)))
        per = rep.eps_g_per_replicate(X0, Y0)
        eps, err = rep.generalization_error(X0, Y0), rep.monte_carlo_error(X0, Y0)["eps_g"]
        sd = per.std(ddof=1)
        delta = (ref["eps_g"] - eps) / eps
        z = (ref["eps_g"] - eps) / np.hypot(ref["error"], err)
        print(f"| {N1} ({60 / N1:g}) | {ref['eps_g']:.4f} ± {ref['error']:.4f} | {np.round(per, 4).tolist()} | "
              f"{sd / per.mean():.2%} | {np.median(secs):.0f} | {eps:.4f} ± {err:.4f} | {per.mean() - eps:.4f} | "
              f"{delta:+.1%} | {z:+.1f} | {int(np.ceil((sd / (0.003 * eps)) ** 2))} |", flush=True)


if __name__ == "__main__":
    main()
