"""Baselines: Adam training with early stopping, the hyperparameter search, the best infinite-width GP."""
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import renormpp as rp
from renormpp import kernels, theory
from renormpp.baselines import best_gp, search_adam, split, train_adam
from renormpp.baselines.adam import Training

SMALL = dict(max_epochs=60, patience=10)


def relu_teacher(P=100, N0=5, D=2, hidden=3, noise=0.0, seed=0):
    """Labels from a one-hidden-layer ReLU network with ``hidden`` units (realizable by a wider student)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((P, N0))
    w, v = rng.standard_normal((hidden, N0)), rng.standard_normal((D, hidden))
    Y = np.maximum(X @ w.T / np.sqrt(N0), 0) @ v.T / np.sqrt(hidden)
    return X, Y + noise * rng.standard_normal(Y.shape)


def mse_numpy(params, X, Y):
    """MSE of the ReLU network in float64 numpy, independent of the package's forward pass."""
    w, v = (np.asarray(params[k], np.float64) for k in ("w", "v"))
    F = np.maximum(X @ w.T / np.sqrt(X.shape[1]), 0) @ v.T / np.sqrt(w.shape[0])
    return np.mean(np.sum((Y - F) ** 2, axis=1))


# ---- Adam ------------------------------------------------------------------------------------------
def test_adam_fits_a_realizable_teacher():
    X, Y = relu_teacher()
    r = train_adam(X, Y, 64, learning_rate=1e-2, batch_size=20, max_epochs=400, patience=400)
    assert r.epochs == 400 and not r.early_stopped
    assert r.train_curve[0] > 0.3  # the untrained network is far off
    assert r.train_mse < 2e-3 and r.train_mse < 1e-2 * r.train_curve[0]
    data = split(X, Y, 0.2, 0)
    np.testing.assert_allclose(mse_numpy(r.params, data.X, data.Y), r.train_mse, rtol=1e-4, atol=1e-7)
    assert r.predict(X).shape == Y.shape


def test_early_stopping_stops_and_restores_the_best_parameters():
    X, Y = relu_teacher(P=80, noise=1.0, seed=1)  # mostly noise: a wide network overfits fast
    r = train_adam(X, Y, 256, learning_rate=1e-2, batch_size=16, max_epochs=300, patience=8, seed=3)
    assert r.early_stopped and r.epochs < 300
    assert r.epochs == r.best_epoch + 8 and r.best_epoch == int(np.argmin(r.val_curve))
    assert r.val_curve[-1] > r.val_curve[r.best_epoch]
    assert len(r.train_curve) == len(r.val_curve) == r.epochs + 1
    data = split(X, Y, 0.2, 0)
    np.testing.assert_allclose(mse_numpy(r.params, data.X_val, data.Y_val), r.val_curve.min(), rtol=1e-4)
    np.testing.assert_allclose(r.val_mse, r.val_curve.min(), rtol=1e-5)


def test_l2_is_the_gradient_of_a_quadratic_penalty():
    """Coupled L2 (PyTorch's Adam(weight_decay=l2)): Adam on the gradient of MSE + (l2/2)(|w|^2 + |v|^2). AdamW's
    decoupled decay, or a penalty l2 |theta|^2, would take other steps."""
    X, Y = relu_teacher(P=40, N0=4, noise=0.3)
    l2, lr = 0.5, 0.05
    training = Training(split(X, Y, 0.25, 0), 8, learning_rate=lr, l2=l2, batch_size=1000)
    params = training.params
    training.run(3)  # three full-batch steps
    Xt, Yt = (jnp.asarray(a, jnp.float32) for a in (training.data[0], training.data[1]))

    def objective(p):
        return rp.baselines.scores(Yt, rp.network.forward(p, Xt, "relu"))[0] + 0.5 * l2 * sum(
            jnp.sum(a**2) for a in p.values())

    opt = optax.adam(lr)
    state = opt.init(params)
    for _ in range(3):
        updates, state = opt.update(jax.grad(objective)(params), state)
        params = optax.apply_updates(params, updates)
    for k in ("w", "v"):
        np.testing.assert_allclose(training.params[k], params[k], rtol=1e-4, atol=1e-6)


def test_adam_baseline_retrains_independent_initializations():
    X, Y = relu_teacher(P=60)
    config = dict(learning_rate=1e-2, l2=1e-4, batch_size=16)
    b = rp.baselines.adam_baseline(X, Y, 16, X_test=X[:20], Y_test=Y[:20], config=config, n_init=3, **SMALL)
    assert b.search is None and b.config == config and len(b.runs) == 3
    test = b.values["test_mse"]
    assert len(set(test.tolist())) == 3  # different initializations
    assert b.mean["test_mse"] == pytest.approx(test.mean()) and b.std["test_mse"] == pytest.approx(test.std(ddof=1))
    assert all(r.params is None for r in b.runs)


# ---- hyperparameter search ------------------------------------------------------------------------
def test_search_beats_a_bad_configuration_and_is_reproducible():
    X, Y = relu_teacher(P=100, noise=0.2)
    space = rp.baselines.SearchSpace(batch_size=(16, 32))
    kw = dict(n_trials=6, space=space, seed=0, **SMALL)
    s = search_adam(X, Y, 32, **kw)
    bad = train_adam(X, Y, 32, learning_rate=1e-4, l2=1e-1, batch_size=32, split_seed=0, seed=0, **SMALL)
    assert s.best_val_mse < 0.5 * bad.val_mse
    assert len(s.trials) == 6 and {t["state"] for t in s.trials} <= {"complete", "pruned"}
    again = search_adam(X, Y, 32, **kw)
    assert again.best_config == s.best_config and again.best_val_mse == s.best_val_mse
    assert [t["val_mse"] for t in again.trials] == [t["val_mse"] for t in s.trials]
    # the reported value is that of the early-stopped network trained with the best configuration
    best = train_adam(X, Y, 32, **s.best_config, split_seed=0, seed=0, **SMALL)
    np.testing.assert_allclose(best.val_mse, s.best_val_mse, rtol=1e-5)


def test_ray_backend_names_the_extra_when_ray_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    X, Y = relu_teacher(P=20)
    with pytest.raises(ImportError, match=r"pip install 'renormpp\[ray\]'"):
        search_adam(X, Y, 4, backend="ray", n_trials=2, max_epochs=2)


@pytest.mark.slow
def test_ray_backend_runs_a_tiny_search(tmp_path):
    pytest.importorskip("ray.tune")
    X, Y = relu_teacher(P=60)
    s = search_adam(X, Y, 8, backend="ray", n_trials=2, max_epochs=10, patience=5, report_every=5,
                    max_concurrent_trials=1, ray_run_config=dict(storage_path=str(tmp_path)))
    assert s.backend == "ray" and len(s.trials) == 2
    assert s.best_val_mse == min(t["val_mse"] for t in s.trials)
    assert set(s.best_config) == {"learning_rate", "l2", "batch_size"}


# ---- best infinite-width GP -------------------------------------------------------------------------
def gp_prior_data(P=300, N0=3, D=3, lambda0=1.0, lambda1=1.0, noise=0.01, seed=0):
    """Labels drawn from the erf NNGP prior at (lambda0, lambda1) plus noise of variance ``noise``: the
    posterior mean at lambda0 and T lambda1 = noise * lambda1 is the Bayes-optimal predictor, and the predictive
    density is the true one at T = noise."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((P, N0))
    K = kernels.nngp(X, lambda0=lambda0, activation="erf") / lambda1
    F = np.linalg.cholesky(K + 1e-9 * np.eye(P)) @ rng.standard_normal((P, D))
    return X, F + np.sqrt(noise) * rng.standard_normal((P, D))


def test_best_gp_finds_the_point_that_generated_the_data():
    X, Y = gp_prior_data()
    grids = dict(T_grid=[1e-4, 1e-2, 1.0], lambda0_grid=[0.05, 1.0, 20.0], lambda1_grid=[0.01, 1.0, 100.0])
    r = best_gp(X, Y, activation="erf", **grids)
    assert (r.T, r.lambda0, r.lambda1) == (1e-2, 1.0, 1.0)
    # the MSE alone identifies lambda0 and T * lambda1: its minima are the three points with T lambda1 = 0.01
    mse = r.val_mse.stack(point=("T", "lambda0", "lambda1"))
    ties = mse.where(mse <= mse.min() * (1 + 1e-9), drop=True)
    assert ties.size == 3 and np.allclose(ties["T"] * ties["lambda1"], 1e-2) and np.all(ties.lambda0 == 1.0)


def test_gp_grid_equals_a_dense_gp_and_the_theory_at_the_best_point():
    X, Y = gp_prior_data(P=60, N0=4, D=2, noise=0.05, seed=1)
    X_test, Y_test = gp_prior_data(P=15, N0=4, D=2, seed=2)
    grids = dict(T_grid=[0.01, 0.1], lambda0_grid=[0.5, 2.0], lambda1_grid=[0.3, 1.0, 3.0])
    r = best_gp(X, Y, activation="erf", X_test=X_test, Y_test=Y_test, seed=4, **grids)
    tr, val = r.train_index, r.val_index
    assert len(val) == 12 and np.intersect1d(tr, val).size == 0 and len(tr) + len(val) == 60
    for T in grids["T_grid"]:  # the dense GP: mean = K(X0, X) (K / lambda1 + T 1)^-1 Y / lambda1, outputs apart
        for lambda0 in grids["lambda0_grid"]:
            K = kernels.nngp(X[tr], lambda0=lambda0, activation="erf")
            K0 = kernels.nngp(X[val], X[tr], lambda0=lambda0, activation="erf")
            for lambda1 in grids["lambda1_grid"]:
                mean = K0 @ np.linalg.solve(K / lambda1 + T * np.eye(len(tr)), Y[tr]) / lambda1
                got = float(r.val_mse.sel(T=T, lambda0=lambda0, lambda1=lambda1))
                np.testing.assert_allclose(got, np.mean(np.sum((Y[val] - mean) ** 2, axis=1)), rtol=1e-10)
    best = dict(T=r.T, lambda0=r.lambda0, lambda1=r.lambda1)
    assert r.best_val_mse == float(r.val_mse.min())
    on_fitted = theory.solve(X[tr], Y[tr], N1=1.0, activation="erf", method="infinite_width", **best)
    mean = on_fitted.predict(X[val]).mean
    np.testing.assert_allclose(np.mean(np.sum((Y[val] - mean) ** 2, axis=1)), r.best_val_mse, rtol=1e-10)
    full = theory.solve(X, Y, N1=1.0, activation="erf", method="infinite_width", **best)
    np.testing.assert_allclose(r.fit.predict(X_test).mean, full.predict(X_test).mean, rtol=1e-10, atol=1e-12)
    assert r.test_eps_g == pytest.approx(full.generalization_error(X_test, Y_test), rel=1e-10)
    assert r.test_eps_g > r.test_mse  # eps_g adds the posterior variance to the MSE of the mean


def test_gp_mean_depends_on_T_and_lambda1_only_through_their_product():
    X, Y = gp_prior_data(P=50, N0=4, D=2, seed=3)
    r = best_gp(X, Y, activation="relu", T_grid=[0.1, 1.0], lambda0_grid=[1.0, 10.0], lambda1_grid=[0.1, 1.0])
    mse, nll = r.val_mse, r.val_nll
    # T lambda1 = 0.1 at (0.1, 1) and (1, 0.1): same MSE, different predictive density
    a, b = dict(T=0.1, lambda0=1.0, lambda1=1.0), dict(T=1.0, lambda0=1.0, lambda1=0.1)
    assert float(mse.sel(**a)) == pytest.approx(float(mse.sel(**b)), rel=1e-12)
    assert abs(float(nll.sel(**a)) - float(nll.sel(**b))) > 1e-3
    # ReLU: K is proportional to 1/lambda0, so only lambda0 T lambda1 matters (0.1 * 10 = 1 * 1)
    c = dict(T=0.1, lambda0=10.0, lambda1=1.0)
    assert float(mse.sel(**c)) == pytest.approx(float(mse.sel(T=1.0, lambda0=1.0, lambda1=1.0)), rel=1e-10)
    assert float(mse.sel(**c)) != pytest.approx(float(mse.sel(**a)), rel=1e-3)


def test_gp_grid_diagonalizes_the_kernel_once_per_lambda0(monkeypatch):
    calls = []
    original = theory.Spectrum.from_kernel.__func__
    monkeypatch.setattr(theory.Spectrum, "from_kernel",
                        classmethod(lambda cls, K, Y: calls.append(K.shape) or original(cls, K, Y)))
    X, Y = gp_prior_data(P=40, N0=3, D=2)
    best_gp(X, Y, activation="erf", T_grid=np.logspace(-3, 0, 4), lambda0_grid=[0.5, 1.0, 2.0],
            lambda1_grid=np.logspace(-1, 1, 5))
    assert calls == [(32, 32)] * 3 + [(40, 40)]  # one per lambda0 on the fitted part, one for the refit on all


# ---- bad input --------------------------------------------------------------------------------------
X_OK, Y_OK = relu_teacher(P=20)


@pytest.mark.parametrize("call, match", [
    (lambda: train_adam(X_OK[:, :, None], Y_OK, 4), "X must be a 2-d array"),
    (lambda: train_adam(X_OK, Y_OK[:10], 4), "X has 20 rows.*Y has 10"),
    (lambda: train_adam(np.where(X_OK > 2, np.nan, X_OK), Y_OK, 4), "X contains .* NaN"),
    (lambda: train_adam(X_OK, Y_OK, 0), "N1 must be a positive integer"),
    (lambda: train_adam(X_OK, Y_OK, 4, learning_rate=-1.0), "learning_rate must be a positive"),
    (lambda: train_adam(X_OK, Y_OK, 4, l2=-0.1), "l2 must be a non-negative"),
    (lambda: train_adam(X_OK, Y_OK, 4, activation="softsign"), "unknown activation"),
    (lambda: train_adam(X_OK, Y_OK, 4, val_fraction=1.0), "val_fraction must be in"),
    (lambda: train_adam(X_OK, Y_OK, 4, X_test=X_OK), "both X_test and Y_test"),
    (lambda: train_adam(X_OK, Y_OK, 4, X_test=X_OK[:, :3], Y_test=Y_OK), "test set has N0=3"),
    (lambda: search_adam(X_OK, Y_OK, 4, backend="dask"), "unknown backend 'dask'"),
    (lambda: rp.baselines.adam_baseline(X_OK, Y_OK, 4, config=dict(l2=0.0)), "batch_size, learning_rate missing"),
    (lambda: rp.baselines.SearchSpace(learning_rate=(1e-2, 1e-3)), "0 < low < high"),
    (lambda: rp.baselines.SearchSpace(batch_size=(32, 0)), r"batch_size\[1\] must be a positive integer"),
    (lambda: best_gp(X_OK, Y_OK, T_grid=[], lambda0_grid=[1.0], lambda1_grid=[1.0]), "T_grid must be a non-empty"),
    (lambda: best_gp(X_OK, Y_OK, T_grid=[0.1, -1], lambda0_grid=[1.0], lambda1_grid=[1.0]), "T_grid entry must be"),
    (lambda: best_gp(X_OK, Y_OK, T_grid=[0.1], lambda0_grid=[1.0], lambda1_grid=[1.0], activation="cos"),
     "unknown activation"),
])
def test_bad_input_raises_a_clear_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()
