"""Deep networks (issue 16): the depth-L model, the composed kernel, the depth-L action against dense and
finite-difference references, and the Gibbs draw of the readout at depth 2."""
import warnings

import jax
import numpy as np
import numpyro
import pytest
import scipy.optimize
import scipy.special
from numpyro.infer import Predictive
from numpyro.infer.util import potential_energy

import renormpp as rp
from renormpp import kernels, models, network, readout

from test_theory import PARAMS, _spd
from test_theory import _data as _data4


def _data(**kw):
    X, Y, X0, _ = _data4(**kw)
    return X, Y, X0


def _power(Q, p):
    q, U = np.linalg.eigh(Q)
    return (U * q**p) @ U.T


def dense_deep_action(Q, X, Y, depth, N1, T, lambda0, lambda1, activation):
    """Eq. (D1) with the PD x PD matrix built by np.kron and Q^(1/L) by an eigendecomposition."""
    K = kernels.nngp(X, lambda0=lambda0, activation=activation, depth=depth)
    A = T * np.eye(Q.shape[0] * K.shape[0]) + np.kron(Q, K) / lambda1
    y = Y.T.reshape(-1)
    return (depth * np.trace(_power(Q, 1.0 / depth)) - np.linalg.slogdet(Q)[1]
            + (y @ np.linalg.solve(A, y) + np.linalg.slogdet(A / T)[1]) / N1)


def _fd_gradient(f, Q, h=1e-6):
    """The matrix gradient of f at symmetric Q by central differences along symmetric directions."""
    D = Q.shape[0]
    G = np.zeros((D, D))
    for i in range(D):
        for j in range(i, D):
            E = np.zeros((D, D))
            E[i, j] = E[j, i] = 1.0
            g = (f(Q + h * E) - f(Q - h * E)) / (2 * h)
            G[i, j] = G[j, i] = g if i == j else g / 2
    return G


# ---- the model ------------------------------------------------------------------------------------------------------
def test_depth_one_is_the_one_hidden_layer_model():
    X, Y, _ = _data(D=2)
    key = jax.random.PRNGKey(3)
    a = Predictive(models.one_hidden_layer, num_samples=2)(key, X, Y, N1=7, lambda0=0.7, lambda1=1.3, bias=True)
    b = Predictive(models.mlp, num_samples=2)(key, X, Y, N1=7, depth=1, lambdas=(0.7, 1.3), bias=True)
    assert set(a) == set(b) == {"w", "v", "b", "c", "y"}
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_the_deep_model_has_the_documented_sites_priors_and_potential():
    X, Y, _ = _data(D=2)
    N1, lams, T = 5, (0.5, 2.0, 4.0, 1.5), 0.2
    tr = numpyro.handlers.trace(numpyro.handlers.seed(models.mlp, 0)).get_trace(X, Y, N1=N1, depth=3, lambdas=lams,
                                                                                  T=T)
    shapes = {k: v["value"].shape for k, v in tr.items() if v["type"] == "sample" and not v["is_observed"]}
    assert shapes == {"w0": (N1, X.shape[1]), "w1": (N1, N1), "w2": (N1, N1), "v": (2, N1)}
    params = {k: tr[k]["value"] for k in shapes}
    # U = L/T + sum_l lambda_l |w_l|^2 / 2 + lambda_L |v|^2 / 2 + const, against a hand-written forward pass
    h = X
    for ell in range(3):
        w = np.asarray(params[f"w{ell}"], dtype=np.float64)
        h = np.asarray(jax.scipy.special.erf(h @ w.T / np.sqrt(w.shape[1])))
    f = h @ np.asarray(params["v"]).T / np.sqrt(N1)
    U = 0.5 * np.sum((Y - f) ** 2) / T + sum(0.5 * lam * np.sum(np.asarray(params[k]) ** 2)
                                              for lam, k in zip(lams, ("w0", "w1", "w2", "v")))
    const = 0.5 * X.shape[0] * 2 * np.log(2 * np.pi * T) + sum(
        0.5 * np.prod(shapes[k]) * np.log(2 * np.pi / lam) for lam, k in zip(lams, ("w0", "w1", "w2", "v")))
    got = float(potential_energy(models.mlp, (X, Y), dict(N1=N1, depth=3, lambdas=lams, T=T), params))
    np.testing.assert_allclose(got, U + const, rtol=2e-5)
    dims = rp.models.DIMS
    assert dims["w0"] == ["hidden", "input"] and dims["w1"] == ["hidden", "hidden_in"]


@pytest.mark.parametrize("change, match", [
    (dict(depth=0), "depth must be a positive integer"),
    (dict(depth=2, lambdas=(1.0, 2.0)), r"lambdas must be one number or 3"),
    (dict(depth=2, lambdas=(1.0, -2.0, 1.0)), "lambdas"),
])
def test_the_deep_model_refuses_bad_arguments(change, match):
    X, Y, _ = _data(D=2)
    kw = dict(N1=4, depth=2) | change
    with pytest.raises(ValueError, match=match):
        numpyro.handlers.seed(models.mlp, 0)(X, Y, **kw)


def test_the_composed_kernel_is_the_wide_prior_networks_kernel():
    """K^(L) against Monte Carlo: the hidden features of 64 independent prior networks of width 500, depth 2 and 3;
    the 30 distinct entries' z-scores (the error from the 64 networks' spread) within the Bonferroni bound at
    false-alarm rate 1e-4 (4.65). The finite-width bias of E[h h^T / N] is O(1/N): no more than a few 1e-4 at N = 500
    (the mean deviation over 10 seeds), a tenth of the error 2e-3. Over 8 seeds: no failure, largest |z| 4.1;
    fails with the last layer's lambda off by 20% in the sampled networks (|z| 20)."""
    from stat_bounds import assert_z_within

    rng = np.random.default_rng(0)
    X = rng.standard_normal((5, 8))
    N, draws, iu = 500, 64, np.triu_indices(5)
    z = []
    for depth, lam in ((2, 1.0), (3, (0.8, 1.5, 1.2))):
        K = kernels.nngp(X, lambda0=lam, activation="erf", depth=depth)
        lams = kernels.hidden_lambdas(lam, depth)
        est = np.empty((draws, 5, 5))
        for i in range(draws):
            h = X
            for ell in range(depth):
                w = rng.standard_normal((N, h.shape[1])) / np.sqrt(lams[ell])
                h = scipy.special.erf(h @ w.T / np.sqrt(h.shape[1]))
            est[i] = h @ h.T / N
        mean, se = est.mean(0), est.std(0, ddof=1) / np.sqrt(draws)
        z.append(((mean - K) / se)[iu])
        np.testing.assert_allclose(kernels.nngp_diag(X, lambda0=lam, activation="erf", depth=depth), np.diag(K),
                                   rtol=1e-12)
    assert_z_within(np.concatenate(z), what="prior networks' h h^T / N against K^(L)")


# ---- the depth-L theory -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [2, 3])
@pytest.mark.parametrize("D", [1, 3])
def test_deep_action_and_gradient_match_dense_and_finite_differences(depth, D):
    X, Y, _ = _data(D=D)
    fit = rp.theory.solve(X, Y, method="infinite_width", depth=depth, **PARAMS)
    for seed in range(2):
        Q = _spd(D, seed)
        S, G = fit.action_and_gradient(Q)
        dense = lambda Q: dense_deep_action(Q, X, Y, depth, **PARAMS)  # noqa: E731
        np.testing.assert_allclose(S, dense(Q), rtol=1e-10)
        np.testing.assert_allclose(G, _fd_gradient(dense, Q), rtol=1e-5, atol=1e-7)


def test_deep_hessian_matches_finite_differences():
    X, Y, _ = _data(D=3)
    fit = rp.theory.solve(X, Y, method="infinite_width", depth=3, **PARAMS)
    Q = _spd(3, 7)
    rng = np.random.default_rng(8)
    E = rng.standard_normal((3, 3))
    E = E + E.T
    h = 1e-5
    G_p, G_m = fit.action_and_gradient(Q + h * E)[1], fit.action_and_gradient(Q - h * E)[1]
    st = rp.theory.action._AtQ(Q, fit.spectrum, fit.N1, fit.T, fit.lambda1, depth=3)
    np.testing.assert_allclose(st.hessian_vp(E), (G_p - G_m) / (2 * h), rtol=1e-6, atol=1e-8)
    # nearly equal eigenvalues: the divided differences take their limit
    st = rp.theory.action._AtQ(np.diag([1.0, 1.0 + 1e-9, 2.0]), fit.spectrum, fit.N1, fit.T, fit.lambda1, depth=3)
    assert np.all(np.isfinite(st.hessian_u()))


@pytest.mark.parametrize("D", [1, 3])
def test_deep_solution_is_the_stationary_minimum_of_the_dense_action(D):
    X, Y, _ = _data(D=D)
    fit = rp.theory.solve(X, Y, method="exact", depth=2, **PARAMS)
    assert fit.converged and fit.depth == 2
    dense = lambda Q: dense_deep_action(Q, X, Y, 2, **PARAMS)  # noqa: E731
    assert np.linalg.norm(_fd_gradient(dense, fit.Q)) < 1e-6
    if D == 1:  # a scalar minimization of the dense action
        ref = scipy.optimize.minimize_scalar(lambda q: dense(np.array([[q]])), bounds=(1e-3, 50), method="bounded",
                                             options=dict(xatol=1e-12))
        np.testing.assert_allclose(fit.Q[0, 0], ref.x, rtol=1e-6)
    np.testing.assert_allclose(fit.readout_overlap, _power(fit.Q, 0.5) / PARAMS["lambda1"], rtol=1e-12)
    assert np.abs(fit.Q - rp.theory.solve(X, Y, method="exact", **PARAMS).Q).max() > 1e-3  # depth matters


def test_deep_predictions_are_the_renormalized_gp_with_the_composed_kernel():
    """Mean and covariance against dense GP algebra with Q (x) K^(L) / lambda_1."""
    X, Y, X0 = _data(D=2)
    fit = rp.theory.solve(X, Y, method="exact", depth=2, **PARAMS)
    kw = dict(lambda0=PARAMS["lambda0"], activation="erf", depth=2)
    K, K0, K00 = kernels.nngp(X, **kw), kernels.nngp(X, X0, **kw), kernels.nngp_diag(X0, **kw)
    A = PARAMS["T"] * np.eye(2 * len(X)) + np.kron(fit.Q, K) / PARAMS["lambda1"]
    pred = fit.predict(X0)
    for i in range(len(X0)):
        KR0 = np.kron(fit.Q, K0[:, i:i + 1]) / PARAMS["lambda1"]
        np.testing.assert_allclose(pred.mean[i], Y.T.reshape(-1) @ np.linalg.solve(A, KR0), rtol=1e-8, atol=1e-10)
        cov = fit.Q * K00[i] / PARAMS["lambda1"] - KR0.T @ np.linalg.solve(A, KR0)
        np.testing.assert_allclose(pred.cov[i], cov, rtol=1e-7, atol=1e-10)


def test_deep_one_loop_is_the_first_order_of_the_exact_solution():
    """|Q* - Q_one_loop| = O(alpha^2) at depth 3 (it would be O(alpha) without the factor L of Eq. (D2))."""
    X, Y, _ = _data(P=30, D=2)
    P = X.shape[0]
    alphas = np.array([0.02, 0.01, 0.005])
    base = rp.theory.solve(X, Y, N1=P / alphas[0], T=0.1, method="infinite_width", depth=3)
    err = [np.linalg.norm(base.refit("exact", N1=P / a, gtol=1e-13).Q - base.refit("one_loop", N1=P / a).Q)
           for a in alphas]
    np.testing.assert_allclose(np.diff(np.log(err)) / np.diff(np.log(alphas)), 2.0, atol=0.05)


def test_refit_keeps_the_depth_and_deep_refuses_what_it_does_not_cover():
    X, Y, _ = _data(D=2)
    fit = rp.theory.solve(X, Y, method="exact", depth=2, **PARAMS)
    again = fit.refit(N1=40.0)
    assert again.depth == 2
    np.testing.assert_allclose(again.Q, rp.theory.solve(X, Y, method="exact", depth=2, **(PARAMS | dict(N1=40.0))).Q,
                               atol=1e-9)
    for kw in (dict(method="corrected"), dict(activation="relu")):
        with pytest.raises(ValueError, match="depth=2 holds for odd activations"):
            rp.theory.solve(X, Y, depth=2, **(PARAMS | kw))
    assert rp.diagnostics.theory_fit(fit, "corrected") is None
    with pytest.raises(ValueError, match="depth must be a positive integer"):
        rp.theory.solve(X, Y, depth=0, **PARAMS)


# ---- the readout given the hidden weights, at depth 2 -------------------------------------------------------------
def test_the_gibbs_draw_of_v_at_depth_two_has_the_closed_form_mean_and_covariance():
    X, Y, _ = _data(D=2)
    N1, T, lam = 6, 0.1, 1.3
    rng = np.random.default_rng(1)
    params = {"w0": rng.standard_normal((N1, X.shape[1])), "w1": rng.standard_normal((N1, N1))}
    cond = readout.conditional(params, X, Y, T=T, lambda1=lam)
    phi = np.asarray(network.hidden(params, X), dtype=np.float64) / np.sqrt(N1)
    prec = lam * np.eye(N1) + phi.T @ phi / T  # per output: v_a | w ~ N(prec^-1 phi^T y_a / T, prec^-1)
    cov = np.linalg.inv(prec)
    mean = (cov @ phi.T @ Y / T).T
    draws = jax.vmap(lambda k: readout.sample_readout(k, cond, Y, T=T))(jax.random.split(jax.random.PRNGKey(0),
                                                                                         20000))
    draws = np.asarray(draws, dtype=np.float64)
    np.testing.assert_allclose(draws.mean(0), mean, atol=4 * np.sqrt(np.diag(cov)).max() / np.sqrt(20000) + 1e-6)
    emp = np.cov(draws[:, 0, :].T)
    np.testing.assert_allclose(emp, cov, atol=0.05 * np.abs(cov).max())


# ---- sampling at depth 2 ------------------------------------------------------------------------------------------
def _mean_and_se(x):
    est = rp.diagnostics.error_of_mean(np.asarray(x, dtype=np.float64), cut=0)
    return est.mean, est.error


@pytest.mark.slow
def test_the_default_sampler_and_nuts_agree_at_depth_two():
    """A depth-2 network (P=30, N0=8, N=12, D=2): kinetic Langevin with exact Gibbs draws of v and NUTS agree on the
    Rao-Blackwellized eps_g and overlaps: the four z-scores (combined standard errors) within the Bonferroni bound at
    false-alarm rate 1e-4 (4.21). Over 3 seeds (PRNG keys 5-7) at these sizes (kinetic 1000 draws, NUTS 400 per
    chain): no failure, largest |z| 1.7; fails with the kinetic sampler at T = 0.115 instead of 0.1 (eps_g |z| 5.9)."""
    from numpyro.infer import MCMC, NUTS

    from stat_bounds import assert_z_within

    data = rp.datasets.synthetic(P=30, P_test=200, N0=8, D=2, teacher="erf_1hl", seed=0)
    kw = dict(N1=12, depth=2, T=0.1)
    rb = readout.rao_blackwell(data.X, data.Y, data.X_test, data.Y_test, T=kw["T"], lambda1=1.0)
    gibbs = readout.gibbs_fn(data.X, data.Y, T=kw["T"], lambda1=1.0)
    runs = {}
    for name, kernel, n_warm, n_draws, method in [
        ("kinetic + Gibbs v", rp.infer.KineticLangevin(models.mlp, step_size=1e-3, inner_steps=10, observables=rb,
                                                       gibbs_fn=gibbs), 150, 1000, "vectorized"),
        ("NUTS", rp.infer.Observed(NUTS(models.mlp), rb), 150, 400, "sequential"),
    ]:
        mcmc = MCMC(kernel, num_warmup=n_warm, num_samples=n_draws, num_chains=2, chain_method=method,
                    progress_bar=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", rp.infer.DivergenceWarning)
            mcmc.run(jax.random.PRNGKey(5), data.X, data.Y, **kw)
        s = mcmc.get_samples(group_by_chain=True)
        runs[name] = {"eps_g": _mean_and_se(s["eps_g"]),
                      **{f"overlap{a}{b}": _mean_and_se(s["overlap"][:, :, a, b]) for a, b in ((0, 0), (0, 1), (1, 1))}}
    z = {}
    for key, (m_ref, se_ref) in runs["NUTS"].items():
        m, se = runs["kinetic + Gibbs v"][key]
        assert se < 0.05 * abs(m) + 0.01, (key, m, se)
        z[key] = (m - m_ref) / np.hypot(se, se_ref)
    assert_z_within(list(z.values()), what=f"kinetic + Gibbs v against NUTS, z by quantity {z}")


def test_a_deep_point_through_the_experiments():
    """model.depth reaches the model, the theory, theory.json and the report; a non-odd activation is refused."""
    cfg = {"data": {"name": "synthetic", "P": 20, "P_test": 20, "N0": 5, "D": 2},
           "model": {"N1": [6], "T": 0.1, "depth": 2},
           "sampler": {"kind": "kinetic", "num_warmup": 20, "num_samples": 40},
           "run": {"out": None, "progress": False}}
    import json
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        cfg["run"]["out"] = tmp
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = rp.experiments.run(cfg)
        point = Path(out) / "points" / "N1=6_seed=0"
        th = json.loads((point / "theory.json").read_text())
        data = rp.datasets.synthetic(P=20, P_test=20, N0=5, D=2)
        fit = rp.theory.solve(data.X, data.Y, N1=6, T=0.1, depth=2)
        np.testing.assert_allclose(th["exact"]["Q"], fit.Q, rtol=1e-7, atol=1e-9)
        assert not th["corrected"]["applies"]
        assert "depth=2" in (Path(out) / "report.md").read_text()
    with pytest.raises(rp.experiments.ConfigError, match="model.depth = 2 needs an odd activation"):
        rp.experiments.resolve({**cfg, "model": {**cfg["model"], "activation": "relu"}})


def test_the_integrated_model_and_the_observables_at_depth_two():
    """v integrated out at depth 2: the model's density of w is the prior times the Gaussian likelihood
    N(y_a | 0, T + phi phi^T / (lambda_L N)) per output, built densely; eps_g and v v^T / N of a draw by hand."""
    import scipy.stats

    X, Y, X0 = _data(D=2)
    Y0 = np.ones((len(X0), 2))
    N1, T, lams = 5, 0.2, (0.5, 2.0, 1.5)
    rng = np.random.default_rng(2)
    params = {"w0": rng.standard_normal((N1, X.shape[1])), "w1": rng.standard_normal((N1, N1))}
    kw = dict(N1=N1, depth=2, lambdas=lams, T=T)
    U = float(potential_energy(models.mlp, (X, Y), kw | dict(integrate_v=True), params))
    phi = np.asarray(network.hidden(params, X), dtype=np.float64)
    C = T * np.eye(len(X)) + phi @ phi.T / (lams[-1] * N1)
    loglik = sum(scipy.stats.multivariate_normal(np.zeros(len(X)), C).logpdf(Y[:, a]) for a in range(2))
    logprior = sum(scipy.stats.norm(0, 1 / np.sqrt(lam)).logpdf(params[k]).sum() for lam, k in zip(lams, ("w0", "w1")))
    np.testing.assert_allclose(U, -(loglik + logprior), rtol=1e-4)
    params["v"] = rng.standard_normal((2, N1))
    got = rp.observables.evaluate(rp.observables.default(X0, Y0), {k: v[None] for k, v in params.items()})
    f = np.asarray(network.hidden(params, X0), dtype=np.float64) @ params["v"].T / np.sqrt(N1)
    np.testing.assert_allclose(np.asarray(got["eps_g"])[0], np.mean(np.sum((Y0 - f) ** 2, axis=1)), rtol=1e-4)
    np.testing.assert_allclose(np.asarray(got["overlap"])[0], params["v"] @ params["v"].T / N1, rtol=1e-5)
