r"""The shared field's cost at the paper's size (issue 46, item 3): one iteration of its stochastic approximation
(``rp.theory.shared_field.solve``, ``proposal="mcmc"``) taken apart at P = 1000, D = 2, on MNIST (0, 1) or, without
the data, on Gaussian inputs of the same shape (the cost does not depend on the values).

An iteration moves every neuron ``steps`` (3) Langevin steps, each one evaluation of (F1)'s log-density and its
gradient (:func:`renormpp.theory.shared_field._tilt_target`), then computes the neurons' features, their q, C and y
(``_per_neuron``), the control variate, the moments of (F2) and the field from them (a PD x PD inverse). A prediction
moves 16 populations 3 steps each. The script times each part (median of ``--repeats``) at ``--neurons`` neurons,
the quadratic form q = s Sigma s with its gradient from one product (``_quadratic``) against autodiff of the einsum
(the change this benchmark came with), and projects a solve of 80 and of 160 iterations.

Run: ``python benchmarks/shared_field_speed.py [--root DATA] [--neurons 10000]`` (about 2 minutes on 2 cores).
"""
import argparse
import time
from dataclasses import replace

import numpy as np

from renormpp import kernels
from renormpp.theory import shared_field as sf, single_neuron


def median_seconds(f, repeats):
    f()  # compiled and warm
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def data(root, P):
    """MNIST (0, 1) at P (Fig. 1b's data) where ``root`` has it, else Gaussian inputs of its shape."""
    import renormpp as rp

    try:
        d = rp.datasets.mnist(classes=(0, 1), P=P, P_test=10, root=root)
        return d.X, d.Y, "MNIST (0, 1)"
    except FileNotFoundError:  # no data here: the same shapes
        print("(MNIST not found: Gaussian inputs of its shape)")
        rng = np.random.default_rng(0)
        return rng.standard_normal((P, 784)), np.sign(rng.standard_normal((P, 2))), "Gaussian inputs"


def quadratic_forms(P, D, M, repeats):
    """The vectorized value and gradient of q = s Sigma s over M neurons: (one product, autodiff of the einsum)."""
    import jax
    import jax.numpy as jnp

    from renormpp.network import x64_context

    rng = np.random.default_rng(1)
    A = rng.standard_normal((P * D, P * D)) / np.sqrt(P * D)
    with x64_context():
        S, s = jnp.asarray((A @ A.T).reshape(D, P, D, P)), jnp.asarray(rng.standard_normal((M, P)))

        def timed(f):
            g = jax.jit(jax.vmap(jax.value_and_grad(lambda s, S: jnp.sum(f(s, S))), in_axes=(0, None)))
            return median_seconds(lambda: jax.block_until_ready(g(s, S)), repeats)

        return timed(sf.moves._quadratic()), timed(lambda s, S: jnp.einsum("p,apbq,q->ab", s, S, s))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", help="the data sets' folder (default: the loaders' rules, RENORMPP_DATA)")
    ap.add_argument("--P", type=int, default=1000)
    ap.add_argument("--neurons", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    X, Y, name = data(args.root, args.P)
    P, D, M, T = len(X), Y.shape[1], args.neurons, 0.01
    N1 = P // 2  # alpha = 2
    rng = np.random.default_rng(0)
    # a field of the solve's scale: the exact theory's start (the cost does not depend on it)
    K = kernels.nngp(X, lambda0=1.0, activation="erf")
    A0 = T * np.eye(P * D) + np.kron(np.eye(D), K)
    Sigma = np.linalg.inv(A0)
    m = np.linalg.solve(A0, Y.T.reshape(-1)).reshape(D, P).T
    law = sf.Proposal.prior(rng.standard_normal((M, X.shape[1])), sf.proposal_basis(X, m), 1.0)
    target = sf.moves._tilt_target(X, "erf", 1.0, float(N1))
    w = law.draw(1.0)[0]
    s = single_neuron.features(w, X, "erf").T
    C, y, _ = sf.equations._per_neuron(s, m, Sigma, float(N1))
    dK = sf.equations._control(s, s, np.ones(M), K)
    LW, LC = sf.equations._moments(s, np.ones(M), C, y, dK, N1)
    parts = {
        "(F1)'s log-density and gradient, one Langevin step": lambda: target(law.noise, law, m, Sigma),
        "features": lambda: single_neuron.features(w, X, "erf"),
        "q, C, y of every neuron": lambda: sf.equations._per_neuron(s, m, Sigma, float(N1)),
        "control variate": lambda: sf.equations._control(s, s, np.ones(M), K),
        "moments of (F2)": lambda: sf.equations._moments(s, np.ones(M), C, y, dK, N1),
        "the field from them": lambda: sf.equations._field(LW, LC, m, Sigma, Y, T),
    }
    # a prediction's population: its neurons at (F1) of the fit's own field (weights 1, tilt computed once), against
    # the general path of a fit at another field (prior over law from the tilt at the neurons' field, then again)
    moved = sf.Population(law, law.noise, m, Sigma, float(N1), X, "erf")
    fit = sf.SharedFieldFit(X=X, Y=Y, N1=N1, T=T, lambda1=1.0, lambda0=1.0, activation="erf", m=m, Sigma=Sigma,
                            residuals=np.zeros((1, 2)), ess=float(M), pareto_k=0.0, converged=True, reason="",
                            proposal=moved)
    elsewhere = replace(fit, m=m * (1 + 1e-12))
    sec = {k: median_seconds(f, args.repeats) for k, f in parts.items()}
    step = sec["(F1)'s log-density and gradient, one Langevin step"]
    iteration = 3 * step + sum(sec.values()) - step
    sec["a prediction's population: features and tilt at its own field"] = median_seconds(fit._law, args.repeats)
    sec["the same by the general path (at another field: computed twice)"] = median_seconds(elsewhere._law,
                                                                                            args.repeats)
    one, auto = quadratic_forms(P, D, min(M, 4096), args.repeats)
    print(f"## shared_field_speed.py: {name}, P = {P}, D = {D}, {M} neurons, medians of {args.repeats}\n")
    print("| part | seconds |\n|---|---|")
    for k, v in sec.items():
        print(f"| {k} | {v:.3f} |")
    print(f"| **one iteration** (3 steps and the rest) | **{iteration:.2f}** |")
    print(f"| a solve: the first 30 moves, 80 iterations; 160 | {30 * step + 80 * iteration:.0f}; "
          f"{30 * step + 160 * iteration:.0f} |")
    print(f"| a prediction's populations (16 x 3 steps) | {48 * step:.0f} |")
    print(f"\nq = s Sigma s and its gradient over {min(M, 4096)} neurons (one chunk): one product {one:.3f} s, "
          f"autodiff of the einsum {auto:.3f} s ({auto / one:.2f}x)")


if __name__ == "__main__":
    main()
