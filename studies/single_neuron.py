"""The single-neuron picture on sampled networks (issue 46, item 1): are the neurons of a finite network independent
draws from one tilted single-neuron law?

Run:  .venv/bin/python studies/single_neuron.py                       (MNIST (0, 1), P = 200, alpha = 10 and 2;
                                                                          about 10 minutes on 2 cores)
      .venv/bin/python studies/single_neuron.py --quick               (smoke run, a minute; numbers mean nothing)

For each point: the network's posterior (kinetic Langevin on w with v integrated out, two chains, NumPyro's MCMC),
the oracle tilt G of renormpp.theory.single_neuron (S1) averaged over its draws, and the single-neuron law (S2)
with that G, sampled exactly (NUTS on one neuron's 784 weights). Compared:

1. the marginal of one neuron's weights projected on four input directions (two principal directions of X, the
   label direction, the residual direction): the network's draws pooled over neurons against the tilted law's
   (E u.w^2, kurtosis of u.w, the fraction of |u.w| beyond the prior's 2 sigma; a figure of histograms);
2. the hidden kernel K_post: the tilt's E[s s^T] against the measured <(1/N1) sum_i s_i s_i^T> (relative distance
   along the top directions of K, the oracle eps_g of each, renormpp.theory.hidden.with_kernel) beside the sampled
   eps_g and the exact theory;
3. the correlations between neurons: over draws, the correlation of (u.w_i)^2 with (u.w_j)^2 for i != j (mean
   over pairs, against 0), which a product of independent single-neuron laws makes zero up to O(1/N1).

The data sets' folder: --root or RENORMPP_DATA (as every loader). Writes single_neuron.json and single_neuron.png
into --out.
"""
from __future__ import annotations

import argparse
import functools
import json
import time
from pathlib import Path

import numpy as np

import renormpp as rp
from renormpp.experiments.tilted import sample_tilted
from renormpp.theory import single_neuron as sn

T = 0.01
POINTS = {"alpha10": 20, "alpha2": 100}  # N1 at P = 200


def sample_network(d, N1, *, warmup, draws, thin, seed, activation="erf"):
    import jax
    from numpyro.infer import MCMC

    from renormpp import infer, models

    marginal = functools.partial(models.one_hidden_layer, integrate_v=True, activation=activation)
    kernel = infer.KineticLangevin(marginal, step_size=1e-3, inner_steps=10)
    mcmc = MCMC(kernel, num_warmup=warmup, num_samples=draws, num_chains=2, chain_method="vectorized",
                thinning=thin, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(seed), np.asarray(d.X, np.float32), np.asarray(d.Y, np.float32), N1=N1, T=T)
    return np.asarray(mcmc.get_samples(group_by_chain=True)["w"], dtype=np.float64)  # (chains, n, N1, N0)


def rb_eps_g(d, w, N1, activation="erf"):
    """The Rao-Blackwellized eps_g of each draw (v integrated exactly given w)."""
    from renormpp import observables, readout

    rb = readout.rao_blackwell(d.X, d.Y, d.X_test, d.Y_test, T=T, lambda1=1.0, activation=activation)
    return np.asarray(observables.evaluate(rb, {"w": w.astype(np.float32)}, batch_dims=2)["eps_g"])


def stats_of(proj):
    """E p^2, kurtosis E p^4 / (E p^2)^2, P(|p| > 2 prior sigma) of projections ``proj`` (any shape)."""
    p2 = np.mean(proj ** 2)
    return dict(second=float(p2), kurtosis=float(np.mean(proj ** 4) / p2 ** 2), tail=float(np.mean(np.abs(proj) > 2)))


def batch_error(fn, x, batches=10):
    """Error of fn(x) from ``batches`` consecutive batches of x's second axis (draws)."""
    parts = np.array_split(np.arange(x.shape[1]), batches)
    vals = np.array([list(fn(x[:, idx]).values()) for idx in parts])
    return dict(zip(fn(x[:, :2]).keys(), vals.std(axis=0, ddof=1) / np.sqrt(batches)))


def neuron_correlation(proj):
    """Mean over pairs i != j of corr over draws of proj_i^2 and proj_j^2; proj (chains, draws, N1)."""
    q = proj.reshape(-1, proj.shape[-1]) ** 2
    C = np.corrcoef(q.T)
    N1 = C.shape[0]
    return float((C.sum() - np.trace(C)) / (N1 * (N1 - 1)))


LAWS = {"tilt": "single-neuron law (S2), oracle G", "cavity": "cavity law (S3), oracle B"}


def network_draws(d, N1, args, out):
    """The network's posterior draws of w (chains, n, N1, N0), sampled once and kept in ``out`` (a rerun reads them)."""
    path = out / f"network_N1={N1}_P={d.X.shape[0]}.npz"
    if path.exists():
        z = np.load(path)
        return z["w"].astype(np.float64), float(z["seconds"])
    t = time.perf_counter()
    w = sample_network(d, N1, warmup=args.warmup, draws=args.draws, thin=args.thin, seed=args.seed)
    seconds = time.perf_counter() - t
    np.savez(path, w=w.astype(np.float32), seconds=seconds)
    return w, seconds


def run_point(d, N1, args, out):
    from numpyro.diagnostics import split_gelman_rubin

    from renormpp.diagnostics import kernel as dk
    from renormpp.theory import hidden

    w, t_net = network_draws(d, N1, args, out)
    eps = rb_eps_g(d, w, N1)
    tilt = sn.oracle_tilt(w.reshape((-1,) + w.shape[2:]), d.X, d.Y, T=T)
    laws, seconds = {}, {}
    for name, kw in (("tilt", dict(G=tilt.G)), ("cavity", dict(cavity=(tilt.B, d.Y, tilt.c)))):
        t = time.perf_counter()
        laws[name] = sample_tilted(d.X, num_warmup=args.tilt_warmup, num_samples=args.tilt_draws, num_chains=4,
                                      seed=args.seed, **kw)[0]
        seconds[name] = time.perf_counter() - t
    dirs = sn.directions(d.X, d.Y, tilt.residual)
    out = dict(N1=N1, P=d.X.shape[0], draws=int(w.shape[1]), chains=int(w.shape[0]), network_seconds=t_net,
               law_seconds=seconds, law_draws=args.tilt_draws, eps_g=float(eps.mean()),
               eps_g_rhat=float(split_gelman_rubin(eps)), directions={})
    for name, u in dirs.items():
        net = np.einsum("cnik,k->cni", w, u)  # (chains, draws, N1)
        row = dict(network=stats_of(net), network_err=batch_error(stats_of, net),
                   neuron_correlation=neuron_correlation(net),
                   hist=dict(network=net.ravel()[:: max(1, net.size // 20000)].tolist()))
        for law, w1 in laws.items():
            p = np.einsum("cnk,k->cn", w1, u)  # (chains, draws)
            row[law] = stats_of(p)
            row[law + "_err"] = batch_error(stats_of, p)
            row[law + "_rhat"] = float(split_gelman_rubin(p ** 2))  # the laws are symmetric under w -> -w
            row["hist"][law] = p.ravel().tolist()
        out["directions"][name] = row
    # specialization: each neuron's mean (u.w)^2 along the label direction over its chain's draws, against the laws'
    # share of draws beyond 3 prior sigma (N1 independent neurons from a law have N1 x that share beyond it)
    lab = np.einsum("cnik,k->cni", w, dirs["labels"]) ** 2
    per_neuron = lab.mean(axis=1)  # (chains, N1)
    half = lab.shape[1] // 2
    out["specialists"] = dict(
        halves_correlation=float(np.corrcoef(lab[:, :half].mean(axis=1).ravel(), lab[:, half:].mean(axis=1).ravel())[0, 1]),
        per_neuron=np.sort(per_neuron, axis=1)[:, ::-1].tolist(),
        network=[int(np.sum(m > 9)) for m in per_neuron],
        network_share_beyond_3_sigma=float(np.mean(lab > 9)),
        **{law: float(N1 * np.mean(np.einsum("cnk,k->cn", w1, dirs["labels"]) ** 2 > 9)) for law, w1 in laws.items()})
    # the hidden kernel: measured, each law's, the theory's
    fit = rp.theory.solve(d.X, d.Y, N1=N1, T=T)
    K = fit.spectrum.V @ (fit.spectrum.k[:, None] * fit.spectrum.V.T)
    top = np.argsort(fit.spectrum.k)[::-1][:10]
    U, k = fit.spectrum.V[:, top], fit.spectrum.k[top]
    kernels = {"measured": dk.measure({"w": w.astype(np.float32)}, d.X, d.X_test)}
    kernels |= {law: dk.measure({"w": w1[:, :, None, :].astype(np.float32)}, d.X, d.X_test) for law, w1 in laws.items()}
    out["kernel"] = dict(theory_ratios=rp.theory.hidden.spectrum_ratios(fit)[top].tolist(),
                         exact_theory=float(fit.generalization_error(d.X_test, d.Y_test)))
    for name, kern in kernels.items():
        out["kernel"][name] = dict(
            ratios=(np.einsum("pi,pq,qi->i", U, kern.train, U) / k).tolist(),
            distance=float(np.linalg.norm(kern.train - kernels["measured"].train)
                           / np.linalg.norm(kernels["measured"].train - K)),
            oracle_eps_g=float(hidden.with_kernel(kern.train, d.Y, N1=N1, T=T, K_cross=kern.cross, k_test=kern.test,
                                                  Y_test=d.Y_test).eps_g))
    return out


def figure(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(next(iter(results.values()))["directions"])
    fig, axes = plt.subplots(len(results), len(names) + 1, figsize=(3.2 * (len(names) + 1), 2.8 * len(results)),
                             layout="constrained", squeeze=False)
    for row, (point, res) in zip(axes, results.items()):
        for ax, name in zip(row[:-1], names):
            h = res["directions"][name]["hist"]
            lim = np.percentile(np.abs(np.concatenate([h[k] for k in h])), 99.5)
            bins = np.linspace(-lim, lim, 61)
            ax.hist(np.concatenate([h["network"], -np.asarray(h["network"])]), bins=bins, density=True, alpha=0.5,
                    label="network's neurons (sampled)")
            for law, label in LAWS.items():
                ax.hist(np.concatenate([h[law], -np.asarray(h[law])]), bins=bins, density=True, histtype="step",
                        lw=1.5, label=label)
            grid = np.linspace(-lim, lim, 200)
            ax.plot(grid, np.exp(-grid ** 2 / 2) / np.sqrt(2 * np.pi), "k:", lw=1, label="prior")
            ax.set_title(f"N1 = {res['N1']} (alpha = {res['P'] / res['N1']:g}): {name}", fontsize="small")
            ax.set_xlabel("weights projected on the direction")
        ax = row[-1]
        for c, m in enumerate(res["specialists"]["per_neuron"]):
            ax.semilogy(np.arange(1, len(m) + 1), m, "o-", ms=3, label=f"chain {c}")
        ax.axhline(1.0, color="k", ls=":", lw=1)
        ax.set_xlabel("neuron (sorted)")
        ax.set_title("each neuron's mean (labels.w)^2", fontsize="small")
        ax.legend(fontsize="x-small")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize="small")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", help="the data sets' folder (default: the loaders' rules, RENORMPP_DATA)")
    ap.add_argument("--out", default="single-neuron")
    ap.add_argument("--points", nargs="*", default=list(POINTS), choices=list(POINTS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    sizes = dict(warmup=200, draws=200, thin=2, tilt_warmup=100, tilt_draws=100, P=40) if args.quick else \
        dict(warmup=2000, draws=8000, thin=8, tilt_warmup=1000, tilt_draws=2000, P=200)
    for k, v in sizes.items():
        setattr(args, k, v)
    d = rp.datasets.mnist(classes=(0, 1), P=args.P, P_test=1000, root=args.root, seed=0)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    for point in args.points:
        N1 = max(2, round(POINTS[point] * args.P / 200))
        results[point] = r = run_point(d, N1, args, out)
        print(f"\n{point}: N1 = {N1}, network {r['network_seconds']:.0f} s ({r['chains']} x {r['draws']} draws kept), "
              f"laws {', '.join(f'{k} {v:.0f} s' for k, v in r['law_seconds'].items())}; eps_g sampled "
              f"{r['eps_g']:.5g} (R-hat {r['eps_g_rhat']:.3f})")
        print("| direction | E (u.w)^2: network | (S2) | (S3) | kurtosis: network | (S2) | (S3) | "
              "P(|u.w| > 2): network | (S2) | (S3) | corr between neurons |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for name, v in r["directions"].items():
            cells = []
            for q, f in (("second", ".3f"), ("kurtosis", ".2f"), ("tail", ".3f")):
                cells += [f"{v[x][q]:{f}} ± {v[x + '_err'][q]:{f}}" for x in ("network", "tilt", "cavity")]
            flags = [f"R-hat of {law} {v[law + '_rhat']:.2f}" for law in LAWS if v[law + "_rhat"] > 1.05]
            print(f"| {name} | " + " | ".join(cells) + f" | {v['neuron_correlation']:+.3f} |"
                  + (f" ({', '.join(flags)})" if flags else ""))
        sp = r["specialists"]
        print(f"specialists (neurons whose mean (labels.w)^2 over the chain exceeds 9): network {sp['network']} per "
              f"chain (their mean (labels.w)^2 {[round(x[0], 1) for x in sp['per_neuron']]}, the rest's median "
              f"{np.median([x[1:] for x in sp['per_neuron']]):.2f}; each neuron's mean in the two halves of its chain: "
              f"correlation {sp['halves_correlation']:.3f}); N1 neurons drawn from a law: (S2) "
              f"{sp['tilt']:.2f}, (S3) {sp['cavity']:.2f} beyond 3 sigma on average")
        k = r["kernel"]
        print("K_post / K along K's top 5 directions: " + "; ".join(
            f"{n} {np.round(k[n]['ratios'][:5], 3)}" for n in ("measured", *LAWS)) +
              f"; theory {np.round(k['theory_ratios'][:5], 3)}")
        print("|K_post - measured| / |measured - K|: " + ", ".join(f"{n} {k[n]['distance']:.2f}" for n in LAWS))
        print(f"eps_g: sampled {r['eps_g']:.5g}; exact theory {k['exact_theory']:.5g}; oracle (the exact theory with "
              "K_post in place of K): " + ", ".join(f"{n} {k[n]['oracle_eps_g']:.5g}" for n in ("measured", *LAWS)))
    slim = {p: {**r, "directions": {n: {k: v for k, v in x.items() if k != "hist"} for n, x in r["directions"].items()}}
            for p, r in results.items()}
    (out / "single_neuron.json").write_text(json.dumps(slim, indent=1))
    figure(results, out / "single_neuron.png")
    print(f"\nwrote {out / 'single_neuron.json'} and {out / 'single_neuron.png'}")


if __name__ == "__main__":
    main()
