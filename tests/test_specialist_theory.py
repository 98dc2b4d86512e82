"""The specialist-plus-bulk theory, rp.theory.specialists: its limits against independent computations (k = 0 is
kernel-shape renormalization, k = N1 is the exact conditional of the finite network), its gradient (SP3) and density
(SP1) against dense PD x PD algebra, its fixed point (SP2) against finite differences, and, at a small size where a
specialist appears, against the finite network sampled by NUTS."""
from __future__ import annotations

import numpy as np
import pytest

import renormpp as rp
from renormpp.network import hidden, x64_context
from renormpp.theory import specialists as sp
from hyperplane import hyperplane_problem, nuts_posterior
from stat_bounds import assert_z_within

T = 0.05


def _toy(P=30, N0=8, D=2, seed=0):
    rng = np.random.default_rng(seed)
    X, X0 = rng.standard_normal((P, N0)), rng.standard_normal((20, N0))
    return X, rng.standard_normal((P, D)), X0, rng.standard_normal((20, D))


def _dense_data(Q, W, X, Y, N1):
    """y^T A^-1 y + log det A of (SP1), with the PD x PD matrix formed (the independent computation)."""
    k = W.shape[0]
    K = rp.kernels.nngp(X)
    with x64_context():
        S = np.asarray(hidden({"w": W}, X)) / np.sqrt(N1)
    P, D = Y.shape
    A = T * np.eye(P * D) + (N1 - k) / N1 * np.kron(Q, K) + np.kron(np.eye(D), S @ S.T)
    y = Y.T.reshape(-1)
    return y @ np.linalg.solve(A, y) + np.linalg.slogdet(A)[1]


def test_no_specialist_is_kernel_shape_renormalization():
    X, Y, X0, Y0 = _toy()
    fit, exact = sp.solve(X, Y, N1=5, k=0, T=T), rp.theory.solve(X, Y, N1=5, T=T)
    np.testing.assert_allclose(fit.generalization_error(X0, Y0), exact.generalization_error(X0, Y0), rtol=1e-10)
    np.testing.assert_allclose(fit.readout_overlap, exact.Q, rtol=1e-10)


def test_every_neuron_explicit_is_the_finite_networks_exact_conditional():
    """k = N1: no bulk; eps_g and <v v^T>/N1 given W are renormpp.readout's (push-through on N1 x N1, another
    formula)."""
    import jax.numpy as jnp

    from renormpp import readout

    X, Y, X0, Y0 = _toy()
    W = np.random.default_rng(1).standard_normal((3, 5, X.shape[1]))
    fit = sp.conditional(X, Y, W, N1=5, T=T)
    eps, overlaps = [], []
    with x64_context():
        for w in W:
            o = readout.weight_space_observables(jnp.asarray(hidden({"w": w}, X)), jnp.asarray(hidden({"w": w}, X0)),
                                                 jnp.asarray(Y), jnp.asarray(Y0), T=T, lambda1=1.0)
            eps.append(float(o["eps_g"]))
            overlaps.append(np.asarray(o["overlap"]))
    np.testing.assert_allclose(fit.eps_g_per_draw(X0, Y0), eps, rtol=1e-9)
    np.testing.assert_allclose(fit.readout_overlap, np.mean(overlaps, axis=0), rtol=1e-9)


def test_gradient_density_and_fixed_point_against_dense_algebra():
    """(SP3) against central differences of the dense data term; the Woodbury log density (SP1) against the dense
    one (differences between two draws); at the fixed point (SP2) the derivative of the dense average of E over the
    draws vanishes. Planted bug: dropping the log det's trace term in (SP3) fails the first check by 100%."""
    import jax.numpy as jnp

    X, Y, _, _ = _toy()
    N1, W = 5, np.random.default_rng(2).standard_normal((3, 2, X.shape[1]))
    pb = sp._problem(X, Y, N1, 2, T, 1.0, 1.0, "erf")
    St = np.einsum("pq,nqk->npk", pb.V.T, pb.scaled_features(W))
    Q = np.array([[1.2, 0.3], [0.3, 0.8]])

    def mean_data(Q):
        return np.mean([_dense_data(Q, w, X, Y, N1) for w in W])

    def fd(f, Q, h=1e-6):
        G = np.zeros_like(Q)
        for a in range(2):
            for b in range(2):
                E = np.zeros_like(Q)
                E[a, b] += h / 2
                E[b, a] += h / 2
                G[a, b] = (f(Q + E) - f(Q - E)) / (2 * h)
        return G

    np.testing.assert_allclose(sp._gradient(pb, Q, St), fd(mean_data, Q), rtol=1e-6, atol=1e-8)
    with x64_context():
        log_p = sp._log_density(pb, Q)
        ours = [float(log_p(jnp.asarray(w))) for w in W]
    dense = [-0.5 * np.sum(w**2) - 0.5 * _dense_data(Q, w, X, Y, N1) for w in W]
    np.testing.assert_allclose(np.diff(ours), np.diff(dense), rtol=1e-9, atol=1e-9)
    Qs = sp._self_consistent_Q(pb, Q, St)
    Nb = N1 - 2

    def energy(Q):
        return Nb / 2 * (np.trace(Q) - np.linalg.slogdet(Q)[1]) + 0.5 * mean_data(Q)

    assert np.max(np.abs(fd(energy, Qs))) < 1e-5 * np.max(np.abs(fd(energy, Q)))


def test_the_sampler_passed_in_draws_the_specialists():
    """A theory that samples receives its sampler: NumPyro's NUTS under the core's signature
    (rp.infer.nuts_sampler), called once per outer iteration and once more at the final Q, from the chains' last
    positions; the fit's draws are the sampler's, chain after chain."""
    X, Y, _, _ = _toy()
    nuts, calls = rp.infer.nuts_sampler(), []

    def sampler(key, potential_fn, init, num_warmup, num_samples, thinning=1):
        out = nuts(key, potential_fn, init, num_warmup, num_samples, thinning)
        calls.append((np.array(init), out))
        return out

    fit = sp.solve(X, Y, N1=5, k=1, T=T, iterations=2, num_warmup=30, num_samples=10, chains=2, sampler=sampler)
    assert len(calls) == 3 and all(init.shape == (2, 1, X.shape[1]) for init, _ in calls)
    np.testing.assert_array_equal(calls[1][0], calls[0][1].last)  # each run continues the last one's chains
    np.testing.assert_array_equal(fit.W, calls[-1][1].draws.reshape(fit.W.shape))
    assert fit.draws == 10 and fit.chains == 2  # 10 draws per chain, every second kept


def test_bad_input_is_named():
    X, Y, _, _ = _toy()
    with pytest.raises(ValueError, match="T, lambda0 and lambda1 must be positive"):
        sp.solve(X, Y, N1=5, k=1, T=0.0)
    with pytest.raises(ValueError, match="0 <= k <= N1"):
        sp.solve(X, Y, N1=5, k=6, T=T)
    with pytest.raises(ValueError, match="NaN or inf"):
        sp.solve(np.where(X > 2, np.nan, X), Y, N1=5, k=1, T=T)
    with pytest.raises(ValueError, match="odd activation"):
        sp.solve(X, Y, N1=5, k=1, T=T, activation="relu")
    with pytest.raises(ValueError, match=r"\(draws, k, N0\)"):
        sp.conditional(X, Y, np.zeros((5, X.shape[1])), N1=5, T=T)


def test_against_sampled_networks_where_specialists_appear():
    """A small network with specialists: P = 60 Gaussian inputs in N0 = 6, two classes split by a hyperplane (D = 2,
    one-hot labels), N1 = 6 (alpha = 10), T = 0.05, sampled by NUTS with v integrated out. Two of its neurons
    specialize ((u.w)^2 about 17 and 16 along the hyperplane's normal u; the prior's is 1) and the exact theory is 22%
    above its eps_g. The theory with k = 2 explicit neurons gives them the same total (u.w)^2 within 30% (measured
    9.0 + 21.7 and 15.3 + 14.9 against 33) and closes more than 40% of the exact theory's gap (measured: NUTS
    0.944 +- 0.007 and, in a run with other draws, 0.960 +- 0.011; exact 1.225; k = 1: 1.070, k = 2: 1.067-1.068,
    k = 3: 1.076 with the specialists drawn by NUTS; k = 2 with the default sampler, GHMC of renormpp.mcmc, seeds 0-5:
    1.067-1.077, by NUTS 1.068-1.078; the gap ratio at k = 2 0.41-0.47 against the bound 0.6). What stays is the bulk's:
    its kernel adapts only through Q (docs/validity.md, "Specialists"). Planted bug: without the specialists'
    test-train covariance in the predictions eps_g is 2.30 and the test fails; two bugs this test does not see (the
    specialists' determinant dropped from (SP1), their features not divided by sqrt(lambda1 N1)) fail
    test_gradient_density_and_fixed_point_against_dense_algebra."""
    N1, T_ = 6, 0.05
    X, Y, X0, Y0, u = hyperplane_problem()
    w, eps, _ = nuts_posterior(X, Y, X0, Y0, N1=N1, T=T_)
    sampled, err = eps.mean(), eps.reshape(20, -1).mean(axis=1).std(ddof=1) / np.sqrt(20)
    per_neuron = np.sort(((w @ u) ** 2).mean(axis=0))[::-1]
    network_specialists = int(np.sum(per_neuron > 9))
    exact = rp.theory.solve(X, Y, N1=N1, T=T_).generalization_error(X0, Y0)
    fit = sp.solve(X, Y, N1=N1, k=2, T=T_, num_warmup=200, num_samples=100, chains=4, iterations=2)
    theory = fit.generalization_error(X0, Y0)
    explicit = ((fit.W @ u) ** 2).mean(axis=0)
    print(f"sampled {sampled:.4f} +- {err:.4f} ({network_specialists} specialists), exact {exact:.4f}, k = 2 "
          f"{theory:.4f} (explicit (u.w)^2 {np.round(explicit, 1).tolist()})")
    assert abs(exact - sampled) > 20 * err  # the exact theory is resolved off
    assert network_specialists == 2
    # the explicit neurons carry the label direction as the network's two specialists do, together
    assert abs(explicit.sum() / per_neuron[:2].sum() - 1) < 0.3, (explicit, per_neuron)
    assert abs(theory - sampled) < 0.6 * abs(exact - sampled), (sampled, theory, exact)
