"""The specialist-plus-bulk theory (`rp.theory.specialists`) against the sampled networks on MNIST (0, 1): its ε_g at
k = 0, 1, 2, ... explicit neurons, the k its sweep chooses, and Δ, z beside the exact and shared-field theories.

Run:  .venv/bin/python studies/specialist_theory.py --root DATA/mnist            (P = 200 then P = 1000; resumable,
      about 10 min for P = 200 and 30 min for P = 1000 on 2 cores; --only 200 for the first)

Each (P, N1, k) solve is kept in --out (default runs/specialist-theory/) as a json; a rerun reads them. The sampled
ε_g are the default sampler's (docs/validity.md "Real data: MNIST (0, 1)" at P = 200, docs/figures.md "Fig. 1b" at
P = 1000, D = 2), quoted below with their error bars; the theory's own Monte Carlo error (the standard error of the mean
over its independent chains for the specialists, half of them started on the label-contrast templates) is printed
beside it and enters z.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import renormpp as rp
from renormpp.theory import specialists as sp

T = 0.01
#: (P, N1): the sampled eps_g and its error bar, and the shared field's eps_g where it has a fixed point
SAMPLED = {(200, 400): (0.07542, 0.00015, 0.07550), (200, 200): (0.05662, 0.00017, 0.05708),
           (200, 100): (0.02946, 0.00005, 0.02974), (200, 50): (0.01552, 0.00005, None),
           (200, 20): (0.01019, 0.00003, None),
           (1000, 100): (0.004452, 0.000042, None), (1000, 250): (0.009404, 0.000051, None),
           (1000, 500): (0.017716, 0.000078, None)}
SIZES = {200: dict(num_warmup=300, num_samples=200, chains=4, thinning=2, iterations=3),
         1000: dict(num_warmup=200, num_samples=80, chains=2, thinning=2, iterations=2)}


def solve_point(d, P, N1, k, Q0, out: Path):
    path = out / f"P{P}_N1{N1}_k{k}.json"
    if path.exists():
        return json.loads(path.read_text())
    X, Y, X0, Y0 = (np.asarray(a, np.float64) for a in (d.X, d.Y, d.X_test, d.Y_test))
    t = time.perf_counter()
    fit = sp.solve(X, Y, N1=N1, k=k, T=T, Q0=Q0, **SIZES[P])
    eps = fit.eps_g_per_draw(X0, Y0) if k else np.array([fit.generalization_error(X0, Y0)])
    lab = Y.argmax(axis=1)
    u = X[lab == 1].mean(axis=0) - X[lab == 0].mean(axis=0)
    u /= np.linalg.norm(u)
    chain_means = eps.reshape(SIZES[P]["chains"], -1).mean(axis=1) if k else eps
    rec = dict(P=P, N1=N1, k=k, eps_g=float(eps.mean()), eps_g_sd=float(eps.std()), draws=len(eps),
               eps_g_err=float(chain_means.std(ddof=1) / np.sqrt(len(chain_means))) if k else 0.0,
               chains=SIZES[P]["chains"], Q=fit.Q.tolist(), overlap=fit.readout_overlap.tolist(), history=fit.history,
               label_projection=((fit.W @ u) ** 2).mean(axis=0).tolist() if k else [],
               seconds=time.perf_counter() - t)
    path.write_text(json.dumps(rec))
    return rec


def bulk(root, out: Path, networks: Path):
    """Does the bulk of a sampled network follow kernel-shape renormalization at width N1 - k in the field of its
    specialists? The theory's conditional (rp.theory.specialists.conditional) with the sampled specialists' weights
    (rp.diagnostics.specialists; draws with the most common k), against the sampled eps_g of the same draws."""
    print("\n| P | N1 (α) | k (share of draws) | sampled ε_g (those draws) | bulk in the sampled specialists' field: ε_g, Δ |")
    print("|---|---|---|---|---|")
    for path in sorted(networks.glob("network_P*_N1*.npz")):
        P, N1 = (int(x) for x in path.stem.removeprefix("network_P").split("_N1"))
        z = np.load(path)
        d = rp.datasets.mnist(classes=(0, 1), P=P, P_test=1000, root=root, seed=0)
        w = z["w"][:, z["w"].shape[1] // 2:]  # the second half of each chain
        eps = z["eps_g"][:, z["eps_g"].shape[1] // 2:]
        found = rp.diagnostics.specialists(w, d.X, d.Y, T=T)
        k = np.asarray(found.k).reshape(-1)
        common = int(np.bincount(k).argmax())
        if common == 0:
            print(f"| {P} | {N1} ({P / N1:g}) | 0 ({np.mean(k == 0):.0%}) | | no specialist: the exact theory |")
            continue
        mask = np.asarray(found.specialist).reshape(-1, N1)[k == common]
        W = w.reshape(-1, N1, w.shape[-1])[k == common]
        Ws = np.stack([one[m] for one, m in zip(W, mask)])
        fit = sp.conditional(d.X, d.Y, Ws, N1=N1, T=T)
        th = fit.generalization_error(d.X_test, d.Y_test)
        mc = float(eps.reshape(-1)[k == common].mean())
        print(f"| {P} | {N1} ({P / N1:g}) | {common} ({np.mean(k == common):.0%}) | {mc:.5g} | {th:.5g}, "
              f"{(mc - th) / th:+.1%} |", flush=True)


def figure(rows, path: Path):
    """ε_g against α at P = 200 and 1000: the sampled networks, the exact theory, the shared field where it has a fixed
    point, and the specialist theory at its chosen k."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), layout="constrained")
    for ax, size in zip(axes, (200, 1000)):
        mine = sorted((P / N1, mc, err, exact, shared, recs[chosen if chosen is not None else max(recs)]["eps_g"])
                      for P, N1, mc, err, exact, shared, chosen, recs in rows if P == size)
        if not mine:
            continue
        a, mc, err, exact, shared, spec = (np.array(x, dtype=float) for x in zip(*[
            (r[0], r[1], r[2], r[3], np.nan if r[4] is None else r[4], r[5]) for r in mine]))
        ax.errorbar(a, mc, err, fmt="ko", label="sampled network")
        ax.plot(a, exact, "s--", label="exact theory (kernel-shape renormalization)")
        ax.plot(a, shared, "^:", label="shared field (where it has a fixed point)")
        ax.plot(a, spec, "D-", label="specialists in the field of the bulk")
        ax.set(xscale="log", yscale="log", xlabel="α = P/N1", ylabel="ε_g", title=f"MNIST (0, 1), P = {size}")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=2, fontsize="small")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", help="the MNIST folder (default: the loaders' rules, RENORMPP_DATA)")
    ap.add_argument("--out", default="runs/specialist-theory")
    ap.add_argument("--only", type=int, choices=(200, 1000))
    ap.add_argument("--k-max", type=int, default=3)
    ap.add_argument("--rtol", type=float, default=0.02)
    ap.add_argument("--bulk", metavar="DIR", help="only the bulk check on the networks that studies/specialist_count.py "
                    "saved in DIR (runs/specialists)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.bulk:
        return bulk(args.root, out, Path(args.bulk))
    points = [(P, N1) for P, N1 in ((200, 20), (200, 50), (200, 100), (200, 200), (1000, 100), (1000, 250))
              if args.only in (None, P)]
    rows = []
    for P, N1 in points:
        d = rp.datasets.mnist(classes=(0, 1), P=P, P_test=1000, root=args.root, seed=0)
        recs, Q0 = {}, None
        for k in range(args.k_max + 1):
            recs[k] = solve_point(d, P, N1, k, Q0, out)
            Q0 = np.asarray(recs[k]["Q"])
            print(f"P = {P}, N1 = {N1}, k = {k}: eps_g {recs[k]['eps_g']:.5g} (sd over draws "
                  f"{recs[k]['eps_g_sd']:.2g}), (u.w)^2 {np.round(recs[k]['label_projection'], 1).tolist()}, "
                  f"{recs[k]['seconds']:.0f} s", flush=True)
            if k and abs(recs[k]["eps_g"] - recs[k - 1]["eps_g"]) <= args.rtol * recs[k - 1]["eps_g"]:
                chosen = k - 1
                break
        else:
            chosen = None
        mc, err, shared = SAMPLED[(P, N1)]
        rows.append((P, N1, mc, err, recs[0]["eps_g"], shared, chosen, recs))
    print("\n| P | N1 (α) | sampled ε_g | exact: Δ, z | shared field: Δ | specialists: k, ε_g ± MC | Δ, z |")
    print("|---|---|---|---|---|---|---|")
    for P, N1, mc, err, exact, shared, chosen, recs in rows:
        ks = chosen if chosen is not None else max(recs)
        r = recs[ks]
        th, th_err = r["eps_g"], r["eps_g_err"]
        sig = np.hypot(err, th_err)
        sf = f"{(mc - shared) / shared:+.1%}" if shared else ("no fixed point" if P == 200 else "not verified")
        tag = "" if chosen is not None else " (not converged in k)"
        print(f"| {P} | {N1} ({P / N1:g}) | {mc:.5g} ± {err:.2g} | {(mc - exact) / exact:+.1%}, "
              f"{(mc - exact) / err:+.0f} | {sf} | {ks}{tag}: {th:.5g} ± {th_err:.2g} | {(mc - th) / th:+.1%}, "
              f"{(mc - th) / sig:+.1f} |")
    figure(rows, out / "specialist_theory.png")
    (out / "table.json").write_text(json.dumps([dict(P=P, N1=N1, sampled=mc, sampled_err=err, exact=exact,
                                                     shared=shared, k=chosen, eps_g={k: r["eps_g"] for k, r in recs.items()})
                                                for P, N1, mc, err, exact, shared, chosen, recs in rows], indent=1))


if __name__ == "__main__":
    main()
