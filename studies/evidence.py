"""The evidence that the field-specialist theory gives with k explicit neurons (`rp.theory.evidence`, Eqs.
(E1)-(E2)) against the finite network's exact evidence (k = N1, every neuron explicit: tempered SMC over all weights,
checked against quadrature in tests/test_evidence.py), on the hyperplane problem of tests/hyperplane.py (P = 60,
N0 = 6, D = 2, T = 0.05). Per width and k: log Z_k with its error, Δ = log Z_k - log Z (nats), z, and the
seconds of the solve and of the evidence.

Run:  .venv/bin/python studies/evidence.py     (resumable: each row is kept in --out, default runs/evidence/;
      --widths 2,6,12, --ks 0,1,2 besides k = N1; ~45 min, 23 of them the exact evidence at N1 = 12)
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import renormpp as rp
from renormpp.theory.evidence import log_evidence

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
from hyperplane import hyperplane_problem  # noqa: E402

T = 0.05


def row(X, Y, N1, k, out: Path) -> dict:
    """The evidence at width N1 with k explicit neurons, kept as json."""
    path = out / f"N1={N1}_k={k}.json"
    if path.exists():
        return json.loads(path.read_text())
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = rp.theory.field_specialists.solve(X, Y, N1=N1, k=k, T=T)
    solve_s = time.perf_counter() - t
    t = time.perf_counter()
    e = log_evidence(fit, replicates=4)
    rec = dict(N1=N1, k=k, log_z=e.log_z, error=e.error, replicates=e.replicates.tolist(), converged=fit.converged,
               solve_s=solve_s, evidence_s=time.perf_counter() - t)
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec))
    return rec


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/evidence")
    ap.add_argument("--widths", default="2,6,12")
    ap.add_argument("--ks", default="0,1,2")
    args = ap.parse_args(argv)
    out = Path(args.out)
    X, Y, _, _, _ = hyperplane_problem()
    print("| N1 | k | log Z_k | exact log Z (k = N1) | Δ (nats) | z | converged | s (solve + evidence) |")
    print("|---|---|---|---|---|---|---|---|")
    for N1 in (int(w) for w in args.widths.split(",")):
        exact = row(X, Y, N1, N1, out)
        for k in sorted({int(k) for k in args.ks.split(",") if int(k) < N1}):
            r = row(X, Y, N1, k, out)
            delta = r["log_z"] - exact["log_z"]
            print(f"| {N1} | {k} | {r['log_z']:.2f} ± {r['error']:.2f} | "
                  f"{exact['log_z']:.2f} ± {exact['error']:.2f} | "
                  f"{delta:+.2f} | {delta / np.hypot(r['error'], exact['error']):+.1f} | "
                  f"{'yes' if r['converged'] else 'no'} | {r['solve_s'] + r['evidence_s']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
