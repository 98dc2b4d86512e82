"""Where the readout overlaps of the shared field come from at α = 10 (issue 46: its overlaps are twice the finite
network's on MNIST (0, 1), P = 200, N1 = 20), against the sampled network, neuron by neuron.

Each neuron's readout energy E[v_i v_i^T | w_i] (the overlap ⟨v vᵀ⟩/N1 is their mean over neurons):

* the network: v given the hidden weights is Gaussian, so with A = Φ/√(λ1 N1), G = AᵀA + T and V = G⁻¹AᵀY
  (renormpp.readout.weight_space_observables), neuron i's is (V_iᵀV_i + T (G⁻¹)_ii)/λ1, averaged over the draws
  (studies/single_neuron.py's posterior: kinetic Langevin, two chains, 1000 kept draws each; its cache is read);
* the shared field: the summand of ``SharedFieldFit.readout_overlap``, N1 ((c + q)⁻¹ + y yᵀ) at each neuron of (F1).

A neuron is a specialist in a draw where its weights' projection on the label direction (the difference of the
class means, in prior units) has (u·w)² > 9, three prior standard deviations, as in studies/single_neuron.py.
The table: specialists per network (N1 × their share of neuron-draws), their mean (u·w)², the readout energy of a
specialist and of the rest, the specialists' share of the overlap, and the overlap.

Run:  .venv/bin/python studies/specialists.py [--root DATA] [--neurons 4000]   (about 6 minutes on 2 cores; the
      network's draws are kept in --out and read again)
      .venv/bin/python studies/specialists.py --quick                          (smoke run; numbers mean nothing)
"""
from __future__ import annotations

import argparse
import json
import sys
import types
import warnings
from pathlib import Path

import numpy as np

import renormpp as rp
from renormpp.theory import shared_field as sf
from renormpp.theory.single_neuron import directions, features

sys.path.insert(0, str(Path(__file__).parent))
import single_neuron  # noqa: E402  (the network's draws, sampled and cached as there)

T = single_neuron.T


def network_energies(X, Y, w, lambda1=1.0):
    """Each neuron's E[v_i v_i^T | w] (first output's diagonal), (draws, N1), from draws ``w`` (draws, N1, N0)."""
    out = np.empty(w.shape[:2])
    for j, wj in enumerate(w):
        A = features(wj, X, "erf") / np.sqrt(lambda1 * len(wj))  # (P, N1)
        Ginv = np.linalg.inv(A.T @ A + T * np.eye(len(wj)))
        V = Ginv @ A.T @ Y
        out[j] = (V[:, 0] ** 2 + T * np.diag(Ginv)) / lambda1
    return out


def summary(p2, energy, N1):
    """The table's row from projections (u·w)² and readout energies of the same neuron-draws (any equal shapes)."""
    spec = p2 > 9
    return dict(specialists=float(N1 * spec.mean()), specialist_uw2=float(p2[spec].mean()) if spec.any() else None,
                specialist_energy=float(energy[spec].mean()) if spec.any() else None,
                bulk_energy=float(energy[~spec].mean()), share=float(energy[spec].sum() / energy.sum()),
                overlap=float(energy.mean()))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", help="the data sets' folder (default: the loaders' rules, RENORMPP_DATA)")
    ap.add_argument("--out", default="single-neuron", help="folder of the network's cached draws and the JSON")
    ap.add_argument("--neurons", type=int, default=4000, help="the shared field's neurons")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    P, N1 = (40, 4) if args.quick else (200, 20)
    sizes = dict(warmup=200, draws=200, thin=2) if args.quick else dict(warmup=2000, draws=8000, thin=8)
    d = rp.datasets.mnist(classes=(0, 1), P=P, P_test=1000, root=args.root, seed=0)
    X, Y = np.asarray(d.X, float), np.asarray(d.Y, float)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    w, _ = single_neuron.network_draws(d, N1, types.SimpleNamespace(seed=0, **sizes), out)  # (chains, n, N1, N0)
    u = directions(X, Y, Y - Y.mean(axis=0))["labels"]
    draws = w.reshape(-1, *w.shape[2:])
    rows = {"network": summary((draws @ u) ** 2, network_energies(X, Y, draws), N1)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = sf.solve(X, Y, N1=N1, T=T, neurons=args.neurons, maxiter=160, progress=True)
    if not fit.converged:
        raise SystemExit(f"the shared field did not converge: {fit.reason}")
    wt, s, _, C, y, _ = fit._law()
    rows["shared field"] = summary((wt @ u) ** 2 * fit.lambda0, N1 * (C[:, 0, 0] + y[:, 0] ** 2), N1)
    print(f"MNIST (0, 1), P = {P}, N1 = {N1} (α = {P / N1:g}); the shared field with {args.neurons} neurons, "
          f"{fit.n_iter} iterations\n")
    print("| | specialists of N1 | their (u·w)² | readout energy of a specialist | of the rest | specialists' share of "
          "the overlap | overlap (1,1) |\n|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        cells = [f"{r['specialists']:.2f}"] + [f"{r[k]:.3g}" if r[k] is not None else "–"
                                               for k in ("specialist_uw2", "specialist_energy")]
        print(f"| {name} | " + " | ".join(cells) + f" | {r['bulk_energy']:.3f} | {r['share']:.0%} | {r['overlap']:.3f} |")
    (out / "specialists.json").write_text(json.dumps(dict(P=P, N1=N1, neurons=args.neurons, rows=rows), indent=1))


if __name__ == "__main__":
    main()
