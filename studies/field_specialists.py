"""Specialists in the field of an adaptive bulk (`rp.theory.field_specialists`) against sampled networks on MNIST
(0, 1), T = 0.01, erf: ε_g at k = 0 (the shared field), 1 and 2 explicit neurons, beside the exact theory, with Δ
and z (the theory's own Monte Carlo error from its chains of specialists enters z; the bulk's population is not
counted). The sampled ε_g are those of `studies/specialist_theory.py` (the default sampler; docs/validity.md).

Run:  .venv/bin/python studies/field_specialists.py --root DATA/mnist     (resumable: each (P, N1, k) is a json in
      --out, default runs/field-specialists/; --points 200:100,200:20 chooses the points)
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import renormpp as rp
from renormpp.theory import field_specialists as fs

sys.path.insert(0, str(Path(__file__).parent))
from specialist_theory import SAMPLED, T  # noqa: E402

#: the solve's settings per P
SIZES = {200: dict(neurons=4000, iterations=6, inner=20, num_warmup=300, num_samples=100, chains=4),
         1000: dict(neurons=4000, iterations=4, inner=16, num_warmup=200, num_samples=60, chains=2)}


def solve_point(d, P, N1, k, out: Path) -> dict:
    path = out / f"P{P}_N1{N1}_k{k}.json"
    if path.exists():
        return json.loads(path.read_text())
    X, Y, X0, Y0 = (np.asarray(a, np.float64) for a in (d.X, d.Y, d.X_test, d.Y_test))
    t = time.perf_counter()
    fit = fs.solve(X, Y, N1=N1, k=k, T=T, **SIZES[P])
    eps = fit.eps_g_per_draw(X0, Y0) if k else np.array([fit.bulk.generalization_error(X0, Y0)])
    lab = Y.argmax(axis=1)
    u = X[lab == 1].mean(axis=0) - X[lab == 0].mean(axis=0)
    u /= np.linalg.norm(u)
    rec = dict(P=P, N1=N1, k=k, eps_g=float(eps.mean()), eps_g_err=fit.monte_carlo_error(X0, Y0)["eps_g"],
               converged=fit.converged, reason=fit.reason, history=fit.history, noise=fit.noise,
               overlap=fit.readout_overlap.tolist(),
               label_projection=((fit.W @ u) ** 2).mean(axis=0).tolist() if k else [],
               seconds=time.perf_counter() - t)
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec))
    return rec


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", help="the MNIST folder (default: the loaders' rules, RENORMPP_DATA)")
    ap.add_argument("--out", default="runs/field-specialists")
    ap.add_argument("--points", default="200:100,200:20", help="P:N1 pairs of SAMPLED")
    ap.add_argument("--k", default="0,1,2")
    args = ap.parse_args(argv)
    out = Path(args.out)
    print("| P | N1 (α) | sampled ε_g | exact: Δ | k | this theory: ε_g ± MC | Δ | z | (u·w)² of the explicit | s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for point in args.points.split(","):
        P, N1 = (int(x) for x in point.split(":"))
        sampled, err, _ = SAMPLED[(P, N1)]
        d = rp.datasets.mnist(classes=(0, 1), P=P, P_test=1000, root=args.root, seed=0)
        exact = rp.theory.solve(d.X, d.Y, N1=N1, T=T).generalization_error(d.X_test, d.Y_test)
        for k in (int(x) for x in args.k.split(",")):
            r = solve_point(d, P, N1, k, out)
            delta = (sampled - r["eps_g"]) / abs(r["eps_g"])
            z = (sampled - r["eps_g"]) / np.hypot(err, r["eps_g_err"])
            note = "" if r["converged"] else " (not converged)"
            print(f"| {P} | {N1} ({P / N1:g}) | {sampled:.5f} ± {err:.5f} | {(sampled - exact) / exact:+.1%} | {k} | "
                  f"{r['eps_g']:.5f} ± {r['eps_g_err']:.5f}{note} | {delta:+.1%} | {z:+.1f} | "
                  f"{np.round(r['label_projection'], 1).tolist()} | {r['seconds']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
