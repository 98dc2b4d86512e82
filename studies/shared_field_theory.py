r"""A third theory beyond the Gaussian equivalence: the shared field with each neuron's own bulk (issue 46, item 2).

After the readout is integrated, every neuron sees the field f̄ (P x D) conjugate to the predictions through
exp(-||f̄ᵀs(w)||²/(2c)), c = λ1 N1, and f̄ is one field shared by all neurons. Take it Gaussian, f̄ = i m + g with
g of covariance Σ (PD x PD), and keep each neuron's projections exact: given w, gᵀs(w) is Gaussian with covariance
q(w) = [s(w)ᵀ Σ_ab s(w)] (D x D, the neuron's own bulk) and z = mᵀs(w) is its spike. One neuron's law is the cavity
law (S3) of renormpp.theory.single_neuron with these,

    p(w) ∝ N(w; 0, 1/λ0) det(1 + q/c)^(-1/2) exp(½ zᵀ(c + q)⁻¹z),                                   (F1)

and the stationarity of the shared field, with y = (c + q)⁻¹z, gives

    Σ⁻¹ = T + N1 E[((c+q)⁻¹ + y yᵀ) ⊗ s sᵀ],        T m + N1 E[s yᵀ] = Y.                          (F2)

Predictions: the mean N1 E[s(x) y_a]; the variance, from -∂²_j log Z with a source j at the test point (including
the response of m to it),

    var_a = N1 E[(c+q)⁻¹_aa s*²] + N1 E[s*² y_a²] - N1 E[s* y_a]² - N1² n_aᵀ (T + N1 L)⁻¹ n_a,      (F3)

L = E[((c+q)⁻¹ + yyᵀ) ⊗ ssᵀ] - E[y ⊗ s]E[y ⊗ s]ᵀ,
n_a,b = E[(c+q)⁻¹_ab s* s] + E[y_a y_b s* s] - E[s* y_a]E[y_b s].
For a linear activation (Gaussian s, q concentrated) (F1)-(F3) are solved in closed form (`linear_closed_form`) and
reproduce the exact theory, which is exact for linear networks. For erf the expectations over (F1) average over
neurons moved to (F1) by Langevin steps (``--proposal mcmc``, the default since issue 46's exact neurons), or
reweight a fixed sample drawn from a Gaussian proposal fitted to (F1) (``--proposal fitted``: importance sampling,
with the exact NNGP kernel as control variate; the effective sample size and the weights' Pareto k are reported; the
tables of benchmarks/README.md before "Exact neurons" are this one's) or from the prior (``--proposal prior``, the
first version), and (F2) is iterated (Anderson mixing), continued in α from the widest network.

The erf solve is :func:`renormpp.theory.shared_field.solve`; this script adds the linear closed form (an independent
check of (F1)-(F3)) and the tables against the sampled networks.

Run: ``python studies/shared_field_theory.py`` (MNIST (0, 1), P = 200; about 6 minutes on 2 cores). Prints the
tables of benchmarks/README.md, "shared_field_theory.py". ``--P 1000 --widths 1000 500`` times it at the paper's size.
``--sampled FOLDER ...`` compares it instead with the points of ``renormpp run`` folders, on their own data (the
validity map's linear-teacher points where the exact theory holds: issue 46, item 3); ``--seeds K`` solves each width
with K samples of prior neurons and reports their spread (the theory's own Monte Carlo error).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import renormpp as rp
from renormpp.theory import shared_field

#: the sampled networks' eps_g on the same data (docs/validity.md, "Real data": the validity map, MNIST P = 200)
SAMPLED = {400: (0.07542, 0.0002), 200: (0.05662, 0.0002), 100: (0.02955, 0.00009), 50: (0.0155, 0.00005),
           20: (0.01018, 0.00003)}


def _blocks(Mat, D, P):
    """The D x D blocks (P x P each) of an output-major PD x PD matrix."""
    return [[Mat[a * P:(a + 1) * P, b * P:(b + 1) * P] for b in range(D)] for a in range(D)]


def linear_closed_form(d, N1, T=0.01, lam1=1., iters=4000, eta=0.3):
    """(F1)-(F3) for a linear activation: s Gaussian with covariance K, q concentrated at its mean, the tilted law
    Gaussian (moments by Isserlis): (bias, variance, iterations, last residual)."""
    X, Y, Xt, Yt = d.X, d.Y, d.X_test, d.Y_test
    P, N0 = X.shape; D = Y.shape[1]; c = lam1 * N1
    K = X @ X.T / N0; Kx = Xt @ X.T / N0; Kxx = np.sum(Xt**2, 1) / N0
    Sig = np.kron(np.eye(D), np.linalg.inv(T*np.eye(P) + K/lam1)); m = np.linalg.solve(T*np.eye(P) + K/lam1, Y)
    I = np.eye(P*D)
    def state(m, Sig):
        Om = np.array([[np.trace(b @ K) for b in row] for row in _blocks(Sig, D, P)])
        C = np.linalg.inv(c*np.eye(D) + Om)
        Km = K @ m
        Kt = K + Km @ np.linalg.inv(np.linalg.inv(C) - m.T @ Km) @ Km.T
        return Om, C, Kt
    for it in range(iters):
        Om, C, Kt = state(m, Sig)
        r = m @ C; u = Kt @ r; R = r.T @ Kt @ r
        uu = np.block([[np.outer(u[:, a], u[:, b]) + np.outer(u[:, b], u[:, a]) for b in range(D)] for a in range(D)])
        Sinv = T*I + N1 * (np.kron(C + R, Kt) + uu)
        Sn = np.linalg.inv(Sinv)
        mn = np.linalg.solve(T*I + N1*np.kron(C, Kt), Y.T.reshape(-1)).reshape(D, P).T   # output-major vec
        res = np.linalg.norm(Sn - Sig)/np.linalg.norm(Sig) + np.linalg.norm(mn - m)/np.linalg.norm(m)
        Sig = (1-eta)*Sig + eta*Sn; m = (1-eta)*m + eta*mn
        if res < 1e-10: break
    Om, C, Kt = state(m, Sig); r = m @ C; u = Kt @ r; R = r.T @ Kt @ r
    Km = K @ m; Mi = np.linalg.inv(np.linalg.inv(C) - m.T @ Km)
    Ktx = Kx + (Kx @ m) @ Mi @ Km.T          # Kt(x*, X)
    Ktxx = Kxx + np.einsum("id,de,ie->i", Kx @ m, Mi, Kx @ m)
    kr = Ktx @ r                              # (Pt, D): E[s* (Cz)_a]
    G = N1 * kr                               # mean: N1 E[s* z^T] C
    uu = np.block([[np.outer(u[:, b2], u[:, b1]) for b2 in range(D)] for b1 in range(D)])
    L = T*I + N1 * (np.kron(C + R, Kt) + uu)
    Linv = np.linalg.inv(L)
    var = np.zeros(len(Xt))
    for a in range(D):
        three = N1 * C[a, a] * Ktxx + N1 * (Ktxx * R[a, a] + 2 * kr[:, a]**2) - N1 * kr[:, a]**2
        # n*_{a,b} = (C+R)_ab Ktx + u_a (kr)_b    (rows: test points; columns: (b, mu))
        ns = np.concatenate([(C + R)[a, b] * Ktx + np.outer(kr[:, b], u[:, a]) for b in range(D)], axis=1)
        var += three - N1**2 * np.einsum("ip,pq,iq->i", ns, Linv, ns)
    bias = np.mean(np.sum((Yt - G)**2, 1))
    return bias, var.mean(), it, res


def erf_table(d, widths, sampled, *, neurons=10000, damping=None, maxiter=None, seeds=1, T=0.01, proposal="mcmc"):
    """The shared field at ``widths`` (widest first, each continued from the last converged one; with ``seeds`` > 1
    each seed's own continuation) against the exact theory and ``sampled`` ({N1: (eps_g, error)}): (rows, table)."""
    P = len(d.X)
    runs = {}
    for seed in range(seeds):
        t = time.perf_counter()
        for N1, fit in shared_field.continued(d.X, d.Y, widths, T=T, neurons=neurons, damping=damping,
                                              maxiter=maxiter, seed=seed, proposal=proposal):
            r = dict(ess=fit.ess, pareto_k=fit.pareto_k, iterations=fit.n_iter, converged=fit.converged, reason=fit.reason,
                     residual=float(np.max(fit.residuals[-1])) if fit.n_iter else float("nan"))
            if fit.converged:
                pred = fit.predict(d.X_test)
                r["bias"] = float(np.mean(np.sum((d.Y_test - pred.mean) ** 2, axis=1)))
                r["var"] = float(np.mean(pred.var.sum(axis=1)))
                r["eps_g"] = r["bias"] + r["var"]
            r["seconds"] = time.perf_counter() - t
            t = time.perf_counter()
            runs.setdefault(N1, []).append(r)
            print(f"N1 = {N1}, seed {seed}: {fit!r}, {r['seconds']:.0f} s", flush=True)
    rows = []
    lines = ["| N1 (α) | ε_g (bias + variance) | spread over seeds | exact theory | sampled network | Δ vs sampled | z | "
             "exact's Δ | exact's z | ESS | Pareto k | iterations | seconds |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for N1 in widths:
        rs = runs[N1]
        exact = float(rp.theory.solve(d.X, d.Y, N1=N1, T=T).generalization_error(d.X_test, d.Y_test))
        r = dict(rs[0], exact=exact, seeds=[x.get("eps_g") for x in rs])
        mc, err = sampled.get(N1, (np.nan, np.nan))
        ok = all(x["converged"] for x in rs)
        spread = float(np.std([x["eps_g"] for x in rs], ddof=1)) if ok and len(rs) > 1 else np.nan
        r.update(sampled=mc, sampled_error=err, spread=spread)
        rows.append((N1, r))
        value = (f"{r['eps_g']:.5f} ({r['bias']:.5f} + {r['var']:.5f})" if r["converged"]
                 else f"did not converge: {r['reason'].split(':')[0]}")
        cmp = (f"{(r['eps_g'] - mc) / mc:+.1%} | {(r['eps_g'] - mc) / err:+.1f}" if r["converged"] and np.isfinite(mc)
               else " | ")
        ecmp = f"{(exact - mc) / mc:+.1%} | {(exact - mc) / err:+.1f}" if np.isfinite(mc) else " | "
        lines.append(f"| {N1} ({P / N1:.3g}) | {value} | {f'{spread:.5f}' if np.isfinite(spread) else '–'} | {exact:.5f} | "
                     f"{f'{mc:.5f} ± {err:.5f}' if np.isfinite(mc) else ''} | {cmp} | {ecmp} | {r['ess']:.0f} | "
                     f"{r['pareto_k']:.2f} | {r['iterations']} | {r['seconds']:.0f} |")
    return rows, "\n".join(lines)


def sampled_points(folder):
    """A ``renormpp run`` folder's data and its sampled eps_g per width: (data, {N1: (mean, error)})."""
    from renormpp.experiments.report import load_sweep

    sweep = load_sweep(folder)
    return sweep.data, {int(ds.attrs["N1"]): (float(ds.sel(quantity="eps_g").mc_mean),
                                              float(ds.sel(quantity="eps_g").mc_error)) for ds in sweep.pooled}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", help="the data sets' folder (default: the loaders' rules, RENORMPP_DATA)")
    ap.add_argument("--out", default="shared_field_theory.json")
    ap.add_argument("--neurons", type=int, default=10000, help="prior neurons reweighted (default 10000)")
    ap.add_argument("--P", type=int, default=200, help="training examples (the sampled values are for P = 200)")
    ap.add_argument("--widths", type=int, nargs="+", default=[400, 200, 100, 80, 65, 50],
                    help="widths, widest first (each continues from the last converged one)")
    ap.add_argument("--damping", type=float, help="share of each fixed-point step (default: 0.6; 0.3 with mcmc)")
    ap.add_argument("--maxiter", type=int, help="iterations (default: 150; 80 with mcmc)")
    ap.add_argument("--linear", action=argparse.BooleanOptionalAction, default=True,
                    help="the linear closed form first (P = 200 only)")
    ap.add_argument("--sampled", nargs="+", metavar="FOLDER",
                    help="renormpp run folders: compare with their points on their own data instead of MNIST")
    ap.add_argument("--seeds", type=int, default=1, help="samples of neurons per width (their spread)")
    ap.add_argument("--proposal", choices=shared_field.PROPOSALS, default="mcmc",
                    help="the neurons' law: moved to (F1) by MCMC (default), a Gaussian fitted to the tilt, or the "
                         "prior alone (the first version)")
    args = ap.parse_args()
    if args.maxiter is None and args.proposal != "mcmc":
        args.maxiter = 150
    if args.sampled:
        out = {}
        for folder in args.sampled:
            d, sampled = sampled_points(folder)
            rows, table = erf_table(d, sorted(sampled, reverse=True), sampled, neurons=args.neurons,
                                    damping=args.damping, maxiter=args.maxiter, seeds=args.seeds,
                                    proposal=args.proposal)
            print(f"\n{folder}: P = {len(d.X)}, N0 = {d.X.shape[1]}\n{table}", flush=True)
            out[str(folder)] = {N1: r for N1, r in rows}
        Path(args.out).write_text(json.dumps(out, indent=1))
        print(f"wrote {args.out}")
        return
    d = rp.datasets.mnist(classes=(0, 1), P=args.P, P_test=1000, root=args.root, seed=0)
    out = {"linear": {}, "erf": {}}
    print("linear activation, closed form, against the exact theory (exact for linear networks)")
    print("| N1 (α) | bias | exact | variance | exact | ε_g | exact |\n|---|---|---|---|---|---|---|")
    for N1 in ((400, 100, 50) if args.linear and args.P == 200 else ()):
        fit = rp.theory.solve(d.X, d.Y, N1=N1, T=0.01, activation="linear")
        kb = float(np.mean(np.sum((d.Y_test - fit.predict(d.X_test).mean) ** 2, 1)))
        kv = float(fit.generalization_error(d.X_test, d.Y_test)) - kb
        b, v, _, _ = linear_closed_form(d, N1)
        out["linear"][N1] = dict(bias=b, variance=v, exact_bias=kb, exact_variance=kv)
        print(f"| {N1} ({200 / N1:g}) | {b:.5f} | {kb:.5f} | {v:.5f} | {kv:.5f} | {b + v:.5f} | {kb + kv:.5f} |")
    print("\nerf, against the exact theory and the sampled networks, continued from the widest width")
    sampled = SAMPLED if len(d.X) == 200 else {}
    rows, table = erf_table(d, args.widths, sampled, neurons=args.neurons, damping=args.damping,
                            maxiter=args.maxiter, seeds=args.seeds, proposal=args.proposal)
    out["erf"] = {N1: r for N1, r in rows}
    print(table)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
