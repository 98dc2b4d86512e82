"""The eigenbasis theory against dense Kronecker computations, finite differences and scalar minimization."""
import warnings

import numpy as np
import pytest
import scipy.linalg
import scipy.optimize

import renormpp as rp
from renormpp import kernels, theory

PARAMS = dict(N1=20.0, T=0.1, lambda0=0.7, lambda1=1.3, activation="erf")


def _data(P=30, N0=8, D=3, P0=7, seed=0):
    rng = np.random.default_rng(seed)
    X, X0 = rng.standard_normal((P, N0)), rng.standard_normal((P0, N0))
    W = rng.standard_normal((D, N0))
    Y = np.tanh(X @ W.T / np.sqrt(N0)) + 0.3 * rng.standard_normal((P, D))
    Y0 = np.tanh(X0 @ W.T / np.sqrt(N0))
    return X, Y, X0, Y0


def _spd(D, seed):
    A = np.random.default_rng(seed).standard_normal((D, D))
    return A @ A.T / D + 0.5 * np.eye(D)


# ---- dense references: the PD x PD matrices of the paper, built with np.kron ------------------
def _dense_A(Q, K, T, lambda1):
    """T 1 + Q (x) K / lambda1, with y vectorized as y[a * P + mu] = Y[mu, a]."""
    return T * np.eye(Q.shape[0] * K.shape[0]) + np.kron(Q, K) / lambda1


def dense_action(Q, X, Y, N1, T, lambda0, lambda1, activation):
    """Paper Eq. (1), with alpha / P = 1 / N1."""
    K = kernels.nngp(X, lambda0=lambda0, activation=activation)
    A = _dense_A(Q, K, T, lambda1)
    y = Y.T.reshape(-1)
    _, logdet_Q = np.linalg.slogdet(Q)
    _, logdet_A = np.linalg.slogdet(A / T)
    return np.trace(Q) - logdet_Q + (y @ np.linalg.solve(A, y) + logdet_A) / N1


def dense_gradient(Q, X, Y, N1, T, lambda0, lambda1, activation):
    """Supplement eq:supp:full_deriv with unit (non-symmetrized) E_ij: the matrix gradient."""
    K = kernels.nngp(X, lambda0=lambda0, activation=activation)
    Ainv = np.linalg.inv(_dense_A(Q, K, T, lambda1))
    y = Y.T.reshape(-1)
    u = Ainv @ y
    D = Q.shape[0]
    G = np.eye(D) - np.linalg.inv(Q)
    for i in range(D):
        for j in range(D):
            E = np.zeros((D, D))
            E[i, j] = 1.0
            dA = np.kron(E, K) / lambda1
            G[i, j] += (np.trace(Ainv @ dA) - u @ dA @ u) / N1
    return G


def dense_prediction(Q, X, Y, X0, T, lambda0, lambda1, activation):
    """Supplement eq:SM_bias and eq:SM_var, one test point at a time, with dense matrices."""
    K = kernels.nngp(X, lambda0=lambda0, activation=activation)
    Ainv = np.linalg.inv(_dense_A(Q, K, T, lambda1))
    y = Y.T.reshape(-1)
    means, covs = [], []
    for x0 in X0:
        k0 = kernels.nngp(X, x0[None], lambda0=lambda0, activation=activation)[:, 0]
        k00 = kernels.nngp(x0[None], lambda0=lambda0, activation=activation)[0, 0]
        KR0 = np.kron(Q, k0[:, None]) / lambda1  # (PD, D): (K^R)^{nu 0}_{b a}
        means.append(y @ Ainv @ KR0)
        covs.append(Q * k00 / lambda1 - KR0.T @ Ainv @ KR0)
    return np.array(means), np.array(covs)


# ---- action, gradient, Hessian ------------------------------------------------------------------
@pytest.mark.parametrize("D", [1, 2, 4])
@pytest.mark.parametrize("activation", ["erf", "linear", "tanh"])
def test_action_and_gradient_match_dense(D, activation):
    X, Y, _, _ = _data(D=D)
    params = dict(PARAMS, activation=activation)
    fit = theory.solve(X, Y, method="infinite_width", **params)
    for seed in range(3):
        Q = _spd(D, seed)
        S, G = fit.action_and_gradient(Q)
        np.testing.assert_allclose(S, dense_action(Q, X, Y, **params), rtol=1e-10)
        np.testing.assert_allclose(G, dense_gradient(Q, X, Y, **params), rtol=1e-8, atol=1e-10)


def test_gradient_and_hessian_match_finite_differences():
    X, Y, _, _ = _data(D=3)
    fit = theory.solve(X, Y, method="infinite_width", **PARAMS)
    Q = _spd(3, 7)
    rng = np.random.default_rng(8)
    E = rng.standard_normal((3, 3))
    E = E + E.T
    h = 1e-5
    S_p, G_p = fit.action_and_gradient(Q + h * E)
    S_m, G_m = fit.action_and_gradient(Q - h * E)
    _, G = fit.action_and_gradient(Q)
    # directional derivative of S is <G, E>; of G it is the Hessian applied to E
    np.testing.assert_allclose((S_p - S_m) / (2 * h), np.sum(G * E), rtol=1e-7)
    st = theory.action._AtQ(Q, fit.spectrum, fit.N1, fit.T, fit.lambda1)
    np.testing.assert_allclose(st.hessian_vp(E), (G_p - G_m) / (2 * h), rtol=1e-6, atol=1e-8)


# ---- the solution ----------------------------------------------------------------------------------
@pytest.mark.parametrize("D", [1, 3])
def test_solution_is_a_stationary_spd_minimum(D):
    X, Y, _, _ = _data(D=D)
    fit = rp.theory.solve(X, Y, method="exact", **PARAMS)
    assert fit.converged and fit.grad_norm < 1e-8
    assert np.linalg.eigvalsh(fit.Q)[0] > 0
    np.testing.assert_allclose(fit.Q, fit.Q.T, atol=0)
    # the dense gradient vanishes too, and nearby SPD matrices have a larger action
    assert np.linalg.norm(dense_gradient(fit.Q, X, Y, **PARAMS)) < 1e-7
    rng = np.random.default_rng(0)
    for _ in range(10):
        E = rng.standard_normal((D, D))
        assert fit.action_and_gradient(fit.Q + 1e-3 * (E + E.T))[0] > fit.action
    np.testing.assert_allclose(fit.action, dense_action(fit.Q, X, Y, **PARAMS), rtol=1e-10)
    np.testing.assert_allclose(fit.readout_overlap, fit.Q / PARAMS["lambda1"])


def test_solution_is_not_trivial():
    """At alpha = 1.5 the data move Q* well away from the infinite-width Q = 1."""
    X, Y, _, _ = _data(D=3)
    fit = rp.theory.solve(X, Y, method="exact", **PARAMS)
    assert np.abs(fit.Q - np.eye(3)).max() > 0.05


def test_one_dimensional_output_is_the_scalar_theory():
    X, Y, X0, Y0 = _data(D=1)
    p = PARAMS
    K = kernels.nngp(X, lambda0=p["lambda0"], activation=p["activation"])
    y = Y[:, 0]

    def scalar_action(q):  # S(q) of the single-output theory, dense P x P
        A = p["T"] * np.eye(len(y)) + q * K / p["lambda1"]
        return q - np.log(q) + (y @ np.linalg.solve(A, y) + np.linalg.slogdet(A / p["T"])[1]) / p["N1"]

    ref = scipy.optimize.minimize_scalar(scalar_action, bounds=(1e-3, 50), method="bounded",
                                         options=dict(xatol=1e-12))
    fit = rp.theory.solve(X, Y[:, 0], method="exact", **p)  # a 1-d Y means D = 1
    assert fit.Q.shape == (1, 1)
    np.testing.assert_allclose(fit.Q[0, 0], ref.x, rtol=1e-7)
    np.testing.assert_allclose(fit.action, ref.fun, rtol=1e-12)


def test_permuting_outputs_permutes_Q():
    X, Y, X0, Y0 = _data(D=4)
    perm = np.array([2, 0, 3, 1])
    fit = rp.theory.solve(X, Y, method="exact", **PARAMS)
    fit_p = rp.theory.solve(X, Y[:, perm], method="exact", **PARAMS)
    np.testing.assert_allclose(fit_p.Q, fit.Q[np.ix_(perm, perm)], atol=1e-9)
    np.testing.assert_allclose(fit_p.predict(X0).mean, fit.predict(X0).mean[:, perm], atol=1e-9)


def test_small_alpha_limit_and_one_loop_scaling():
    """Q* -> 1 linearly in alpha and |Q* - Q_one_loop| = O(alpha^2): check the log-log slopes."""
    X, Y, _, _ = _data(P=40, D=3)
    P = X.shape[0]
    alphas = np.array([0.04, 0.02, 0.01, 0.005])
    base = rp.theory.solve(X, Y, N1=P / alphas[0], T=0.1, lambda0=0.7, lambda1=1.3, method="infinite_width")
    dev, err = [], []
    for a in alphas:
        exact = base.refit("exact", N1=P / a, gtol=1e-13)
        one_loop = base.refit("one_loop", N1=P / a)
        dev.append(np.linalg.norm(exact.Q - np.eye(3)))
        err.append(np.linalg.norm(exact.Q - one_loop.Q))
    slope_dev = np.diff(np.log(dev)) / np.diff(np.log(alphas))
    slope_err = np.diff(np.log(err)) / np.diff(np.log(alphas))
    np.testing.assert_allclose(slope_dev, 1.0, atol=0.05)
    np.testing.assert_allclose(slope_err, 2.0, atol=0.05)
    assert err[-1] < 0.05 * dev[-1]


def test_one_loop_is_the_first_order_formula():
    """Q_1loop = 1 + alpha Q1 with Q1 from the supplement's explicit equation, built densely."""
    X, Y, _, _ = _data(D=3)
    p = PARAMS
    K = kernels.nngp(X, lambda0=p["lambda0"], activation=p["activation"])
    P, D = X.shape[0], 3
    Ainv = np.linalg.inv(_dense_A(np.eye(D), K, p["T"], p["lambda1"]))
    u = Ainv @ Y.T.reshape(-1)
    Q1 = np.zeros((D, D))
    for i in range(D):
        for j in range(D):
            E = np.zeros((D, D))
            E[i, j] = 1.0
            dA = np.kron(E, K) / p["lambda1"]
            Q1[i, j] = (-np.trace(Ainv @ dA) + u @ dA @ u) / P
    fit = rp.theory.solve(X, Y, method="one_loop", **p)
    np.testing.assert_allclose(fit.Q, np.eye(D) + P / p["N1"] * Q1, rtol=1e-10, atol=1e-12)


# ---- predictions ---------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["exact", "one_loop", "infinite_width"])
def test_prediction_matches_dense(method):
    X, Y, X0, Y0 = _data(D=3)
    fit = rp.theory.solve(X, Y, method=method, **PARAMS)
    pred = fit.predict(X0)
    args = {k: PARAMS[k] for k in ("T", "lambda0", "lambda1", "activation")}
    mean, cov = dense_prediction(fit.Q, X, Y, X0, **args)
    assert pred.mean.shape == (len(X0), 3) and pred.cov.shape == (len(X0), 3, 3)
    np.testing.assert_allclose(pred.mean, mean, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(pred.cov, cov, rtol=1e-8, atol=1e-11)
    eg = np.mean(np.sum((Y0 - mean) ** 2, axis=1) + np.trace(cov, axis1=1, axis2=2))
    np.testing.assert_allclose(fit.generalization_error(X0, Y0), eg, rtol=1e-9)


def test_infinite_width_is_gp_regression():
    """With Q = 1 each output is GP regression with kernel K/lambda1 and noise variance T."""
    X, Y, X0, _ = _data(D=2)
    p = PARAMS
    fit = rp.theory.solve(X, Y, method="infinite_width", **p)
    K = kernels.nngp(X, lambda0=p["lambda0"], activation=p["activation"]) / p["lambda1"]
    K0 = kernels.nngp(X0, X, lambda0=p["lambda0"], activation=p["activation"]) / p["lambda1"]
    K00 = kernels.nngp(X0, lambda0=p["lambda0"], activation=p["activation"]) / p["lambda1"]
    L = scipy.linalg.cho_factor(K + p["T"] * np.eye(len(X)))
    pred = fit.predict(X0)
    np.testing.assert_allclose(pred.mean, K0 @ scipy.linalg.cho_solve(L, Y), rtol=1e-9)
    var = np.diag(K00) - np.einsum("ij,ji->i", K0, scipy.linalg.cho_solve(L, K0.T))
    np.testing.assert_allclose(pred.var, np.repeat(var[:, None], 2, axis=1), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(pred.cov[:, 0, 1], 0.0, atol=1e-14)


def test_posterior_predictive_is_a_numpyro_mvn():
    import jax
    import numpyro.distributions as dist

    X, Y, X0, _ = _data(D=3)
    fit = rp.theory.solve(X, Y, method="exact", **PARAMS)
    d = fit.posterior_predictive(X0)
    pred = fit.predict(X0)
    assert isinstance(d, dist.MultivariateNormal)
    assert d.batch_shape == (len(X0),) and d.event_shape == (3,)
    np.testing.assert_allclose(np.asarray(d.mean), pred.mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(d.covariance_matrix), pred.cov, rtol=1e-4, atol=1e-6)
    draws = np.asarray(d.sample(jax.random.PRNGKey(0), (20000,)))
    assert draws.shape == (20000, len(X0), 3) and np.all(np.isfinite(draws))
    se = np.sqrt(np.einsum("pdd->pd", pred.cov) / 20000)
    assert np.all(np.abs(draws.mean(0) - pred.mean) < 5 * se + 1e-6)


def test_prediction_on_training_points_has_small_psd_covariance():
    """At low T the posterior pins the training points: the covariance is tiny, but never negative."""
    X, Y, _, _ = _data(D=2)
    fit = rp.theory.solve(X, Y, N1=50.0, T=1e-6, method="exact")
    pred = fit.predict(X)
    assert np.all(pred.cov_eigvals >= 0)
    np.testing.assert_allclose(pred.mean, Y, atol=1e-3)


# ---- refit, convergence report, bad input ----------------------------------------------------------
def test_refit_equals_a_fresh_solve():
    X, Y, X0, Y0 = _data(D=2)
    fit = rp.theory.solve(X, Y, method="infinite_width", **PARAMS)
    new = fit.refit("exact", N1=7.0, T=0.3, lambda1=0.9)
    ref = rp.theory.solve(X, Y, **dict(PARAMS, N1=7.0, T=0.3, lambda1=0.9))
    np.testing.assert_allclose(new.Q, ref.Q, atol=1e-9)
    assert new.N1 == 7.0 and new.T == 0.3 and new.lambda1 == 0.9 and new.method == "exact"


def test_non_convergence_is_reported():
    X, Y, _, _ = _data(D=3)
    with pytest.warns(theory.ConvergenceWarning, match=r"did not converge: \|dS/dQ\| = "):
        fit = rp.theory.solve(X, Y, method="exact", maxiter=1, **PARAMS)
    assert not fit.converged and fit.grad_norm > 1e-8


def test_one_loop_breakdown_is_flagged():
    X, Y, _, _ = _data(D=3)
    with pytest.warns(RuntimeWarning, match="one-loop Q is not positive definite"):
        # weak labels and alpha = 60: the trace term -alpha <k/(lambda1 T + k)> drives Q below zero
        fit = rp.theory.solve(X, 0.01 * Y, method="one_loop", **dict(PARAMS, N1=0.5))
    assert not fit.converged and fit.action == np.inf


def test_non_odd_activations():
    X, Y, X0, Y0 = _data(D=2)
    # the paper's action holds for odd activations; a non-odd one (relu, or a callable such as cos) takes the
    # two-order-parameter theory (tests/test_theory_beyond.py), and only the 1/N1 correction is refused
    with pytest.raises(ValueError, match="needs an odd activation.*not odd"):
        rp.theory.solve(X, Y, N1=10, activation="relu", method="corrected")
    with pytest.raises(ValueError, match="not odd"):
        rp.theory.solve(X, Y, N1=10, activation=np.cos, method="corrected")
    fit = rp.theory.solve(X, Y, N1=10, activation="relu", method="infinite_width")
    assert np.isfinite(fit.generalization_error(X0, Y0))
    with pytest.raises(ValueError, match="odd"):
        fit.refit("corrected")
    assert fit.refit("exact").nonodd and np.isfinite(fit.refit("exact").generalization_error(X0, Y0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        odd = rp.theory.solve(X, Y, N1=10, activation=np.sin, method="exact")  # callables work
    assert odd.converged


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(Y="short"), "X has 30 rows .* Y has 29"),
        (dict(X="nan"), "X contains 1 NaN or inf"),
        (dict(Y="inf"), "Y contains 1 NaN or inf"),
        (dict(N1=0), "N1 must be a positive"),
        (dict(N1=-5), "N1 must be a positive"),
        (dict(T=0.0), "T must be a positive"),
        (dict(T=np.nan), "T must be a positive"),
        (dict(lambda0=-1.0), "lambda0 must be a positive"),
        (dict(lambda1=0.0), "lambda1 must be a positive"),
        (dict(activation="gelu"), "unknown activation 'gelu'; choose one of 'erf', 'relu', 'linear', 'tanh'"),
        (dict(method="two_loop"), "unknown method 'two_loop'; choose one of 'exact', 'one_loop', 'infinite_width'"),
        (dict(X="3d"), "X must be a 2-d array"),
    ],
)
def test_bad_input_to_solve(change, match):
    X, Y, _, _ = _data(D=2)
    args = dict(PARAMS)
    args.update({k: v for k, v in change.items() if k not in ("X", "Y")})
    if change.get("Y") == "short":
        Y = Y[:-1]
    if change.get("Y") == "inf":
        Y = Y.copy(); Y[3, 1] = np.inf
    if change.get("X") == "nan":
        X = X.copy(); X[0, 0] = np.nan
    if change.get("X") == "3d":
        X = X[None]
    with pytest.raises(ValueError, match=match):
        rp.theory.solve(X, Y, **args)


def test_bad_test_data():
    X, Y, X0, Y0 = _data(D=2)
    fit = rp.theory.solve(X, Y, method="infinite_width", **PARAMS)
    with pytest.raises(ValueError, match="Y0 has D=3 outputs but the training labels have D=2"):
        fit.generalization_error(X0, np.ones((len(X0), 3)))
    with pytest.raises(ValueError, match="X0 has 5 features but the training inputs have 8"):
        fit.predict(X0[:, :5])
    with pytest.raises(ValueError, match="X0 has 7 rows but Y0 has 6"):
        fit.generalization_error(X0, Y0[:-1])
    with pytest.raises(ValueError, match="Y0 contains"):
        fit.generalization_error(X0, np.full_like(Y0, np.nan))
    with pytest.raises(ValueError, match="symmetric positive definite"):
        fit.action_and_gradient(-np.eye(2))


@pytest.mark.parametrize("scale, T, N1", [(1.0, 0.01, 10), (1e-3, 1e-4, 10), (100.0, 1e-4, 1e5), (1e4, 1.0, 10)])
def test_solver_converges_across_scales(scale, T, N1):
    """Hard corners: alpha = 50 with the action flat to round-off, tiny and huge labels, T from 1e-4 to 1."""
    data = rp.datasets.synthetic(P=500, P_test=10, N0=50, D=4, teacher="erf_1hl", seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = rp.theory.solve(data.X, scale * data.Y, N1=N1, T=T)
    assert fit.converged and fit.grad_norm <= 1e-8 and np.linalg.eigvalsh(fit.Q)[0] > 0


def test_the_repr_says_what_was_solved():
    """fit.refit("one_loop") printed converged=True beside grad_norm 0.13 (issue 30, item 6): the one-loop Q solves
    nothing, and its repr says so."""
    data = rp.datasets.synthetic(P=50, P_test=10, N0=10, D=2, seed=0)
    fit = rp.theory.solve(data.X, data.Y, N1=30)
    one = repr(fit.refit("one_loop"))
    assert "method='one_loop'" in one and "solves nothing" in one and "distance from the saddle point" in one
    exact = repr(fit)
    assert "method='exact'" in exact and f"n_iter={fit.n_iter}" in exact and "solves nothing" not in exact
    assert "nothing solved" in repr(fit.refit("infinite_width"))


def test_refits_share_the_test_kernel_and_a_changed_test_set_is_recomputed(monkeypatch):
    """The theory curves of a sweep evaluate one test set at dozens of widths: its kernel (which does not depend on
    the width) is computed once per spectrum, and a test set changed in place is a new one, not a stale hit."""
    X, Y, X0, Y0 = _data()
    fit = theory.solve(X, Y, N1=20, T=0.05, method="infinite_width")
    calls = []
    nngp = kernels.nngp
    monkeypatch.setattr(kernels, "nngp", lambda *a, **k: calls.append(1) or nngp(*a, **k))
    eps = [fit.refit(m, N1=n).generalization_error(X0, Y0) for n in (10, 20, 40) for m in ("exact", "one_loop")]
    assert len(calls) == 1
    monkeypatch.undo()
    fresh = [theory.solve(X, Y, N1=n, T=0.05, method=m).generalization_error(X0, Y0)
             for n in (10, 20, 40) for m in ("exact", "one_loop")]
    np.testing.assert_allclose(eps, fresh, rtol=1e-10)
    X0[0] += 1.0
    moved = theory.solve(X, Y, N1=20, T=0.05).generalization_error(X0, Y0)
    assert fit.refit("exact").generalization_error(X0, Y0) == pytest.approx(moved, rel=1e-10)
    kappa, _ = fit.test_kernel(X0)
    with pytest.raises(ValueError, match="read-only"):
        kappa[0, 0] = 0.0
