"""How many temperatures a replica-exchange ladder needs at a hard point (issue 34, item 1): measured, not guessed.

Run:  .venv/bin/python studies/tempering_ladder.py                  (Fig. 1a, alpha = 10: P = 1000, N1 = 100; ~5 min)
      .venv/bin/python studies/tempering_ladder.py --P 500 --N1 50  (the smaller probe of the benchmark history)

Replica exchange runs one chain per temperature T_0 < T_1 < ... and swaps neighbours' weights with probability
min(1, exp(-Delta)), Delta = U_i(w_j) + U_j(w_i) - U_i(w_i) - U_j(w_j), on w's marginal posterior
U_T(w) = lambda0 |w|^2 / 2 - log p(Y | w; T) (v integrated out, the default sampler's target). For neighbours
log T_j - log T_i = d, to first order Delta = d (E(w_j) - E(w_i)) with E = T dU/dT: for draws from the two
temperatures, Delta has mean ~ d^2 Var(E) and variance 2 d^2 Var(E), so a swap is accepted with probability about
erfc(d sigma_E / 2) (Kofke 2002), sigma_E the posterior's standard deviation of E. The script samples w at the
point with the default sampler (kinetic Langevin, v integrated out), evaluates E on every draw (jax's derivative
of renormpp.readout.log_marginal_of in T, the closed form), and prints sigma_E, the spacing d that gives a swap
acceptance of 0.25, and the number of replicas that spans T_0 ... c T_0 for c = 2, 10, 100.

A first-order estimate for a ladder of near neighbours: it says how many replicas, not how fast they would mix.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import erfcinv

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
from theory_speed import machine_info  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--P", type=int, default=1000)
    ap.add_argument("--N0", type=int, default=144)
    ap.add_argument("--N1", type=int, default=100)
    ap.add_argument("--D", type=int, default=2)
    ap.add_argument("--T", type=float, default=0.01)
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--accept", type=float, default=0.25, help="the swap acceptance the ladder aims at")
    args = ap.parse_args()
    from numpyro.infer import MCMC

    import renormpp as rp

    print(machine_info())
    data = rp.datasets.synthetic(P=args.P, P_test=args.P, N0=args.N0, D=args.D, teacher="linear", seed=0)
    X, Y, T = jnp.asarray(data.X, jnp.float32), jnp.asarray(data.Y, jnp.float32), args.T

    def energy(params, t=T):
        """E = T dU/dT = -T d log p(Y|w; T)/dT (the prior does not depend on T)."""
        logp = lambda tt: rp.readout.log_marginal_of(params, X, Y, T=tt, lambda1=1.0)  # noqa: E731
        return -t * jax.grad(logp)(jnp.float32(t))

    kernel = rp.infer.KineticLangevin(rp.models.one_hidden_layer, step_size=1e-2, inner_steps=10,
                                      observables=lambda p: {"E": energy(p)}, pooled_adaptation=True)
    mcmc = MCMC(kernel, num_warmup=200, num_samples=args.draws, num_chains=2, chain_method="vectorized",
                progress_bar=False)
    t0 = time.perf_counter()
    mcmc.run(jax.random.PRNGKey(0), X, Y, N1=args.N1, T=T, integrate_v=True)
    seconds = time.perf_counter() - t0
    E = np.asarray(mcmc.get_samples(group_by_chain=True)["E"], float)  # (chain, draw)
    half = E[:, E.shape[1] // 2:]
    sigma = float(np.mean(half.std(axis=1)))
    drift = E[:, : E.shape[1] // 4].mean() - half.mean()
    d = 2 * erfcinv(args.accept) / sigma
    print(f"\n(P, N0, N1, D) = ({args.P}, {args.N0}, {args.N1}, {args.D}), T = {T}: {E.shape[1]} draws x 2 chains "
          f"in {seconds:.0f} s")
    print(f"E = T dU/dT over the second half of each chain: mean {half.mean():.1f}, sd {sigma:.1f} per chain "
          f"(first quarter's mean minus second half's: {drift:+.1f}: the chains still relax where this is many sd)")
    print(f"spacing for a swap acceptance of {args.accept}: d = log(T_j/T_i) = {d:.4f} (T_j/T_i = {np.exp(d):.4f})")
    print("| T_max / T_0 | replicas (cost per draw at T_0, against one chain) | swaps for one round trip (~n^2) |")
    print("|---|---|---|")
    for c in (2.0, 10.0, 100.0):
        n = int(np.ceil(np.log(c) / d)) + 1
        print(f"| {c:g} | {n} | {n * n} |")


if __name__ == "__main__":
    main()
