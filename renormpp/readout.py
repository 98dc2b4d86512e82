r"""The readout weights given the first layer, in closed form: Rao-Blackwellized observables, an exact Gibbs
step for v, and the marginal likelihood of w (the readout integrated out).

Given the hidden weights the network :math:`f(x) = v\,\phi(x)/\sqrt{N_1}`, :math:`\phi(x) = \sigma(w x/\sqrt{N_0})` (the last hidden layer
:math:`h^{(L)}(x)` at any depth, :func:`renormpp.network.hidden`), is linear in
v, whose prior is :math:`\mathcal N(0, 1/\lambda_1)`. So f given w is a Gaussian process with the *empirical*
kernel of the hidden layer, and each output is a Bayesian linear regression with noise T:

.. math::

    K_w(x, x') = \frac{\phi(x)\cdot\phi(x')}{\lambda_1 N_1},\qquad C = K_w(X, X) + T\,\mathbb 1_P,\qquad
    \beta = C^{-1} Y \quad (P\times D)\ \text{(the dual coefficients)}.

Then, for every output a, b (the same covariance for each output):

* :math:`E[v_a|w] = \Phi^\top\beta_a/(\lambda_1\sqrt{N_1})`,
  :math:`{\rm Cov}(v_a|w) = \Sigma = \big(\mathbb 1 - \Phi^\top C^{-1}\Phi/(\lambda_1 N_1)\big)/\lambda_1`;
* :math:`E[v_a\cdot v_b/N_1\,|\,w] = \beta_a^\top K_w\beta_b/(\lambda_1 N_1)
  + \delta_{ab}\big(1 - {\rm tr}(C^{-1}K_w)/N_1\big)/\lambda_1` (the readout overlap of the paper's Eq. (4));
* :math:`E[f(x_0)|w] = K_w(x_0, X)\beta`, :math:`{\rm Var}(f_a(x_0)|w) = K_w(x_0,x_0) - K_w(x_0,X)C^{-1}K_w(X,x_0)`,
  so :math:`E[\epsilon_g|w] = \frac1{P_0}\sum_{x_0}\big(\|y_0 - E[f(x_0)|w]\|^2 + D\,{\rm Var}(f(x_0)|w)\big)`;
* :math:`\log p(Y|w) = -\frac12{\rm tr}(Y^\top\beta) - \frac D2\log\det C - \frac{PD}2\log 2\pi`.

Everything costs one :math:`P\times P` Cholesky factor (inverted: :func:`cholesky_inverse`) and
:math:`O(P^2 N_1)`, or, with fewer features than inputs, one :math:`N_1\times N_1` factor and :math:`O(PN_1^2)`
(:func:`weight_space_observables`, used by :func:`rao_blackwell` there). Averaging the conditional expectations over draws of w (Rao-Blackwellization) never has a
larger variance than averaging the observables of draws of (w, v); sampling w from its marginal
(``one_hidden_layer(..., integrate_v=True)``) removes the slow coupling between w and v altogether.

Nothing here depends on what the features are: :math:`N_1` stands for their number n, the width of the last hidden
layer for the fully connected network and :math:`C n_p` (channels times patches) for the convolutional one
(:func:`renormpp.network.conv_hidden`). So the overlap is :math:`v v^\top/n` for any architecture, for the CNN the
mean over patches of the local overlaps :math:`v_{a,\cdot,i}\cdot v_{b,\cdot,i}/C`.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from ._checks import data_pair, positive_int
from .network import ActivationLike, check_input_width, hidden, readout_given_features
from .precision import full_precision


#: ``features(params, X, activation) -> (P, n)``: what the linear readout sees, one row per input. Default: the last
#: hidden layer of the fully connected network (:func:`renormpp.network.hidden`, n = N1); an architecture declares its
#: own (:mod:`renormpp.architectures`), and every function here takes it as ``features=``.
Features = Callable


def _check_inputs(features: Features, params: dict, X, name: str) -> None:
    """The fully connected network's inputs against its first layer (another architecture's features check their
    own)."""
    if features is hidden:
        check_input_width(params, X, name)


class Conditional(NamedTuple):
    """The Gaussian of f and v given the hidden weights, on the training set: features ``phi`` (P, N1),
    ``K`` = K_w(X, X), the inverse ``L_inv`` of the Cholesky factor of C = K + T 1 (:func:`cholesky_inverse`), the
    dual coefficients ``dual_coef`` = C^{-1} Y, and the temperature ``T``."""

    phi: jax.Array
    K: jax.Array
    L_inv: jax.Array
    dual_coef: jax.Array
    lambda1: float
    T: float


# Below this size cholesky_inverse calls LAPACK; above it, matrix products. On XLA's CPU backend LAPACK's
# triangular solves run at a fraction of its matrix product's speed (benchmarks/README.md).
_LEAF = 128


def cholesky_inverse(S, leaf: int | None = None):
    r"""``(L_inv, d)``: the inverse :math:`L^{-1}` of the lower Cholesky factor of a symmetric positive-definite S,
    and the diagonal d of L (so :math:`\log\det S = 2\sum\log d` and :math:`S^{-1} = L^{-\top}L^{-1}`).

    Recursive 2 x 2 blocking, :math:`S = \begin{pmatrix}S_{11} & S_{21}^\top\\ S_{21} & S_{22}\end{pmatrix}`:

    .. math::
        L_{21} = S_{21}L_{11}^{-\top},\qquad L_{22}L_{22}^\top = S_{22} - L_{21}L_{21}^\top,\qquad
        (L^{-1})_{21} = -L_{22}^{-1}L_{21}L_{11}^{-1},

    LAPACK's Cholesky factor and triangular solve only on the diagonal blocks of at most ``leaf`` rows (default
    ``_LEAF``), everything else in matrix products: the same blocked algorithm as LAPACK's ``potrf`` (the same
    Schur complements), with the inverse built alongside (Du Croz and Higham's triangular inversion). A matrix
    that is not positive definite in the working precision gives NaN, as ``jnp.linalg.cholesky`` does.
    """
    leaf = _LEAF if leaf is None else int(leaf)
    n = S.shape[-1]
    if n == 1:  # in closed form: no solver call (``leaf=1`` recurses down to these, in matrix products alone)
        d = jnp.sqrt(S[..., 0])
        return 1 / d[:, None], d
    if n <= leaf:
        L = jnp.linalg.cholesky(S)
        return jax.scipy.linalg.solve_triangular(L, jnp.eye(n, dtype=S.dtype), lower=True), jnp.diag(L)
    k = n // 2
    I11, d1 = cholesky_inverse(S[:k, :k], leaf)
    L21 = S[k:, :k] @ I11.T
    I22, d2 = cholesky_inverse(S[k:, k:] - L21 @ L21.T, leaf)
    I21 = -(I22 @ (L21 @ I11))
    top = jnp.concatenate([I11, jnp.zeros((k, n - k), S.dtype)], axis=1)
    return jnp.concatenate([top, jnp.concatenate([I21, I22], axis=1)], axis=0), jnp.concatenate([d1, d2])


def conditional(params: dict, X, Y, *, T: float, lambda1: float, activation: ActivationLike = "erf",
        features: Features = hidden) -> Conditional:
    """The quantities above for one draw of the hidden weights ``params`` (``w`` and, if the model has them, the
    hidden biases ``b``; ``v`` and other sites are ignored).

    Parameters
    ----------
    params : dict
        One draw of the hidden weights (``w``, and the hidden biases ``b`` where the model has them).
    X : array_like, shape (P, N0)
        Training inputs.
    Y : array_like, shape (P, D)
        Training labels.
    T : float
        Temperature, the model's.
    lambda1 : float
        Prior precision of the readout, the model's.
    activation : str or callable, default "erf"
        The network's activation (:func:`renormpp.network.get_activation`).
    features : callable, default renormpp.network.hidden
        ``features(params, X, activation)``, what the readout sees (:func:`renormpp.network.conv_hidden` for the CNN).

    Returns
    -------
    Conditional
    """
    phi = features(params, X, activation)
    K = phi @ phi.T / (lambda1 * phi.shape[-1])
    L_inv, _ = cholesky_inverse(K + T * jnp.eye(K.shape[0], dtype=K.dtype))
    return Conditional(phi, K, L_inv, L_inv.T @ (L_inv @ Y), lambda1, T)


def log_marginal(cond: Conditional, Y):
    r""":math:`\log p(Y|w)`, the readout integrated out."""
    P, D = Y.shape
    return (-0.5 * jnp.sum(Y * cond.dual_coef) + D * jnp.sum(jnp.log(jnp.diag(cond.L_inv)))
            - 0.5 * P * D * jnp.log(2 * jnp.pi))


def _weight_space(phi, T: float, lambda1: float):
    r"""``(A, L)``: :math:`A = \Phi/\sqrt{\lambda_1 N_1}` and the Cholesky factor L of
    :math:`G = A^\top A + T\,\mathbb 1_{N_1}` (the :math:`N_1\times N_1` form of C, for :math:`N_1 < P`)."""
    A = phi / jnp.sqrt(lambda1 * phi.shape[-1])
    return A, jnp.linalg.cholesky(A.T @ A + T * jnp.eye(A.shape[-1], dtype=A.dtype))


def log_marginal_of(params: dict, X, Y, *, T: float, lambda1: float, activation: ActivationLike = "erf",
        features: Features = hidden):
    r""":math:`\log p(Y|w)` of one draw of the hidden weights, in the smaller of the two Gram matrices, with a
    hand-written gradient (the integrated sampler's potential, ``one_hidden_layer(..., integrate_v=True)``).

    With :math:`A = \Phi/\sqrt{\lambda_1 N_1}` (P, N1), :math:`C = T\,\mathbb 1_P + AA^\top`. Where
    :math:`N_1 < P` the determinant lemma and Woodbury's identity give the same value from the
    :math:`N_1\times N_1` matrix :math:`G = T\,\mathbb 1_{N_1} + A^\top A` (Cholesky factor :math:`L_G`):

    .. math::
        \log\det C = (P - N_1)\log T + \log\det G,\qquad
        {\rm tr}\,Y^\top C^{-1} Y = \big(\|Y\|^2 - \|L_G^{-1}A^\top Y\|^2\big)/T,

    at :math:`O(PN_1^2 + N_1^3)` instead of :math:`O(P^2N_1 + P^3)`; otherwise the :math:`P\times P` form. The
    gradient is :func:`_log_evidence`'s closed form, not automatic differentiation through the Cholesky factor
    (several times dearer where :math:`N_1 \approx P`).

    Parameters
    ----------
    params : dict
        One draw of the hidden weights (``w``, and the hidden biases ``b`` where the model has them).
    X : array_like, shape (P, N0)
        Training inputs.
    Y : array_like, shape (P, D)
        Training labels.
    T : float
        Temperature, the model's.
    lambda1 : float
        Prior precision of the readout, the model's.
    activation : str or callable, default "erf"
        The network's activation (:func:`renormpp.network.get_activation`).
    features : callable, default renormpp.network.hidden
        ``features(params, X, activation)``, what the readout sees (:func:`renormpp.network.conv_hidden` for the CNN).

    Returns
    -------
    jax.Array
        :math:`\log p(Y|w)`, a scalar.
    """
    phi = features(params, X, activation)
    return _log_evidence(phi / jnp.sqrt(lambda1 * phi.shape[-1]), Y, jnp.asarray(T, phi.dtype))


def _evidence_parts(A, Y, T):
    r"""The inverse ``S_inv`` of the smaller Gram matrix (``G = A^T A + T`` where N1 < P, else ``C = A A^T + T``),
    log det C, ``B = C^{-1} Y`` (the dual coefficients) and ``quad`` :math:`= {\rm tr}\,Y^\top C^{-1} Y`.

    Where N1 < P, ``quad`` is the ridge regression's minimum, :math:`Y^\top C^{-1}Y = \min_V \|Y - AV\|^2/T +
    \|V\|^2`, at :math:`V = G^{-1}A^\top Y` with residual :math:`R = Y - AV = T B`: an error in V changes it at
    second order only. The difference form :math:`(\|Y\|^2 - Y^\top A G^{-1} A^\top Y)/T` cancels two numbers of
    order :math:`\|Y\|^2/T` (1e5 at P = 1000, T = 0.01) and in float32 left a rounding noise of order one in the
    potential: the Metropolis test then tested noise (MNIST at P = 1000)."""
    P, N1 = A.shape
    small = N1 < P
    S = A.T @ A if small else A @ A.T
    L_inv, d = cholesky_inverse(S + T * jnp.eye(S.shape[-1], dtype=A.dtype))
    S_inv = L_inv.T @ L_inv
    logdet = 2 * jnp.sum(jnp.log(d)) + max(P - N1, 0) * jnp.log(T)
    if small:
        V = S_inv @ (A.T @ Y)
        R = Y - A @ V
        return S_inv, logdet, R / T, jnp.sum(R**2) / T + jnp.sum(V**2)
    B = S_inv @ Y
    return S_inv, logdet, B, jnp.sum(Y * B)


@jax.custom_vjp
def _log_evidence(A, Y, T):
    r""":math:`\log\mathcal N(Y; 0, AA^\top + T)` summed over the D columns of Y, for
    :func:`log_marginal_of`. Its gradient, with :math:`B = C^{-1}Y` and :math:`M = C^{-1}A = AG^{-1}`:

    .. math::
        \partial_A = B B^\top A - D\,M,\qquad \partial_Y = -B,\qquad
        \partial_T = \tfrac12\|B\|^2 - \tfrac D2\,{\rm tr}\,C^{-1},\quad
        {\rm tr}\,C^{-1} = {\rm tr}\,G^{-1} + (P - N_1)/T,

    from the inverse of the smaller Gram matrix (:func:`cholesky_inverse`), all in matrix products
    (:math:`O(PN_1\min(P, N_1))`).
    """
    return _log_evidence_fwd(A, Y, T)[0]


def _log_evidence_fwd(A, Y, T):
    P, N1 = A.shape
    D = Y.shape[-1]
    S_inv, logdet, B, quad = _evidence_parts(A, Y, T)
    value = -0.5 * quad - 0.5 * D * logdet - 0.5 * P * D * jnp.log(2 * jnp.pi)
    return value, (A, Y, B, S_inv, T)


def _varying(x) -> frozenset:
    """The manual mesh axes along which ``x`` varies inside ``jax.shard_map`` (empty outside it)."""
    aval = jax.typeof(x)
    axes = getattr(aval, "manual_axis_type", None)  # jax >= 0.10; before, the aval's vma
    return frozenset(axes.varying if axes is not None else getattr(aval, "vma", ()))


def _summed_to(ct, primal):
    """The cotangent ``ct`` of ``primal`` summed over the manual mesh axes along which it varies and ``primal`` does
    not, as JAX's own transpose does: inside ``jax.shard_map`` (BlackJAX's ensemble samplers run their chains so),
    the labels Y are the same on every shard while the draws of w differ, and a custom rule must return Y's type."""
    extra = tuple(sorted(_varying(ct) - _varying(primal)))
    return jax.lax.psum(ct, extra) if extra else ct


@full_precision()  # traced when the gradient is transposed, outside any context of the caller's
def _log_evidence_bwd(res, g):
    A, Y, B, S_inv, T = res
    P, N1 = A.shape
    D = B.shape[-1]
    M = A @ S_inv if N1 < P else S_inv @ A  # C^{-1} A
    dA = B @ (B.T @ A) - D * M
    dT = 0.5 * jnp.sum(B**2) - 0.5 * D * (jnp.trace(S_inv) + max(P - N1, 0) / T)
    return _summed_to(g * dA, A), _summed_to(-g * B, Y), _summed_to(g * dT, T)


_log_evidence.defvjp(_log_evidence_fwd, _log_evidence_bwd)


def expected_overlap(cond: Conditional):
    r""":math:`E[v v^\top/n\,|\,w]`, (D, D), n the number of features (N1; C n_p for the CNN)."""
    P, N1 = cond.phi.shape
    tr = P - cond.T * jnp.sum(cond.L_inv**2)  # tr C^{-1}K = P - T tr C^{-1}
    D = cond.dual_coef.shape[-1]
    return (cond.dual_coef.T @ cond.K @ cond.dual_coef / N1 + jnp.eye(D, dtype=cond.K.dtype) * (1.0 - tr / N1)) / cond.lambda1


def expected_local_overlap(cond: Conditional, n_patches: int):
    r""":math:`E[\sum_c v_{a,c,i}v_{b,c,j}/C\,|\,w]`, (D, n_p, D, n_p): the CNN's local readout overlaps (Eq. (C10) of
    :mod:`renormpp.theory.conv` predicts their mean, :math:`Q^*_{(ai),(bj)}/\lambda_1`), for features laid out
    channel-major (feature :math:`c\,n_p + i`, :func:`renormpp.network.conv_hidden`).

    Given w each :math:`v_a` is Gaussian with mean :math:`m_a = \Phi^\top C^{-1}y_a/(\lambda_1\sqrt n)` and covariance
    :math:`\big(\mathbb 1 - \Phi^\top C^{-1}\Phi/(\lambda_1 n)\big)/\lambda_1` (n = C n_p, the same for every output),
    so with :math:`Z = L^{-1}\Phi` (:math:`C^{-1} = L^{-\top}L^{-1}`)

    .. math::
        \frac1C\sum_c E[v_{a,c,i}v_{b,c,j}] = \frac1C\sum_c m_{a,ci}m_{b,cj}
            + \frac{\delta_{ab}}{\lambda_1}\Big(\delta_{ij} - \frac{1}{\lambda_1 n C}\sum_{c\mu} Z_{\mu,ci}Z_{\mu,cj}\Big).

    Its patch average :math:`\frac{1}{n_p}\sum_i` is :func:`expected_overlap`.
    """
    P, n = cond.phi.shape
    C = n // n_patches
    D = cond.dual_coef.shape[-1]
    m = (cond.phi.T @ cond.dual_coef / (cond.lambda1 * jnp.sqrt(n))).reshape(C, n_patches, D)
    Z = (cond.L_inv @ cond.phi).reshape(P, C, n_patches)
    cov = (jnp.eye(n_patches, dtype=m.dtype) - jnp.einsum("pci,pcj->ij", Z, Z) / (cond.lambda1 * n * C)) / cond.lambda1
    return jnp.einsum("cia,cjb->aibj", m, m) / C + jnp.einsum("ab,ij->aibj", jnp.eye(D, dtype=m.dtype), cov)


def predict(cond: Conditional, phi_test):
    """Mean (P0, D) and variance (P0,) of f at test points with features ``phi_test``, given w."""
    k = phi_test @ cond.phi.T / (cond.lambda1 * cond.phi.shape[-1])
    kk = jnp.sum(phi_test**2, axis=-1) / (cond.lambda1 * cond.phi.shape[-1])
    half = cond.L_inv @ k.T
    return k @ cond.dual_coef, kk - jnp.sum(half**2, axis=0)


def expected_eps_g(cond: Conditional, phi_test, Y_test):
    r""":math:`E[\epsilon_g|w]`: mean over the test set of :math:`\|y_0 - E f\|^2 + D\,{\rm Var} f`."""
    return _eps_g(*predict(cond, phi_test), Y_test)


def _eps_g(mean, var, Y_test):
    return jnp.mean(jnp.sum((Y_test - mean) ** 2, axis=-1) + Y_test.shape[-1] * var)


def weight_space_observables(phi, phi_test, Y, Y_test, *, T: float, lambda1: float) -> dict:
    r""":math:`E[\epsilon_g|w]` and :math:`E[v v^\top/n\,|\,w]` (as :func:`expected_eps_g`, :func:`expected_overlap`)
    in the :math:`n\times n` Gram matrix, for n < P features: :math:`O(Pn^2 + P_0n^2 + n^3)` instead of
    :math:`O(P^2n + P^2P_0 + P^3)`.

    With :math:`A = \Phi/\sqrt{\lambda_1 n}`, :math:`G = A^\top A + T\,\mathbb 1_n` and
    :math:`V = G^{-1}A^\top Y = A^\top C^{-1}Y` (push-through; :func:`renormpp.network.readout_given_features`),
    :math:`A^\top C^{-1}A = \mathbb 1 - T G^{-1}`, so

    .. math::
        E[f(x_0)|w] = a_0^\top V,\qquad {\rm Var}(f(x_0)|w) = T\,a_0^\top G^{-1}a_0,\qquad
        E[v v^\top/n\,|\,w] = \big(V^\top V + T\,{\rm tr}(G^{-1})\,\mathbb 1_D\big)/(\lambda_1 n),

    with :math:`a_0 = \phi(x_0)/\sqrt{\lambda_1 n}` (:math:`\beta^\top K_w\beta = V^\top V`,
    :math:`{\rm tr}\,C^{-1}K_w = n - T\,{\rm tr}\,G^{-1}`). Both variances are sums of squares: positive in any
    precision, where the data-space form subtracts two numbers of the size of the prior variance. On a GPU this
    keeps the per-draw record off batched :math:`P\times P` factorizations (at P = 1000 they take most of a draw of
    32 chains on an H100).
    """
    P, n = phi.shape
    A, L_inv, V = readout_given_features(jnp.asarray(phi), Y, T=T, lambda1=lambda1,
                                         inverse_factor=lambda G: cholesky_inverse(G)[0])
    A0 = phi_test / jnp.sqrt(lambda1 * n)
    half = L_inv @ A0.T
    D = Y.shape[-1]
    overlap = (V.T @ V + T * jnp.sum(L_inv**2) * jnp.eye(D, dtype=A.dtype)) / (lambda1 * n)
    return {"eps_g": _eps_g(A0 @ V, T * jnp.sum(half**2, axis=0), Y_test), "overlap": overlap}


def sample_readout(rng_key, cond: Conditional, Y, *, T: float):
    r"""An exact draw of v (D, N1) from p(v | w, data) (Matheron's rule: a prior draw, corrected).

    :math:`v = v_0 + \big(\Phi^\top C^{-1}(Y - \Phi v_0^\top/\sqrt{N_1} - \epsilon)\big)^\top/(\lambda_1\sqrt{N_1})`
    with :math:`v_0 \sim \mathcal N(0, 1/\lambda_1)`, :math:`\epsilon \sim \mathcal N(0, T)`.

    Parameters
    ----------
    rng_key : jax.Array
        The key of the draw.
    cond : Conditional
        The quantities of one draw of the hidden weights (:func:`conditional`).
    Y : array_like, shape (P, D)
        Training labels.
    T : float
        Temperature.

    Returns
    -------
    jax.Array, shape (D, N1)
    """
    P, N1 = cond.phi.shape
    D = Y.shape[-1]
    k0, k1 = jax.random.split(rng_key)
    v0 = jax.random.normal(k0, (D, N1), cond.phi.dtype) / jnp.sqrt(cond.lambda1)
    eps = jax.random.normal(k1, (P, D), cond.phi.dtype) * jnp.sqrt(T)
    r = Y - cond.phi @ v0.T / jnp.sqrt(N1) - eps
    return v0 + (cond.phi.T @ (cond.L_inv.T @ (cond.L_inv @ r))).T / (cond.lambda1 * jnp.sqrt(N1))


def draw_readout(rng_key, params: dict, X, Y, *, T: float, lambda1: float, activation: ActivationLike = "erf",
        features: Features = hidden):
    r"""An exact draw of v (D, N1) from p(v | w, data), in the smaller of the two Gram matrices.

    Where :math:`N_1 < P`, from the factor L of :math:`G = A^\top A + T` (:func:`log_marginal_of`): the
    conditional precision of each :math:`v_a` is :math:`\lambda_1 G/T`, so with :math:`z \sim \mathcal N(0, 1)`

    .. math::
        v_a = G^{-1}A^\top y_a/\sqrt{\lambda_1} + \sqrt{T/\lambda_1}\,L^{-\top} z_a
            = L^{-\top}\big(L^{-1}A^\top y_a/\sqrt{\lambda_1} + \sqrt{T/\lambda_1}\,z_a\big),

    at :math:`O(PN_1^2 + N_1^3)`; otherwise :func:`sample_readout` (Matheron's rule, :math:`O(P^2N_1 + P^3)`).

    Parameters
    ----------
    rng_key : jax.Array
        The key of the draw.
    params : dict
        One draw of the hidden weights (``w``, and the hidden biases ``b`` where the model has them).
    X : array_like, shape (P, N0)
        Training inputs.
    Y : array_like, shape (P, D)
        Training labels.
    T : float
        Temperature, the model's.
    lambda1 : float
        Prior precision of the readout, the model's.
    activation : str or callable, default "erf"
        The network's activation (:func:`renormpp.network.get_activation`).
    features : callable, default renormpp.network.hidden
        ``features(params, X, activation)``, what the readout sees (:func:`renormpp.network.conv_hidden` for the CNN).

    Returns
    -------
    jax.Array, shape (D, N1)
    """
    phi = features(params, X, activation)
    P, N1 = phi.shape
    if N1 >= P:
        return sample_readout(rng_key, conditional(params, X, Y, T=T, lambda1=lambda1, activation=activation,
                                                  features=features), Y,
                              T=T)
    A, L = _weight_space(phi, T, lambda1)
    z = jax.random.normal(rng_key, (N1, Y.shape[-1]), phi.dtype)
    half = jax.scipy.linalg.solve_triangular(L, A.T @ Y, lower=True) / jnp.sqrt(lambda1) + jnp.sqrt(T / lambda1) * z
    return jax.scipy.linalg.solve_triangular(L, half, lower=True, trans="T").T


def _as_dtype(arrays, like):
    return tuple(a.astype(like.dtype) for a in arrays)


def rao_blackwell(X, Y, X_test, Y_test, *, T: float, lambda1: float, activation: ActivationLike = "erf",
        features: Features = hidden, patches: int = 1):
    """Observables ``fn(params) -> {"eps_g", "overlap"}`` that average v out exactly given the hidden weights.

    A drop-in for :func:`renormpp.observables.default` (same names and shapes, the same expectations, less
    variance), for any sampler: ``Langevin(..., observables=fn)`` or ``observables.evaluate(fn, samples)``.

    Parameters
    ----------
    X : array_like, shape (P, N0)
        Training inputs.
    Y : array_like, shape (P, D)
        Training labels.
    X_test : array_like, shape (P0, N0)
        Test inputs.
    Y_test : array_like, shape (P0, D)
        Test labels.
    T : float
        Temperature, the model's.
    lambda1 : float
        Prior precision of the readout, the model's.
    activation : str or callable, default "erf"
        The network's activation.
    features : callable, default renormpp.network.hidden
        ``features(params, X, activation)``, what the readout sees: :func:`renormpp.network.hidden` (fully
        connected) or :func:`renormpp.network.conv_hidden` (the CNN).
    patches : int, default 1
        With ``patches`` > 1 (the CNN's n_p, features channel-major), also ``"local_overlap"``, (D, n_p, D, n_p)
        (:func:`expected_local_overlap`).

    Returns
    -------
    callable
        ``fn(params) -> {"eps_g", "overlap"}``, the expectations given the draw's hidden weights. It raises a
        ValueError for a draw with an output bias ``c`` (use :func:`renormpp.observables.default` there).
    """
    patches = positive_int("patches", patches, "number of patches the readout's features group into")
    X, Y = (jnp.asarray(a) for a in data_pair(X, Y))
    X_test, Y_test = (jnp.asarray(a) for a in data_pair(X_test, Y_test, "X_test", "Y_test", "P0"))

    def fn(params):
        _check_inputs(features, params, X_test, "X_test")
        _check_inputs(features, params, X, "X")
        if "c" in params:
            raise ValueError("rao_blackwell covers networks without an output bias c (the paper's); use "
                             "observables.default for a model with bias=True")
        x, y, x0, y0 = _as_dtype((X, Y, X_test, Y_test), jax.tree_util.tree_leaves(params)[0])
        phi = features(params, x, activation)
        if patches == 1 and phi.shape[-1] < phi.shape[0]:
            return weight_space_observables(phi, features(params, x0, activation), y, y0, T=T, lambda1=lambda1)
        cond = conditional(params, x, y, T=T, lambda1=lambda1, activation=activation, features=features)
        out = {"eps_g": expected_eps_g(cond, features(params, x0, activation), y0), "overlap": expected_overlap(cond)}
        if patches > 1:
            out["local_overlap"] = expected_local_overlap(cond, patches)
        return out

    return fn


def gibbs_fn(X, Y, *, T: float, lambda1: float, activation: ActivationLike = "erf",
        features: Features = hidden):
    """The exact Gibbs update of v: ``update(rng_key, gibbs_sites, hmc_sites) -> {"v": v ~ p(v | hidden weights)}``
    (NumPyro's signature; ``hmc_sites`` are the other sites, whatever moves them).

    For :class:`numpyro.infer.HMCGibbs` (HMC/NUTS moves on w, then an exact draw of v),
    ``HMCGibbs(NUTS(one_hidden_layer), gibbs_fn=gibbs_fn(X, Y, T=T, lambda1=lambda1), gibbs_sites=["v"])``, and for
    the ``gibbs_fn`` of :class:`renormpp.infer.Langevin` and :class:`renormpp.infer.KineticLangevin`.

    Parameters
    ----------
    X : array_like, shape (P, N0)
        Training inputs.
    Y : array_like, shape (P, D)
        Training labels.
    T : float
        Temperature, the model's.
    lambda1 : float
        Prior precision of the readout, the model's.
    activation : str or callable, default "erf"
        The network's activation.
    features : callable, default renormpp.network.hidden
        ``features(params, X, activation)``, what the readout sees: :func:`renormpp.network.hidden` (fully
        connected) or :func:`renormpp.network.conv_hidden` (the CNN).

    Returns
    -------
    callable
        ``update(rng_key, gibbs_sites, hmc_sites) -> {"v": v}``, a draw of v from its Gaussian conditional given the
        hidden weights. It raises a ValueError for a model with an output bias ``c``.
    """
    X, Y = (jnp.asarray(a) for a in data_pair(X, Y))

    def update(rng_key, gibbs_sites, hmc_sites):
        _check_inputs(features, hmc_sites, X, "X")
        if "c" in hmc_sites:
            raise ValueError("gibbs_fn covers networks without an output bias c (the paper's): with c, v | w is not "
                             "this conditional; sample v with w for a model with bias=True")
        x, y = _as_dtype((X, Y), gibbs_sites["v"])
        v = draw_readout(rng_key, hmc_sites, x, y, T=T, lambda1=lambda1, activation=activation, features=features)
        return {"v": v.reshape(gibbs_sites["v"].shape)}  # (D, n), or the model's own shape of v (the CNN's (D, C, n_p))

    return update
