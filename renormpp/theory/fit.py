"""The result of a kernel-renormalization solve, :class:`TheoryFit`, and :func:`solve_renormalized`: every method of
:data:`METHODS` on data (X, Y)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from .. import kernels
from .._checks import data_pair, positive as _positive, positive_int
from ..network import ActivationLike, get_activation
from . import conv as conv_theory, nonodd
from .action import Spectrum, _terms
from .methods import SpectralProblem, check_applies, get_method, reason_of
from .prediction import FitShape, Prediction, predict_in_batches


# ----------------------------------------------------------------------------------------------
# results
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TheoryFit(FitShape):
    """Result of :func:`solve`: the order parameter Q* and everything predicted from it.

    Attributes
    ----------
    Q : numpy.ndarray, shape (D, D)
        The order parameter.
    converged : bool
        ``exact`` and ``corrected``: the gradient norm reached ``gtol``; ``one_loop``: the perturbative Q is positive
        definite; always True for ``infinite_width`` (the method record's ``convergence``,
        :mod:`renormpp.theory.methods`).
    grad_norm : float
        Frobenius norm of the action's gradient at Q; for ``one_loop`` it measures how far the perturbative Q is
        from the saddle point.
    action : float
        The action S at Q.
    method : str
        The theory method, a name of :data:`~renormpp.theory.METHODS`.
    n_iter : int
        Iterations of the minimization.
    N1, T, lambda0, lambda1, activation
        The network and its priors, as given to :func:`solve` (``lambda0``: one or L numbers).
    X : numpy.ndarray, shape (P, N0)
        The training inputs.
    spectrum : Spectrum
        The eigendecomposition of the training kernel, shared by every refit.
    Q_mean : numpy.ndarray, shape (D, D)
        The order parameter of the mean part of a non-odd activation's kernel, R (:mod:`renormpp.theory.nonodd`),
        equal to Q for odd activations.
    depth : int
        The number of hidden layers L, each of width ``N1``.
    """

    Q: np.ndarray
    converged: bool
    grad_norm: float
    action: float
    method: str
    n_iter: int
    N1: float
    T: float
    lambda0: float
    lambda1: float
    activation: ActivationLike
    X: np.ndarray = field(repr=False)
    spectrum: Spectrum = field(repr=False)
    Q_mean: np.ndarray | None = None
    mean_t: np.ndarray | None = field(default=None, repr=False)  # V^T m, the mean feature in the eigenbasis (non-odd)
    depth: int = 1
    #: why the result does not hold ("" where it converged), in its method record's words
    reason = property(reason_of)

    def __repr__(self) -> str:
        solved = get_method(self.method).note or f"n_iter={self.n_iter}"
        act = getattr(self.activation, "name", self.activation)
        depth = f", depth={self.depth}" if self.depth > 1 else ""
        Q = np.array2string(np.asarray(self.Q), precision=4, suppress_small=True, separator=", ").replace("\n", "")
        return (f"TheoryFit(method={self.method!r}, N1={self.N1:g}, alpha={self.alpha:.3g}, D={self.D}, "
                f"activation={act!r}{depth}, T={self.T:g}, converged={self.converged}, grad_norm={self.grad_norm:.2g}, "
                f"action={self.action:.6g}, {solved}, Q={Q})")

    # --- derived quantities ------------------------------------------------------------------
    @property
    def readout_overlap(self) -> np.ndarray:
        r"""Prediction for :math:`\langle v v^\top\rangle / N_1 = Q^*/\lambda_1` (paper Eq. (4)). For ``corrected`` it is
        the exact theory's (its 1/N1 correction is not derived, :mod:`renormpp.theory.corrected`). At depth L > 1 it
        is :math:`(Q^*)^{1/L}/\lambda_L` (Eq. (D3) of :mod:`renormpp.theory`: the central Wishart ansatz gives every
        layer the same share :math:`Q^{1/L}` of the renormalization)."""
        if self.depth == 1:
            return self.Q / self.lambda1
        q, U = np.linalg.eigh(self.Q)
        return (U * np.maximum(q, 0.0) ** (1.0 / self.depth)) @ U.T / self.lambda1

    @property
    def nonodd(self) -> bool:
        """Whether the fit is of the two-order-parameter theory of a non-odd activation."""
        return self.mean_t is not None

    def action_and_gradient(self, Q) -> tuple[float, np.ndarray]:
        """The action S(Q) and its gradient dS/dQ at any Q, on this fit's data and parameters (odd activations).

        Parameters
        ----------
        Q : array_like, shape (D, D)
            A symmetric positive definite order parameter.

        Returns
        -------
        S : float
            The action at Q.
        gradient : numpy.ndarray, shape (D, D)
            dS/dQ at Q.

        Raises
        ------
        ValueError
            For a non-odd activation (its action has two order parameters: :func:`renormpp.theory.nonodd.action`),
            a Q of another shape, or a Q that is not symmetric positive definite.
        """
        if self.nonodd:
            raise ValueError("action_and_gradient is the odd theory's action of Q alone; a non-odd activation's "
                             "action has two order parameters: renormpp.theory.nonodd.action")
        Q = np.asarray(Q, dtype=np.float64)
        if Q.shape != (self.D, self.D):
            raise ValueError(f"Q must have shape {(self.D, self.D)}; got {Q.shape}")
        S, G = _terms(Q, self.spectrum, self.N1, self.T, self.lambda1, depth=self.depth)
        if G is None:
            raise ValueError("Q must be symmetric positive definite")
        return S, G

    def refit(self, method: str | None = None, *, N1=None, T=None, lambda1=None, **solver_options) -> "TheoryFit":
        """Solve again with another method, width, temperature or readout prior.

        Only ``lambda0`` and the activation change the kernel, so the eigendecomposition of K is
        reused: a sweep over N1, T or lambda1 costs O(P D^2) per point instead of O(P^3).

        Parameters
        ----------
        method : str, optional
            A name of :data:`~renormpp.theory.METHODS`; this fit's method by default.
        N1 : float, optional
            Hidden-layer width; this fit's by default.
        T : float, optional
            Temperature; this fit's by default.
        lambda1 : float, optional
            Prior precision of the readout weights; this fit's by default.
        **solver_options
            ``gtol`` and ``maxiter``, as in :func:`solve`.

        Returns
        -------
        TheoryFit
            The new fit; a ConvergenceWarning where it did not converge.
        """
        N1 = self.N1 if N1 is None else _positive("N1", N1, "hidden-layer width")
        T = self.T if T is None else _positive("T", T, "temperature")
        lambda1 = self.lambda1 if lambda1 is None else _positive("lambda1", lambda1, "prior precision of the readout weights")
        return _solve_spectrum(self.spectrum, self.X, N1, T, self.lambda0, lambda1, self.activation,
                               self.method if method is None else method, depth=self.depth, **solver_options)

    # --- predictions -----------------------------------------------------------------------------
    def predict(self, X0, batch_size: int = 4096) -> Prediction:
        """Predictive mean and covariance of the outputs at the rows of X0.

        Parameters
        ----------
        X0 : array_like, shape (P0, N0)
            Test inputs, with the training inputs' N0 features.
        batch_size : int, default 4096
            Test points computed at a time (memory: P x batch_size).

        Returns
        -------
        Prediction
            ``mean`` (P0, D) and ``cov`` (P0, D, D) of the network outputs, without the observation noise T.
        """
        return predict_in_batches(self._moments, self._test_inputs(X0), batch_size)

    def _moments(self, X0):
        """(mean, cov) at a batch of test points, by this fit's method (its record's ``moments``)."""
        return get_method(self.method).moments(self, X0)

    def test_kernel(self, X0) -> tuple[np.ndarray, np.ndarray]:
        """The kernel quantities at test inputs. They depend on lambda0 and the activation only, and are cached for a
        few test sets (shared by every refit).

        Parameters
        ----------
        X0 : array_like, shape (P0, N0)
            Test inputs.

        Returns
        -------
        kappa : numpy.ndarray, shape (P, P0)
            V^T K(X, X0), the train-test kernel in the eigenbasis of the training kernel (read only).
        k0 : numpy.ndarray, shape (P0,)
            K(x0, x0), the test points' own kernel (read only).
        """
        kw = dict(lambda0=self.lambda0, activation=self.activation, depth=self.depth)
        X0 = np.ascontiguousarray(X0)
        key = (X0.shape, X0.dtype.str, hashlib.blake2b(X0.tobytes(), digest_size=16).digest(),
               repr(np.asarray(self.lambda0).tolist()), self.activation, self.depth)
        cache = self.spectrum.test_kernels
        if key not in cache:
            if len(cache) >= 4:  # a few test sets at most: (P, P0) each
                cache.pop(next(iter(cache)))
            found = (self.spectrum.V.T @ kernels.nngp(self.X, X0, **kw), kernels.nngp_diag(X0, **kw))
            for a in found:
                a.setflags(write=False)  # shared by every refit: read only
            cache[key] = found
        return cache[key]

# ----------------------------------------------------------------------------------------------
# solve
# ----------------------------------------------------------------------------------------------
def solve_renormalized(X, Y, N1, T: float = 0.01, lambda0=1.0, lambda1: float = 1.0,
                       activation: ActivationLike = "erf", method: str = "exact", *, depth: int = 1, gtol: float = 1e-8,
                       maxiter: int = 5000, conv=None) -> TheoryFit:
    r"""Solve a kernel-renormalization theory (a method of :data:`METHODS`) for a network with ``depth`` hidden layers
    on data (X, Y), or with ``conv`` for a one-hidden-layer convolutional network. :func:`renormpp.theory.solve`
    reaches it and every other theory of :data:`renormpp.theory.THEORIES`.

    Parameters
    ----------
    X : array_like, shape (P, N0)
        Training inputs.
    Y : array_like, shape (P, D) or (P,)
        Training labels; (P,) means D = 1.
    N1 : float
        Hidden-layer width (alpha = P / N1).
    T : float, default 0.01
        Temperature.
    lambda0 : float or sequence of float, default 1.0
        Prior precision of the hidden-layer weights: one number, or one per hidden layer.
    lambda1 : float, default 1.0
        Prior precision of the readout weights.
    activation : str or callable, default "erf"
        ``"erf"``, ``"relu"``, ``"linear"``, ``"tanh"`` or an elementwise callable.
    method : str, default "exact"
        Any name of :data:`METHODS` (:mod:`renormpp.theory.methods`). ``"exact"`` minimizes S(Q) over SPD Q:
        Newton steps with the analytic Hessian from the one-loop Q (or Q = 1 where that is not positive definite),
        falling back on L-BFGS on a Cholesky factor where Newton stalls, to ``|dS/dQ| <= gtol``; ``"one_loop"`` is
        the perturbative :math:`Q = 1 + \alpha Q^{(1)}` (supplement, eq:supp:final_perturbative_eq),
        :math:`Q^{(1)} = -\frac{1}{P}\sum_\mu \frac{k_\mu}{\lambda_1}[M^0_\mu - M^0_\mu\tilde y_\mu\tilde y_\mu^\top M^0_\mu]`;
        ``"infinite_width"`` is Q = 1 (the NNGP posterior); ``"corrected"`` is the exact Q* with the leading 1/N1
        correction of the predictions (:mod:`renormpp.theory.corrected`, odd activations). For an activation that
        is not odd (relu), ``"exact"`` and ``"one_loop"`` solve the two-order-parameter theory
        (:mod:`renormpp.theory.nonodd`).
    depth : int, default 1
        Number of hidden layers L, all of width N1: the kernel is the NNGP kernel composed L times and the action's
        prior term is :math:`L\,{\rm tr}\,Q^{1/L} - \log\det Q` (Eq. (D1) of :mod:`renormpp.theory`); the one-loop
        Q is :math:`1 + L\alpha Q^{(1)}`. Depth L > 1 holds for odd activations and the methods ``exact``,
        ``one_loop`` and ``infinite_width``.
    gtol : float, default 1e-8
        Convergence threshold on the Frobenius norm of the action's gradient.
    maxiter : int, default 5000
        Optimizer iterations.
    conv : dict or Patches, optional
        ``dict(image_shape=(s, s), patch=m)`` or a :class:`renormpp.patches.Patches`: the rows of X are s x s
        images and the network is the one-hidden-layer CNN with N1 channels of m x m filters on non-overlapping
        patches; its theory, the local kernel renormalization (:mod:`renormpp.theory.conv`), has the methods
        ``exact``, ``one_loop`` and ``infinite_width``, odd activations, depth 1.

    Returns
    -------
    TheoryFit or ConvFit
        The fit; a :class:`renormpp.theory.conv.ConvFit` with ``conv``. A ConvergenceWarning where it did not
        converge (``converged`` is then False).

    Raises
    ------
    ValueError
        For a method that does not hold for the activation at this depth (the message says which do), ``conv``
        with depth > 1, data of mismatched shapes, NaN or inf entries, or a parameter out of its range.
    """
    depth = positive_int("depth", depth, "number of hidden layers")
    if conv is not None:
        if depth != 1:
            raise ValueError(f"the convolutional theory (conv=...) has one hidden layer; got depth={depth}. Use "
                             "depth=1, or conv=None for a deep fully connected network")
        return conv_theory.solve(X, Y, N1, T, lambda0, lambda1, activation, method, conv=conv, gtol=gtol, maxiter=maxiter)
    check_applies(method, activation, depth)
    X, Y = data_pair(X, Y)
    N1 = _positive("N1", N1, "hidden-layer width")
    T = _positive("T", T, "temperature")
    lams = kernels.hidden_lambdas(lambda0, depth)
    lambda0 = lams[0] if len(set(lams)) == 1 else lams
    lambda1 = _positive("lambda1", lambda1, "prior precision of the readout weights")
    K = kernels.nngp(X, lambda0=lambda0, activation=activation, depth=depth)
    spectrum = Spectrum.from_kernel(K, Y)
    return _solve_spectrum(spectrum, X, N1, T, lambda0, lambda1, activation, method, depth=depth, gtol=gtol,
                           maxiter=maxiter)


def _solve_spectrum(spectrum, X, N1, T, lambda0, lambda1, activation, method, depth=1, gtol=1e-8, maxiter=5000):
    """The fit of ``method`` (its record's ``solve`` and ``convergence``) on a kernel eigendecomposition."""
    record = check_applies(method, activation, depth)
    gtol = _positive("gtol", gtol, "tolerance on |dS/dQ|")
    maxiter = positive_int("maxiter", maxiter, "iterations of the minimization")
    mean_t = None if get_activation(activation).odd else \
        spectrum.V.T @ kernels.nngp_mean(X, lambda0=lambda0, activation=activation)  # V^T m, non-odd (.nonodd)
    Q, R, grad_norm, n_iter = record.solve(SpectralProblem(spectrum, N1, T, lambda1, depth, gtol, maxiter, mean_t))
    if mean_t is None:
        S, G = _terms(Q, spectrum, N1, T, lambda1, depth=depth)
        # only a non-SPD one-loop Q has G None: S is +inf there (-log det Q), and the result is flagged
        grad_norm = float(np.linalg.norm(G)) if G is not None else np.inf
        spd, R = G is not None, Q
    else:
        S = nonodd.action(spectrum, mean_t, T, lambda1, N1, Q, np.linalg.inv(R) - np.eye(len(R)))
        spd = bool(np.linalg.eigvalsh(Q)[0] > 0 and np.linalg.eigvalsh(R)[0] > 0)
    converged = bool(record.convergence.holds(grad_norm, gtol, spd))
    fit = TheoryFit(Q=Q, converged=converged, grad_norm=grad_norm, action=float(S), method=method, n_iter=n_iter,
                    N1=N1, T=T, lambda0=lambda0, lambda1=lambda1, activation=activation, X=X, spectrum=spectrum, Q_mean=R,
                    mean_t=mean_t, depth=depth)
    if not converged:
        record.convergence.warn(fit, gtol)
    return fit
