"""The shared field with each neuron in the cavity field of the other N1 - 1 (`rp.theory.shared_field.solve(...,
cavity=True)`, averaged expectation propagation, (C1)-(C4)) against the shared field (F2) and the finite network, on
the hyperplane problem of tests/hyperplane.py (P = 60, N0 = 6, D = 2, T = 0.05, erf), where the network's neurons
specialize. Per width: ε_g and the readout overlaps' diagonal against NUTS (v integrated out, 2 chains of 1000 after
500), and the evidence (E1) or (E3) against the exact one (k = N1: tempered SMC over all weights, the rows of
studies/evidence.py, kept in the same folder). Δ = (NUTS - theory)/|theory| for ε_g, log Z - exact log Z in nats for
the evidence. ``--problem tiny``: P = 5, N0 = 2, D = 2, T = 0.1, Gaussian labels (studies/evidence_cavity.py's
problem; NUTS keyed by N1, ε_g on the training inputs).

Run:  .venv/bin/python studies/cavity_field.py     (resumable: each row is kept in --out, default runs/evidence/;
      --widths 6,12; ~60 min on 2 cores, 23 of them the exact evidence at N1 = 12)
      .venv/bin/python studies/cavity_field.py --problem tiny    (--widths 1,4,8, runs/evidence/tiny/; ~10 min)
      --tol 0.02: the solves' tolerance (the hyperplane's shared field at N1 = 6 has a Monte Carlo error of 0.016 in
      its field with the default 40 000 neurons, above the default tol 0.01, and does not converge)
      --proposal fitted: the solves' averages by importance weights (exact in expectation) instead of the default
      population moved to (F1) (at N1 = 1 on the tiny problem the moved population puts o11 24% high)
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import arviz as az
import numpy as np
from scipy.special import erf

import renormpp as rp
from renormpp.theory import field_specialists as fs
from renormpp.theory.evidence import log_evidence
from renormpp.theory.specialists import _problem

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).parent))
from hyperplane import hyperplane_problem, nuts_posterior  # noqa: E402


def _tiny():
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((5, 2)), rng.standard_normal((5, 2))
    return X, Y, X, Y


def one_neuron_overlap(X, Y, T, nodes=120):
    """The exact readout overlap <v v^T> of a network of one neuron (erf, unit priors), by a product Gauss-Hermite
    rule over its weight w (N0 = 1 or 2): given w, each readout is Gaussian of precision 1 + |s|^2/T and mean
    s.Y/(T precision)."""
    x, wq = np.polynomial.hermite_e.hermegauss(nodes)
    grids = np.meshgrid(*([x] * X.shape[1]), indexing="ij")
    w = np.stack([g.ravel() for g in grids], axis=1)
    log_q = sum(np.log(g.ravel()) for g in np.meshgrid(*([wq] * X.shape[1]), indexing="ij"))
    s = erf(w @ X.T / np.sqrt(X.shape[1]))
    prec = 1 + np.sum(s * s, axis=1) / T
    mu = (s @ Y) / T / prec[:, None]
    log_p = log_q + 0.5 * np.sum(mu**2, axis=1) * prec - 0.5 * Y.shape[1] * np.log(prec)
    p = np.exp(log_p - log_p.max())
    vv = np.eye(Y.shape[1])[None] / prec[:, None, None] + np.einsum("na,nb->nab", mu, mu)
    return np.einsum("n,nab->ab", p / p.sum(), vv)


#: problem: (X, Y, X0, Y0), T, default widths, NUTS key (None: N1), output subfolder
PROBLEMS = {"hyperplane": (lambda: hyperplane_problem()[:4], 0.05, "6,12", 0, ""),
            "tiny": (_tiny, 0.1, "1,4,8", None, "tiny")}


def _kept(path: Path, compute) -> dict:
    if path.exists():
        return json.loads(path.read_text())
    rec = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec))
    return rec


def exact_row(X, Y, N1, T, out: Path) -> dict:
    """The finite network's evidence (every neuron explicit), kept as studies/evidence.py keeps it."""
    def compute():
        zero = np.zeros((Y.size, Y.size))  # no bulk: the evidence is the SMC over all weights, no solve needed
        fit = fs.FieldSpecialistFit(W=np.zeros((1, N1, X.shape[1])), k=N1, m=None, Sigma=None, L_W=zero, L_C=zero,
                                    history=[], bulk=None, _pb=_problem(X, Y, N1, N1, T, 1.0, 1.0, "erf"))
        e = log_evidence(fit, replicates=4)
        return dict(N1=N1, k=N1, log_z=e.log_z, error=e.error, replicates=e.replicates.tolist(), converged=True)
    return _kept(out / f"N1={N1}_k={N1}.json", compute)


def theory_row(X, Y, X0, Y0, N1, T, cavity, proposal, tol, out: Path) -> dict:
    """The shared field (cavity=False) or the cavity field at width N1: ε_g, the overlap's diagonal, the evidence."""
    def compute():
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = rp.theory.shared_field.solve(X, Y, N1=N1, T=T, cavity=cavity, proposal=proposal, tol=tol)
        solve_s = time.perf_counter() - t
        if not fit.converged:  # no prediction to compare: kept with the reason
            return dict(eps_g=np.nan, overlap=[np.nan] * Y.shape[1], log_z=np.nan, error=np.nan, converged=False,
                        reason=fit.reason, solve_s=solve_s, evidence_s=0.0)
        t = time.perf_counter()
        e = log_evidence(fit, replicates=4)
        return dict(eps_g=float(fit.generalization_error(X0, Y0)),
                    overlap=np.diag(fit.readout_overlap).tolist(), log_z=e.log_z, error=e.error,
                    converged=fit.converged, solve_s=solve_s, evidence_s=time.perf_counter() - t)
    tag = ("" if proposal == "mcmc" else f"_{proposal}") + ("" if tol is None else f"_tol{tol:g}")
    return _kept(out / f"N1={N1}_{'cavity' if cavity else 'shared'}{tag}.json", compute)


def nuts_row(X, Y, X0, Y0, N1, T, key, out: Path) -> dict:
    def compute():
        _, eps, overlap = nuts_posterior(X, Y, X0, Y0, N1=N1, T=T, key=key)
        chains = np.asarray(eps).reshape(2, -1)
        return dict(eps_g=float(eps.mean()), eps_err=float(az.mcse(chains).item()),
                    overlap=np.diag(overlap.mean(0)).tolist())
    return _kept(out / f"N1={N1}_nuts.json", compute)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", choices=sorted(PROBLEMS), default="hyperplane")
    ap.add_argument("--out", default="runs/evidence")
    ap.add_argument("--widths", default=None)
    ap.add_argument("--proposal", default="mcmc", choices=rp.theory.shared_field.PROPOSALS,
                    help="the solves' proposal (default: the solver's, mcmc)")
    ap.add_argument("--tol", type=float, default=None, help="the solves' tolerance (default: the solver's)")
    args = ap.parse_args(argv)
    data, T, widths, key, sub = PROBLEMS[args.problem]
    out = Path(args.out) / sub
    X, Y, X0, Y0 = data()
    print("| N1 | theory | ε_g: theory | NUTS | Δ | overlap diagonal: theory | NUTS | log Z | exact log Z "
          "| Δ (nats) | converged | s (solve + evidence) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for N1 in (int(w) for w in (args.widths or widths).split(",")):
        ref = nuts_row(X, Y, X0, Y0, N1, T, N1 if key is None else key, out)
        exact = exact_row(X, Y, N1, T, out)
        for cavity in (False, True):
            r = theory_row(X, Y, X0, Y0, N1, T, cavity, args.proposal, args.tol, out)
            name = (("cavity (C1)-(C4)" if cavity else "shared field (F2)") + f", {args.proposal}"
                    + ("" if args.tol is None else f", tol {args.tol:g}"))
            nuts = (f"{ref['eps_g']:.4f} ± {ref['eps_err']:.4f}", ", ".join(f"{o:.2f}" for o in ref["overlap"]),
                    f"{exact['log_z']:.2f} ± {exact['error']:.2f}")
            ours = (("–",) * 5 if not r["converged"] else
                    (f"{r['eps_g']:.4f}", f"{(ref['eps_g'] - r['eps_g']) / abs(r['eps_g']):+.1%}",
                     ", ".join(f"{o:.2f}" for o in r["overlap"]), f"{r['log_z']:.2f} ± {r['error']:.2f}",
                     f"{r['log_z'] - exact['log_z']:+.2f}"))
            print(f"| {N1} | {name} | {ours[0]} | {nuts[0]} | {ours[1]} | {ours[2]} | {nuts[1]} | {ours[3]} | "
                  f"{nuts[2]} | {ours[4]} | {'yes' if r['converged'] else 'no'} | "
                  f"{r['solve_s'] + r['evidence_s']:.0f} |", flush=True)
    if "1" in (args.widths or widths).split(",") and X.shape[1] <= 2:
        o = one_neuron_overlap(X, Y, T)
        print(f"\nN1 = 1 by quadrature over the neuron's weight: overlap diagonal {o[0, 0]:.3f}, {o[1, 1]:.3f}, "
              f"off-diagonal {o[0, 1]:.3f}")


if __name__ == "__main__":
    main()
