"""The convolutional network's theory (renormpp.theory.conv) against independent computations: the fully connected
theory at one patch, a dense PD x PD computation of the action written here (patches cut by loops over the image,
kernels by arcsin, the renormalized kernel by np.kron, S by slogdet, the minimum by scipy on a Cholesky factor), finite
differences of the action, the infinite-width CNN's Gaussian process, and bad input refused with the fix."""
import warnings

import numpy as np
import pytest
import scipy.optimize

import renormpp as rp
from renormpp.patches import Patches
from renormpp.theory import conv as cv


# ---- data and the dense reference ------------------------------------------------------------------------------
def images(P, s, D, seed=0):
    """Random images with labels of a patch-local teacher (the sign of tanh-features of two patches), so that the
    finite network's order parameter moves away from 1."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((P, s * s))
    w = rng.standard_normal((D, s * s)) * (rng.random(s * s) < 0.3)
    Y = np.sign(np.tanh(X @ w.T / np.sqrt(s)) + 0.1)
    return X, Y


def cut(X, s, m):
    """(P, n_p, m*m): the patches, by a loop over the grid (row-major patches, row-major pixels)."""
    g = s // m
    out = np.empty((X.shape[0], g * g, m * m))
    for mu, x in enumerate(X):
        img = x.reshape(s, s)
        for r in range(g):
            for c in range(g):
                out[mu, r * g + c] = img[r * m:(r + 1) * m, c * m:(c + 1) * m].ravel()
    return out


def erf_kernel(c1, c2, c12):
    return 2.0 / np.pi * np.arcsin(2.0 * c12 / np.sqrt((1.0 + 2.0 * c1) * (1.0 + 2.0 * c2)))


def blocks(X1, X2, s, m, lambda0=1.0):
    """All patch kernels K[i, j] (n_p, n_p, P1, P2) of the erf network, dense."""
    p1, p2 = cut(X1, s, m), cut(X2, s, m)
    n = p1.shape[1]
    K = np.empty((n, n, len(X1), len(X2)))
    for i in range(n):
        for j in range(n):
            C = p1[:, i] @ p2[:, j].T / (m * m * lambda0)
            c1 = np.sum(p1[:, i] ** 2, 1) / (m * m * lambda0)
            c2 = np.sum(p2[:, j] ** 2, 1) / (m * m * lambda0)
            K[i, j] = erf_kernel(c1[:, None], c2[None, :], C)
    return K


def renormalized(Q, K, lambda1=1.0):
    """sum_ij kron(Q_(.i),(.j), K_ij) / (lambda1 n_p), index (a, mu) -> a P + mu."""
    n = K.shape[0]
    D = Q.shape[0] // n
    Q4 = Q.reshape(D, n, D, n)
    return sum(np.kron(Q4[:, i, :, j], K[i, j]) for i in range(n) for j in range(n)) / (lambda1 * n)


class Dense:
    """The action (C4), its gradient (C5), its minimum and the predictions (C8), with dense algebra."""

    def __init__(self, X, Y, s, m, N1, T, lambda1=1.0):
        self.K, self.s, self.m, self.X = blocks(X, X, s, m), s, m, X
        self.y, self.N1, self.T, self.lambda1 = Y.T.ravel(), N1, T, lambda1
        self.D, self.n = Y.shape[1], self.K.shape[0] * Y.shape[1]

    def A(self, Q):
        return renormalized(Q, self.K, self.lambda1) + self.T * np.eye(self.y.size)

    def action(self, Q):
        A = self.A(Q)
        data = self.y @ np.linalg.solve(A, self.y) + np.linalg.slogdet(A)[1] - self.y.size * np.log(self.T)
        return np.trace(Q) - np.linalg.slogdet(Q)[1] + data / self.N1

    def gradient(self, Q):
        Ainv = np.linalg.inv(self.A(Q))
        r = Ainv @ self.y
        B = Ainv - np.outer(r, r)
        n_p, P = self.K.shape[0], self.X.shape[0]
        G = np.eye(self.n) - np.linalg.inv(Q)
        for a in range(self.D):
            for i in range(n_p):
                for b in range(self.D):
                    for j in range(n_p):
                        Bab = B[a * P:(a + 1) * P, b * P:(b + 1) * P]
                        G[a * n_p + i, b * n_p + j] += np.sum(self.K[i, j] * Bab) / (self.N1 * self.lambda1 * n_p)
        return G

    def minimum(self):
        tri = np.tril_indices(self.n)

        def fun(theta):
            L = np.zeros((self.n, self.n))
            L[tri] = theta
            Q = L @ L.T
            return self.action(Q), (2.0 * self.gradient(Q) @ L)[tri]

        res = scipy.optimize.minimize(fun, np.eye(self.n)[tri], jac=True, method="BFGS", options=dict(gtol=1e-11))
        L = np.zeros((self.n, self.n))
        L[tri] = res.x
        return L @ L.T

    def predict(self, Q, X0):
        k0 = renormalized(Q, blocks(X0, self.X, self.s, self.m), self.lambda1)  # (D P0, D P)
        K00 = blocks(X0, X0, self.s, self.m)
        k00 = renormalized(Q, K00, self.lambda1)
        A = self.A(Q)
        mean = (k0 @ np.linalg.solve(A, self.y)).reshape(self.D, -1).T
        cov = k00 - k0 @ np.linalg.solve(A, k0.T)
        P0 = len(X0)
        cov = cov.reshape(self.D, P0, self.D, P0)[:, np.arange(P0), :, np.arange(P0)]  # (P0, D, D)
        return mean, cov


def eps_g(mean, cov, Y0):
    return np.mean(np.sum((Y0 - mean) ** 2, 1) + np.trace(cov, axis1=1, axis2=2))


# ---- (a) one patch is the fully connected theory -------------------------------------------------------------------
@pytest.mark.parametrize("D", [1, 2])
def test_one_patch_is_the_fully_connected_theory(D):
    X, Y = images(40, 6, D)
    X0, Y0 = images(25, 6, D, seed=1)
    kw = dict(N1=8, T=0.02, lambda0=1.3, lambda1=0.7, activation="erf")
    for method in ("exact", "one_loop", "infinite_width"):
        conv = rp.theory.solve(X, Y, method=method, conv=dict(image_shape=(6, 6), patch=6), **kw)
        fc = rp.theory.solve(X, Y, method=method, **kw)
        assert isinstance(conv, rp.theory.ConvFit) and conv.Q.shape == (D, D) and conv.converged
        np.testing.assert_allclose(conv.Q, fc.Q, atol=1e-9)
        np.testing.assert_allclose(conv.action, fc.action, rtol=1e-10)
        np.testing.assert_allclose(conv.readout_overlap, fc.readout_overlap, atol=1e-9)
        np.testing.assert_allclose(conv.local_overlap.reshape(D, D), fc.readout_overlap, atol=1e-9)
        a, b = conv.predict(X0), fc.predict(X0)
        np.testing.assert_allclose(a.mean, b.mean, atol=1e-8)
        np.testing.assert_allclose(a.cov, b.cov, atol=1e-8)
        np.testing.assert_allclose(conv.generalization_error(X0, Y0), fc.generalization_error(X0, Y0), rtol=1e-9)
    assert np.abs(fc.Q - np.eye(D)).max() == 0 and np.abs(rp.theory.solve(X, Y, **kw).Q - np.eye(D)).max() > 0.1


# ---- (b) against the dense computation ------------------------------------------------------------------------------
@pytest.mark.parametrize("P, s, m, D, N1", [(20, 6, 3, 1, 4), (12, 4, 2, 2, 3)])
def test_exact_theory_equals_the_dense_computation(P, s, m, D, N1):
    X, Y = images(P, s, D)
    X0, Y0 = images(7, s, D, seed=1)
    dense = Dense(X, Y, s, m, N1=N1, T=0.05)
    fit = rp.theory.solve(X, Y, N1=N1, T=0.05, conv=dict(image_shape=(s, s), patch=m))
    assert fit.converged and fit.grad_norm <= 1e-8 and fit.Q.shape == (D * (s // m) ** 2,) * 2
    Q = dense.minimum()
    assert np.abs(Q - np.eye(len(Q))).max() > 0.2  # far from infinite width: the test can tell
    np.testing.assert_allclose(fit.Q, Q, atol=2e-6)
    np.testing.assert_allclose(fit.action, dense.action(Q), rtol=1e-10)
    mean, cov = dense.predict(fit.Q, X0)
    pred = fit.predict(X0, batch_size=3)
    np.testing.assert_allclose(pred.mean, mean, atol=1e-9)
    np.testing.assert_allclose(pred.cov, cov, atol=1e-9)
    np.testing.assert_allclose(fit.generalization_error(X0, Y0), eps_g(*dense.predict(Q, X0), Y0), rtol=1e-5)
    # the one-loop Q (C7) is one step from Q = 1 along the gradient
    np.testing.assert_allclose(fit.refit("one_loop").Q, np.eye(len(Q)) - dense.gradient(np.eye(len(Q))), atol=1e-10)


# ---- (c) the gradient and the Hessian ------------------------------------------------------------------------------
def random_spd(n, rng):
    M = rng.standard_normal((n, n)) / np.sqrt(n)
    return np.eye(n) + 0.5 * M @ M.T


def test_gradient_and_hessian_match_finite_differences_and_the_dense_gradient():
    X, Y = images(15, 4, 2)
    fit = rp.theory.solve(X, Y, N1=3, T=0.05, conv=dict(image_shape=(4, 4), patch=2), method="infinite_width")
    dense = Dense(X, Y, 4, 2, N1=3, T=0.05)
    rng = np.random.default_rng(3)
    Q = random_spd(8, rng)
    S, G = fit.action_and_gradient(Q)
    np.testing.assert_allclose(S, dense.action(Q), rtol=1e-12)
    np.testing.assert_allclose(G, dense.gradient(Q), atol=1e-11)
    h = 1e-5
    for _ in range(3):
        E = rng.standard_normal((8, 8))
        E = E + E.T
        fd = (fit.action_and_gradient(Q + h * E)[0] - fit.action_and_gradient(Q - h * E)[0]) / (2 * h)
        np.testing.assert_allclose(np.sum(G * E), fd, rtol=1e-7)
        st = fit._problem().at(Q)
        fd_grad = (fit.action_and_gradient(Q + h * E)[1] - fit.action_and_gradient(Q - h * E)[1]) / (2 * h)
        np.testing.assert_allclose(st.hvp(E), fd_grad, atol=1e-6 * np.abs(fd_grad).max())


def test_the_two_passes_are_adjoint_and_chunks_change_nothing():
    X, Y = images(30, 6, 2)
    conv = Patches((6, 6), 2)
    held = cv.PatchKernels(X, conv, 1.0, "erf")
    chunked = cv.PatchKernels(X, conv, 1.0, "erf", memory=1)
    assert held.cached and not chunked.cached and held.n_pairs == 9 * 10 // 2
    rng = np.random.default_rng(0)
    E = rng.standard_normal((18, 18))
    E4 = (E + E.T).reshape(2, 9, 2, 9)
    B = rng.standard_normal((60, 60))
    B = B + B.T
    np.testing.assert_allclose(np.sum(held.contract(B) * E4), np.sum(B * held.combine(E4)), rtol=1e-12)
    np.testing.assert_allclose(held.combine(E4), renormalized(E4.reshape(18, 18), blocks(X, X, 6, 2)) * 9, atol=1e-12)
    old = cv.patch_kernels.CHUNK_MEMORY  # where PatchKernels reads it
    try:
        cv.patch_kernels.CHUNK_MEMORY = 3 * 8 * 30 * 30  # three blocks a chunk, recomputed at every pass
        chunked = cv.PatchKernels(X, conv, 1.0, "erf", memory=1)
        assert chunked.rows == 3
        np.testing.assert_allclose(chunked.combine(E4), held.combine(E4), atol=1e-13)
        np.testing.assert_allclose(chunked.contract(B), held.contract(B), atol=1e-12)
    finally:
        cv.patch_kernels.CHUNK_MEMORY = old
    a = cv.solve(X, Y, N1=5, conv=conv)
    b = cv.solve(X, Y, N1=5, conv=conv, kernel_memory=1)
    np.testing.assert_allclose(a.Q, b.Q, atol=1e-12)


# ---- (d) infinite width is the CNN's Gaussian process ----------------------------------------------------------------
def test_infinite_width_is_the_gaussian_process_of_the_patch_averaged_kernel():
    X, Y = images(30, 6, 2)
    X0, _ = images(9, 6, 2, seed=1)
    T, lam0, lam1 = 0.03, 0.8, 1.7
    fit = rp.theory.solve(X, Y, N1=10, T=T, lambda0=lam0, lambda1=lam1, method="infinite_width",
                          conv=dict(image_shape=(6, 6), patch=3))
    p, p0 = cut(X, 6, 3), cut(X0, 6, 3)  # K_CNN = (1/n_p) sum_i K_ii, each the NNGP kernel of one patch (N0 = m^2)
    kern = lambda A, B: sum(rp.kernels.nngp(A[:, i], B[:, i], lambda0=lam0) for i in range(4)) / (4 * lam1)
    K, k0 = kern(p, p), kern(p0, p)
    k00 = np.diag(kern(p0, p0))
    A = K + T * np.eye(30)
    pred = fit.predict(X0)
    np.testing.assert_allclose(pred.mean, k0 @ np.linalg.solve(A, Y), atol=1e-10)
    var = k00 - np.einsum("xm,mx->x", k0, np.linalg.solve(A, k0.T))
    np.testing.assert_allclose(pred.cov, var[:, None, None] * np.eye(2), atol=1e-10)
    assert np.array_equal(fit.Q, np.eye(8)) and fit.converged


# ---- (e) many channels: exact -> infinite width ----------------------------------------------------------------------
def test_exact_tends_to_infinite_width_as_the_channels_grow():
    X, Y = images(30, 6, 2)
    X0, Y0 = images(20, 6, 2, seed=1)
    fit = rp.theory.solve(X, Y, N1=1e3, T=0.05, conv=dict(image_shape=(6, 6), patch=3))
    inf = fit.refit("infinite_width").generalization_error(X0, Y0)
    gaps = []
    for N1 in (1e3, 1e5, 1e7):
        th = fit.refit(N1=N1)
        assert th.converged
        gaps.append(np.abs(th.Q - np.eye(8)).max())
        gap_eps = abs(th.generalization_error(X0, Y0) - inf) / inf
    assert gaps[0] > 1e-3 and gaps[1] < gaps[0] / 50 and gaps[2] < gaps[1] / 50  # |Q - 1| ~ 1/C
    assert gap_eps < 1e-5


def test_refit_reuses_the_kernels_and_equals_a_new_solve():
    X, Y = images(20, 4, 2)
    conv = dict(image_shape=(4, 4), patch=2)
    fit = rp.theory.solve(X, Y, N1=5, T=0.05, conv=conv, method="infinite_width")
    a = fit.refit("exact", N1=3, T=0.1, lambda1=2.0)
    b = rp.theory.solve(X, Y, N1=3, T=0.1, lambda1=2.0, conv=conv)
    assert a.kernels is fit.kernels and a.method == "exact"
    np.testing.assert_allclose(a.Q, b.Q, atol=1e-10)
    assert "ConvFit(method='exact'" in repr(a) and "n_p=4" in repr(a)
    th, reason = rp.theory.fit_or_reason(fit, "corrected")
    assert th is None and "not derived for the convolutional network" in reason
    assert rp.theory.refit_or_none(fit, "one_loop").method == "one_loop"


def test_other_odd_activations_solve():
    X, Y = images(16, 4, 1)
    for act in ("linear", "tanh"):
        fit = rp.theory.solve(X, Y, N1=4, T=0.05, activation=act, conv=dict(image_shape=(4, 4), patch=2))
        assert fit.converged and fit.grad_norm <= 1e-8
    dist = fit.posterior_predictive(X[:3])
    assert dist.batch_shape == (3,) and dist.event_shape == (1,)


# ---- (f) bad input ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("change, message", [
    (dict(activation="relu"), "activation='relu' is not odd.*Use activation='erf'"),
    (dict(method="corrected"), "method='corrected' is not derived for the convolutional network"),
    (dict(method="nope"), "unknown method"),
    (dict(conv=dict(image_shape=(5, 5), patch=5)), "X has 16 columns, but image_shape \\(5, 5\\) needs 25"),
    (dict(conv=dict(image_shape=(4, 4), patch=3)), "patch = 3 does not divide the image side 4"),
    (dict(conv=dict(image_shape=(4, 4))), "conv must be dict\\(image_shape=\\(side, side\\), patch=m\\)"),
    (dict(Y=np.ones((7, 2))), "X has 10 rows but Y has 7"),
    (dict(X=np.full((10, 16), np.nan)), "X contains 160 NaN"),
    (dict(depth=2), "the convolutional theory \\(conv=...\\) has one hidden layer"),
    (dict(lambda0=(1.0, 2.0)), "lambda0 must be one number"),
    (dict(N1=0), "N1 must be a positive"),
])
def test_bad_input_is_refused_with_the_fix(change, message):
    X, Y = images(10, 4, 2)
    kw = dict(X=X, Y=Y, N1=3, conv=dict(image_shape=(4, 4), patch=2)) | change
    with pytest.raises(ValueError, match=message):
        rp.theory.solve(**kw)


def test_bad_test_input_is_refused():
    X, Y = images(10, 4, 2)
    fit = rp.theory.solve(X, Y, N1=3, conv=dict(image_shape=(4, 4), patch=2), method="infinite_width")
    with pytest.raises(ValueError, match="X0 has 9 columns"):
        fit.predict(np.ones((2, 9)))
    with pytest.raises(ValueError, match="Y0 has D=1 outputs but the training labels have D=2"):
        fit.generalization_error(X[:3], np.ones(3))
    with pytest.raises(ValueError, match="symmetric positive definite"):
        fit.action_and_gradient(-np.eye(8))


def test_a_one_loop_q_that_is_not_positive_definite_is_flagged():
    X, Y = images(20, 4, 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = rp.theory.solve(X, 0.01 * Y, N1=0.5, T=0.01, method="one_loop", conv=dict(image_shape=(4, 4), patch=2))
    assert not fit.converged and np.linalg.eigvalsh(fit.Q)[0] < 0
    assert any("not positive definite" in str(w.message) for w in caught)
    with pytest.raises(ValueError, match="not positive definite at this one_loop Q.*Use method='exact'"):
        fit.predict(X[:2])
