"""The adaptive-kernel theory (renormpp.theory.adaptive_kernel, issue 32 item 3) against sampled finite networks.

Run:  .venv/bin/python studies/adaptive.py --root ../shared/data/mnist            (theory at the MNIST points, ~1 min)
      .venv/bin/python studies/adaptive.py --root ../shared/data/mnist --sample   (+ NUTS at the synthetic points)

Prints eps_g of the exact theory, infinite width and the adaptive theory against the sampled networks, with
Delta = theory/sampled - 1 and z = (theory - sampled)/error, and the spectrum ratios r_k = u_k^T K_post u_k / k_k of
the predicted posterior hidden kernel (exact theory: Eq. (H1) of rp.theory.hidden; adaptive: K_eff - K_eff G K_eff)
against the measured ones, with the wall time of each solve.

The MNIST (0, 1) sampled values (P = 200, P_test = 1000, erf, T = 0.01) are the measurements of
studies/hidden_kernel.py (benchmarks/README.md, `renormpp run`, default sampler): eps_g and the top two r_k.
The synthetic points are sampled here by NumPyro NUTS on the network with v integrated out (float64).
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import renormpp as rp
from renormpp.theory import adaptive_kernel as ad
from renormpp.theory import hidden

# benchmarks/README.md, hidden_kernel.py part 3: N1 -> (eps_g, error, (r_1, r_2) measured)
MNIST_SAMPLED = {20: (0.01015, 0.00005, (1.64, 1.45)), 100: (0.02961, 0.00015, (1.32, 1.19)),
                 400: (0.07542, 0.00015, (1.06, 1.06))}


def tanh_teacher(P=160, P_test=500, N0=40, D=2, seed=0, scale=2.0):
    """x ~ N(0, 1), y = tanh(scale x.W / sqrt(N0)), W (N0, D) standard normal."""
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(N0, D))
    X = rng.normal(size=(P + P_test, N0))
    Y = np.tanh(scale * X @ W / np.sqrt(N0))
    return X[:P], Y[:P], X[P:], Y[P:]


def sample(X, Y, X0, Y0, N1, T, warmup, draws, seed=0):
    """NUTS on one_hidden_layer(integrate_v=True), one chain: (eps_g mean, batch-means error, measured K_post)."""
    import jax
    from numpyro.infer import MCMC, NUTS

    from renormpp.diagnostics import kernel as dk
    from renormpp.readout import rao_blackwell

    with jax.enable_x64(True):
        mcmc = MCMC(NUTS(rp.models.one_hidden_layer), num_warmup=warmup, num_samples=draws, num_chains=1,
                    progress_bar=False)
        mcmc.run(jax.random.PRNGKey(seed), X, Y, N1=N1, T=T, integrate_v=True)
        w = mcmc.get_samples(group_by_chain=True)["w"]
        fn = jax.jit(jax.vmap(rao_blackwell(X, Y, X0, Y0, T=T, lambda1=1.0)))
        eps = np.concatenate([np.asarray(fn({"w": w[0, a:a + 100]})["eps_g"]) for a in range(0, draws, 100)])
        hk = dk.measure({"w": w}, X, X0, segments=10)
    blocks = eps[: len(eps) // 20 * 20].reshape(20, -1).mean(axis=1)
    return float(eps.mean()), float(blocks.std(ddof=1) / np.sqrt(20)), hk.train


def row(name, sampled, err, X, Y, X0, Y0, N1, T, activation="erf", r_meas=None, K_meas=None):
    t = time.perf_counter()
    ex = rp.theory.solve(X, Y, N1=N1, T=T, activation=activation)
    t_ex = time.perf_counter() - t
    inf = rp.theory.solve(X, Y, N1=N1, T=T, activation=activation, method="infinite_width")
    t = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = ad.solve(X, Y, N1=N1, T=T, activation=activation)
    t_ad = time.perf_counter() - t
    out = []
    for label, th in (("exact", ex), ("infinite width", inf), ("adaptive_kernel", fit)):
        e = th.generalization_error(X0, Y0)
        out.append(f"{label} {e:.5f} (Delta {e / sampled - 1:+.1%}, z {(e - sampled) / err:+.0f})")
    print(f"| {name} | alpha {len(X) / N1:g} | sampled {sampled:.5f} +- {err:.5f} | " + " | ".join(out)
          + f" | converged {fit.converged} ({fit.n_iter} it) | {t_ex:.2f} s exact, {t_ad:.2f} s adaptive |")
    if caught:
        print("   warnings:", "; ".join(str(c.message)[:120] for c in caught))
    r_h1 = fit.kernel_ratios(4, hidden.predicted_kernel(ex)[0])
    if K_meas is not None:
        r_meas = fit.kernel_ratios(4, K_meas)
    print(f"   r_k top 4: measured {np.round(r_meas, 3) if r_meas is not None else '-'}, exact (H1) "
          f"{np.round(r_h1, 3)}, adaptive {np.round(fit.kernel_ratios(4), 3)}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=None, help="MNIST folder (default: $RENORMPP_DATA)")
    ap.add_argument("--sample", action="store_true", help="also sample the synthetic points with NUTS")
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--draws", type=int, default=600)
    ap.add_argument("--no-mnist", action="store_true", help="skip the MNIST P = 200 points (N1 = 20 takes ~5 min)")
    ap.add_argument("--p1000", action="store_true", help="also time the adaptive theory at P = 1000 (MNIST 0, 1)")
    args = ap.parse_args()
    ds = rp.datasets.mnist((0, 1), P=200, P_test=1000, root=args.root)
    for N1, (eps, err, r) in ({} if args.no_mnist else MNIST_SAMPLED).items():
        row(f"MNIST (0,1) P=200 N1={N1}", eps, err, ds.X, ds.Y, ds.X_test, ds.Y_test, N1, 0.01,
            r_meas=np.array(r + (np.nan, np.nan)))
    if args.sample:
        X, Y, X0, Y0 = tanh_teacher()
        t = time.perf_counter()
        eps, err, K_post = sample(X, Y, X0, Y0, 40, 0.01, args.warmup, args.draws)
        print(f"   (sampled tanh teacher in {time.perf_counter() - t:.0f} s)")
        row("tanh teacher N0=40 P=160 N1=40", eps, err, X, Y, X0, Y0, 40, 0.01, K_meas=K_post)
        lin = rp.datasets.synthetic(P=100, P_test=500, N0=40, teacher="linear", seed=0)
        t = time.perf_counter()
        eps, err, K_post = sample(lin.X, lin.Y, lin.X_test, lin.Y_test, 100, 0.01, args.warmup, args.draws)
        print(f"   (sampled linear teacher in {time.perf_counter() - t:.0f} s)")
        row("linear teacher N0=40 P=100 N1=100", eps, err, lin.X, lin.Y, lin.X_test, lin.Y_test, 100, 0.01,
            K_meas=K_post)
    if args.p1000:
        big = rp.datasets.mnist((0, 1), P=1000, P_test=1000, root=args.root)
        for N1 in (100, 500):
            t = time.perf_counter()
            ex = rp.theory.solve(big.X, big.Y, N1=N1)
            t_ex = time.perf_counter() - t
            t = time.perf_counter()
            fit = ad.solve(big.X, big.Y, N1=N1)
            t_ad = time.perf_counter() - t
            print(f"P=1000 N1={N1}: exact {t_ex:.2f} s, adaptive {t_ad:.2f} s ({t_ad / t_ex:.0f}x, {fit.n_iter} it, "
                  f"converged {fit.converged}); eps_g exact {ex.generalization_error(big.X_test, big.Y_test):.5f}, "
                  f"adaptive {fit.generalization_error(big.X_test, big.Y_test):.5f}", flush=True)


if __name__ == "__main__":
    main()
