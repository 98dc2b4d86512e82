"""What the states of MNIST D = 3 at α = 10 are, and whether one neuron can move a chain between them (issue 45,
item 3: moves between states).

MNIST (1, 2, 3), P = 1000, N1 = 100 (Fig. 1b's D = 3 point at α = 10), w's marginal sampled with the default kernel
(kinetic Langevin, v integrated out, pooled adaptation), chains from the prior and from half its scale in turn. At each
chain's last draw:

* the readout overlap E[v vᵀ | w]/N1 (the state, as `rp.diagnostics.states` tells them apart), and the neurons that
  carry it: each neuron's readout energy ‖E[v_i | w]‖² + T tr(G⁻¹)_ii (G = AᵀA + T, A = Φ/√(λ1 N1)), its share, the
  direction of its mean readout in output space, |w_i|², and its **removal cost**: the data factor of its exact
  conditional (S3) of renormpp.theory.single_neuron at its own weights minus its median over 500 prior draws put in
  its place, the log-likelihood ratio against which a prior draw in its place would be accepted (for the six largest
  and five of median energy);
* for the three neurons of largest energy, the **basins of their conditional** (S3) given all the other neurons as
  they are: L-BFGS from the neuron's own weights and from the three class-contrast templates x̄_p − x̄_q (scaled to
  the prior's norm √N0; (S3) is even in w, so w* and −w* are one basin), each basin's log-evidence against the
  neuron's own basin, Laplace's log p(w*) + ½ log det(2π H⁻¹) and by importance sampling from that Gaussian, with the
  spread of the log-weights.
  A move of that one neuron (any exact single-neuron move: a Gibbs step, an independence proposal, a targeted
  proposal) reaches another basin with probability about e^(ΔF): where ΔF is of order −100, no single-neuron move
  changes a state, and a move between states must change several neurons together.

Run:  .venv/bin/python studies/specialist_states.py --root ../shared/data [--chains 4 --draws 2000]
      (about 10 minutes on 2 cores; --quick: a smoke run on P = 200, numbers mean nothing)
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
from theory_speed import machine_info  # noqa: E402

T, LAMBDA0, LAMBDA1 = 0.01, 1.0, 1.0


def sample(X, Y, N1, chains, draws, warmup, seed):
    """The last draw of w (chains, N1, N0) of the default kernel on w's marginal; odd chains start at half the prior's
    scale."""
    import jax
    from numpyro.infer import MCMC

    import renormpp as rp

    model = functools.partial(rp.models.one_hidden_layer, integrate_v=True)
    kernel = rp.infer.KineticLangevin(model, step_size=1e-3, inner_steps=10, pooled_adaptation=True)
    w0 = np.random.default_rng(seed).standard_normal((chains, N1, X.shape[1])).astype(np.float32)
    w0[1::2] *= 0.5
    mcmc = MCMC(kernel, num_warmup=warmup, num_samples=draws, num_chains=chains, chain_method="vectorized",
                progress_bar=False)
    mcmc.run(jax.random.PRNGKey(seed), np.asarray(X, np.float32), np.asarray(Y, np.float32), N1=N1, T=T,
             init_params={"w": w0})
    return np.asarray(mcmc.last_state.z["w"], dtype=np.float64)


def neurons(w, X, Y):
    """Per neuron of one draw w (N1, N0): readout energy (N1,), mean readout (N1, D), the features A (P, N1), and the
    overlap E[v vᵀ | w]/N1 (D, D)."""
    from renormpp.theory.single_neuron import features

    N1 = w.shape[0]
    A = features(w, X) / np.sqrt(LAMBDA1 * N1)
    Ginv = np.linalg.inv(A.T @ A + T * np.eye(N1))
    V = Ginv @ A.T @ Y
    D = Y.shape[1]
    energy = (np.sum(V**2, axis=1) + D * T * np.diag(Ginv)) / LAMBDA1
    overlap = (V.T @ V + T * np.trace(Ginv) * np.eye(D)) / (LAMBDA1 * N1)
    return energy, V, A, overlap


def cavity(A, i, Y):
    """The exact cavity inverse B = A_{-i}^{-1} (P, P) of (S3), A_{-i} = T + Σ_{j≠i} s_j s_jᵀ/c, c = λ1 N1: from the
    scaled features A (P, N1) = s/√c by push-through."""
    rest = np.delete(A, i, axis=1)
    return (np.eye(len(A)) - rest @ np.linalg.solve(T * np.eye(rest.shape[1]) + rest.T @ rest, rest.T)) / T


def log_conditional(X, B, Y, c):
    """log of (S3) (the prior times the data factor) of one neuron's weights, its gradient and Hessian, and the log
    of (S3) of a batch of weights (K, N0), in float64 JAX."""
    import jax
    import jax.numpy as jnp

    from renormpp.network import x64_context
    from renormpp.theory.single_neuron import log_cavity

    with x64_context():
        Xj, Bj, Yj = (jnp.asarray(a, jnp.float64) for a in (X, B, Y))

        def f(w):
            return -0.5 * LAMBDA0 * w @ w + log_cavity(w, Xj, Bj, Yj, c)

        fns = jax.jit(f), jax.jit(jax.grad(f)), jax.jit(jax.hessian(f)), jax.jit(jax.vmap(f))

    def call(k, w):
        with x64_context():
            return np.asarray(fns[k](jnp.asarray(w, jnp.float64)), dtype=np.float64)
    return tuple(functools.partial(call, k) for k in range(4))  # f, its gradient, its Hessian, f of a batch


def removal_cost(fns, w, prior):
    """The data factor of (S3) at a neuron's own weights ``w`` minus its median over ``prior`` draws (K, N0) put in
    its place: the log of the likelihood ratio an independence proposal from the prior would be accepted with (the
    prior's own factor cancels in that ratio, so it is left out here)."""
    f, batch = fns[0], fns[3]
    data = float(f(w)) + 0.5 * LAMBDA0 * float(w @ w)
    return data - float(np.median(batch(prior) + 0.5 * LAMBDA0 * np.sum(prior**2, axis=1)))


def basin(fns, w0, rng, draws=400):
    """The mode w* of the conditional reached by L-BFGS from w0, and its log-evidence two ways: Laplace's, log p(w*)
    + ½ log det(2π H⁻¹), and by importance sampling from that Gaussian N(w*, H⁻¹) (``draws`` draws), with the standard
    deviation of the log-weights (near 0: a Laplace proposal would move the neuron into the basin; ≫ 1: it would not).
    ``None`` where L-BFGS did not end at a maximum."""
    from scipy.optimize import minimize
    from scipy.special import logsumexp

    f, g, h, batch = fns
    res = minimize(lambda x: -float(f(x)), w0, jac=lambda x: -g(x), method="L-BFGS-B", options=dict(maxiter=5000))
    try:
        L = np.linalg.cholesky(-h(res.x))  # H = L Lᵀ
    except np.linalg.LinAlgError:
        return None
    if not res.success:
        return None
    n = len(w0)
    half_logdet = np.sum(np.log(np.diag(L)))
    laplace = -res.fun + 0.5 * n * np.log(2 * np.pi) - half_logdet
    e = rng.standard_normal((draws, n))
    x = res.x + np.linalg.solve(L.T, e.T).T
    log_w = batch(x) - (-0.5 * np.sum(e**2, axis=1) + half_logdet - 0.5 * n * np.log(2 * np.pi))
    return dict(mode=res.x, laplace=float(laplace), sampled=float(logsumexp(log_w) - np.log(draws)),
                sd=float(log_w.std()))


def _apart(x, y) -> bool:
    """Two modes of (S3) that are not one basin (w* and -w* are one: (S3) is even in w)."""
    return min(np.linalg.norm(x - y), np.linalg.norm(x + y)) > 1e-3 * np.linalg.norm(y)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.environ.get("RENORMPP_DATA"))
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="P = 200, N1 = 20, 100 draws: a smoke run")
    ap.add_argument("--save", help="write the chains' last draws of w (chains, N1, N0) to this .npy file")
    args = ap.parse_args()
    import renormpp as rp

    root = args.root if args.root is None or str(args.root).endswith("mnist") else os.path.join(args.root, "mnist")
    P, N1 = (200, 20) if args.quick else (1000, 100)
    draws, warmup = (100, 50) if args.quick else (args.draws, args.warmup)
    data = rp.datasets.mnist(classes=(1, 2, 3), P=P, P_test=P, root=root, seed=0)
    X, Y = np.asarray(data.X, np.float64), np.asarray(data.Y, np.float64)
    print(machine_info())
    t0 = time.perf_counter()
    W = sample(X, Y, N1, args.chains, draws, warmup, args.seed)
    if args.save:
        np.save(args.save, W)
    print(f"\nMNIST (1, 2, 3), P = {P}, N1 = {N1}: {args.chains} chains x {draws} draws after {warmup} of warmup, "
          f"{time.perf_counter() - t0:.0f} s\n")
    labels = Y.argmax(axis=1)
    class_means = np.stack([X[labels == k].mean(axis=0) for k in range(Y.shape[1])])
    prior = np.random.default_rng(0).standard_normal((500, X.shape[1])) / np.sqrt(LAMBDA0)
    c = LAMBDA1 * N1
    for ch, w in enumerate(W):
        energy, V, A, overlap = neurons(w, X, Y)
        iu = np.triu_indices(Y.shape[1])
        print(f"## chain {ch} ({'prior' if ch % 2 == 0 else 'scaled'} start): overlap [a<=b] "
              f"{np.round(overlap[iu], 3).tolist()}")
        print("| neuron | energy | share | mean readout direction | abs(w)^2 | removal cost |\n"
              "|---|---|---|---|---|---|")
        order = np.argsort(-energy)
        conditionals = {i: log_conditional(X, cavity(A, i, Y), Y, c) for i in order[:6]}
        for i in order[:6]:
            removal = removal_cost(conditionals[i], w[i], prior)
            d = V[i] / np.linalg.norm(V[i])
            print(f"| {i} | {energy[i]:.2f} | {energy[i] / energy.sum():.3f} | {np.round(d, 2).tolist()} | "
                  f"{w[i] @ w[i]:.0f} | {removal:.1f} |")
        bulk = []
        for i in order[N1 // 2 - 2:N1 // 2 + 3]:  # five neurons of median energy
            bulk.append(removal_cost(log_conditional(X, cavity(A, i, Y), Y, c), w[i], prior))
        print(f"| five of median energy | {np.round(energy[order[N1 // 2 - 2:N1 // 2 + 3]], 3).tolist()} | | | | "
              f"{np.round(bulk, 1).tolist()} |")
        print("\nThe basins of (S3) of the three largest, given every other neuron as it is: log-evidence against the "
              "neuron's own basin (Laplace; importance sampling from the Laplace Gaussian) and the sd of the log-weights"
              "\n\n| neuron | from | ΔF Laplace | ΔF sampled | log-weight sd |\n|---|---|---|---|---|")
        rng = np.random.default_rng(ch)
        for i in order[:3]:
            own = basin(conditionals[i], w[i], rng)
            if own is None:
                print(f"| {i} | own weights | L-BFGS did not end at a maximum | | |")
                continue
            found = [("own weights", own)]
            for p in range(Y.shape[1]):
                for q in range(p + 1, Y.shape[1]):
                    u = class_means[p] - class_means[q]
                    b = basin(conditionals[i], u / np.linalg.norm(u) * np.sqrt(X.shape[1] / LAMBDA0), rng)
                    if b is not None and all(_apart(b["mode"], y["mode"]) for _, y in found):  # a new basin
                        found.append((f"template {p + 1}v{q + 1}", b))
            for tag, b in found:
                print(f"| {i} | {tag} | {b['laplace'] - own['laplace']:+.1f} | {b['sampled'] - own['sampled']:+.1f} | "
                      f"{b['sd']:.1f} |")
        print()
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
