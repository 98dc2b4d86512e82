"""NNGP kernels against Monte Carlo over finite random features, closed forms and quadrature."""
import numpy as np
import pytest
from scipy.special import erf

from renormpp import kernels, network

SIGMA = {"erf": erf, "relu": lambda h: np.maximum(h, 0.0), "linear": lambda h: h, "tanh": np.tanh}


def _inputs(rng, n=6, N0=5):
    X = rng.standard_normal((n, N0))
    X[1] = -0.7 * X[0]  # anti-aligned pair
    X[2] = 1.3 * X[0]  # aligned pair
    return X


@pytest.mark.parametrize("activation", ["erf", "relu", "linear", "tanh"])
def test_kernel_matches_random_features(activation):
    """K(x, x') = E_w[sigma(w.x/sqrt N0) sigma(w.x'/sqrt N0)]: CLT tolerance of 5 standard errors."""
    rng = np.random.default_rng(1)
    lambda0 = 0.6
    X = _inputs(rng)
    M = 400_000
    w = rng.standard_normal((M, X.shape[1])) / np.sqrt(lambda0)
    F = SIGMA[activation](w @ X.T / np.sqrt(X.shape[1]))  # (M, n)
    prod = F[:, :, None] * F[:, None, :]
    emp, se = prod.mean(0), prod.std(0) / np.sqrt(M)
    K = kernels.nngp(X, lambda0=lambda0, activation=activation)
    exact = se == 0  # e.g. relu(h) relu(-h) = 0 for every feature
    assert np.all(np.abs(emp - K)[exact] < 1e-12)
    z = np.abs(emp - K)[~exact] / se[~exact]
    assert z.max() < 5.0, f"max z-score {z.max():.2f}"


@pytest.mark.parametrize("activation", ["erf", "relu", "linear"])
def test_quadrature_matches_closed_form(activation):
    rng = np.random.default_rng(2)
    X1, X2 = _inputs(rng), rng.standard_normal((4, 5)) * 2.0
    closed = kernels.nngp(X1, X2, lambda0=0.8, activation=activation)
    quad = kernels.nngp(X1, X2, lambda0=0.8, activation=SIGMA[activation], order=160)
    # exact for polynomials; erf saturates on a scale 1/sqrt(C) that the nodes must resolve;
    # relu has a kink, so Gauss-Hermite converges only algebraically there
    tol = {"linear": 1e-12, "erf": 1e-6, "relu": 2e-3}[activation]
    np.testing.assert_allclose(quad, closed, rtol=tol, atol=tol * np.abs(closed).max())
    if activation == "linear":
        return  # exact at any order
    # and the error falls as the order grows
    coarse = kernels.nngp(X1, X2, lambda0=0.8, activation=SIGMA[activation], order=40)
    assert np.abs(quad - closed).max() < np.abs(coarse - closed).max()


def test_closed_forms_on_the_diagonal_and_antidiagonal():
    """x' = x and x' = -x, where arcsin/arccos lose digits; known values there."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 7))
    X = np.vstack([x, -x])
    c = float(x[0] @ x[0]) / 7
    Kerf = kernels.nngp(X, activation="erf")
    np.testing.assert_allclose(Kerf[0, 0], 2 / np.pi * np.arcsin(2 * c / (1 + 2 * c)), rtol=1e-14)
    np.testing.assert_allclose(Kerf[0, 1], -Kerf[0, 0], rtol=1e-14)
    Krelu = kernels.nngp(X, activation="relu")
    np.testing.assert_allclose(Krelu[0, 0], c / 2, rtol=1e-14)  # E[relu(h)^2] = C/2
    assert abs(Krelu[0, 1]) < 1e-15  # relu(h) relu(-h) = 0
    # near-aligned pairs: relu kernel is smooth in the angle (no sqrt-of-roundoff jumps)
    eps = np.logspace(-12, -4, 9)
    Xn = np.vstack([x] + [x + e * rng.standard_normal((1, 7)) for e in eps])
    K = kernels.nngp(Xn, activation="relu")
    assert np.all(np.abs(K[0, 1:] - K[0, 0]) < 10 * eps * np.abs(K[0, 0]) + 1e-15)


def test_shapes_symmetry_and_diag():
    rng = np.random.default_rng(4)
    X1, X2 = rng.standard_normal((5, 3)), rng.standard_normal((2, 3))
    for act in network.ACTIVATIONS:
        K = kernels.nngp(X1, activation=act)
        assert K.shape == (5, 5) and K.dtype == np.float64
        np.testing.assert_array_equal(K, K.T)
        np.testing.assert_allclose(kernels.nngp_diag(X1, activation=act), np.diag(K), rtol=1e-12)
        assert kernels.nngp(X1, X2, activation=act).shape == (5, 2)
        assert np.linalg.eigvalsh(K)[0] > -1e-12


def test_jax_activation_is_evaluated_in_float64():
    import jax.numpy as jnp

    rng = np.random.default_rng(5)
    X = rng.standard_normal((3, 4))
    np.testing.assert_allclose(kernels.nngp(X, activation=jnp.tanh), kernels.nngp(X, activation="tanh"), rtol=1e-13)


def test_oddness():
    def odd(a):
        return network.get_activation(a).odd

    assert odd("erf") and odd("tanh") and odd(np.sin)
    assert not odd("relu") and not odd(np.cos) and not odd(lambda h: h + 0.1)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda X: kernels.nngp(X, activation="softplus"), "unknown activation 'softplus'.*'erf'"),
        (lambda X: kernels.nngp(X[0]), "2-d array"),
        (lambda X: kernels.nngp(np.where(X > 1, np.nan, X)), "NaN or inf"),
        (lambda X: kernels.nngp(X, X[:, :2]), "same number of features"),
        (lambda X: kernels.nngp(X, lambda0=0.0), "lambda0 must be a positive"),
        (lambda X: kernels.nngp(X, lambda0=-1.0), "lambda0 must be a positive"),
    ],
)
def test_bad_input(call, match):
    X = np.random.default_rng(6).standard_normal((4, 3))
    with pytest.raises(ValueError, match=match):
        call(X)
