r"""The theory methods as a table, :data:`METHODS`: one :class:`Method` record per method, which every layer reads.

A record says where the method applies (activation parity, depth: :attr:`Method.restriction`), how it finds the
order parameter (:attr:`Method.solve`), when its result holds (:attr:`Method.convergence`), its predictive moments
(:attr:`Method.moments`), and how a figure and the report name it (label, line style, colour, the note where its
curve ends, a noun for the report's prose). :func:`renormpp.theory.solve`, :func:`renormpp.diagnostics.compare`, the
plots, ``theory.json`` and the report iterate the table, so a new method is one record here.

The four methods (see :mod:`renormpp.theory` for the equations):

* ``exact``: the saddle point :math:`Q^*` of the action, paper Eq. (1) (at depth L, Eq. (D1)), minimized to
  :math:`|\partial S/\partial Q| \le` ``gtol``;
* ``one_loop``: its one-loop expansion around infinite width, :math:`Q = 1 + L\alpha Q^{(1)}` (supplement,
  eq:supp:final_perturbative_eq; Eq. (D2)), which holds where it is positive definite;
* ``infinite_width``: :math:`Q = 1`, the NNGP posterior;
* ``corrected``: the exact :math:`Q^*` with the leading 1/N1 correction of the predictions
  (:mod:`renormpp.theory.corrected`; odd activations, one hidden layer).

For an activation that is not odd (ReLU) ``exact``, ``one_loop`` and ``infinite_width`` are the stationary point, the
one-loop expansion and the infinite-width point of the two-order-parameter action (:mod:`renormpp.theory.nonodd`).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np

from .. import kernels
from ..network import ACTIVATIONS, ODD_ACTIVATIONS, Activation, get_activation
from . import corrected, lowrank, nonodd
from .action import ConvergenceWarning, Spectrum, _minimize, _terms
from .prediction import renormalized_moments


# ---- what a method's solve sees ----------------------------------------------------------------------------------
class SpectralProblem(NamedTuple):
    """The data and parameters of one solve in the kernel eigenbasis: ``mean_t`` = V^T m, the mean feature of a
    non-odd activation in the eigenbasis (:mod:`.nonodd`), None for an odd activation."""

    spectrum: Spectrum
    N1: float
    T: float
    lambda1: float
    depth: int
    gtol: float
    maxiter: int
    mean_t: np.ndarray | None

    @property
    def D(self) -> int:
        return self.spectrum.Yt.shape[1]


def _infinite_width(pb: SpectralProblem):
    """Q = 1 (and R = 1 for a non-odd activation): nothing solved."""
    eye = np.eye(pb.D)
    return (eye, None, None, 0) if pb.mean_t is None else (eye, eye, 0.0, 0)


def _one_loop_Q(pb: SpectralProblem) -> np.ndarray:
    """At Q = 1 the gradient is the data term and the prior's Hessian 1/L: :math:`Q = 1 - L\\,\\partial_Q S|_{Q=1}`
    (Eq. (D2) of :mod:`renormpp.theory`)."""
    eye = np.eye(pb.D)
    _, G1 = _terms(eye, pb.spectrum, pb.N1, pb.T, pb.lambda1, depth=pb.depth)
    return eye - pb.depth * G1


def _one_loop(pb: SpectralProblem):
    """The one-loop order parameter(s): ``(Q, R, grad_norm, n_iter)``, R and grad_norm None for an odd activation
    (computed from Q by the caller)."""
    if pb.mean_t is not None:
        return nonodd.solve(pb.spectrum, pb.mean_t, pb.T, pb.lambda1, pb.N1, one_loop=True, gtol=pb.gtol,
                            maxiter=pb.maxiter)
    return _one_loop_Q(pb), None, None, 0


def _saddle_point(pb: SpectralProblem):
    """The stationary point of the action: Newton from the one-loop Q (or Q = 1 where that is not safely positive
    definite), L-BFGS where Newton stalls (:func:`renormpp.theory.action._minimize`); for a non-odd activation the
    root search of :func:`renormpp.theory.nonodd.solve`."""
    if pb.mean_t is not None:
        return nonodd.solve(pb.spectrum, pb.mean_t, pb.T, pb.lambda1, pb.N1, one_loop=False, gtol=pb.gtol,
                            maxiter=pb.maxiter)
    Q1 = _one_loop_Q(pb)
    Q0 = Q1 if np.linalg.eigvalsh(Q1)[0] > 0.05 else np.eye(pb.D)
    Q, n_iter = _minimize(Q0, pb.spectrum, pb.N1, pb.T, pb.lambda1, pb.gtol, pb.maxiter, depth=pb.depth)
    return Q, None, None, n_iter


# ---- predictive moments ------------------------------------------------------------------------------------------
def _renormalized_moments(fit, X0):
    """(mean, cov) of the Gaussian process with the renormalized kernel Q (x) K / lambda1 (supplement, eq:SM_bias and
    eq:SM_var), or, for a non-odd activation, [Q (x) (K - M) + R (x) M] / lambda1 (:mod:`.nonodd`)."""
    kappa, k00 = fit.test_kernel(X0)
    if fit.nonodd:
        m0 = kernels.nngp_mean(X0, lambda0=fit.lambda0, activation=fit.activation)
        return lowrank.moments(nonodd.system(fit.spectrum, fit.mean_t, fit.Q, fit.Q_mean, fit.T, fit.lambda1),
                               *nonodd.test_terms(fit.Q, fit.Q_mean, fit.lambda1, kappa, k00, m0))
    return renormalized_moments(fit.spectrum, fit.Q, fit.T, fit.lambda1, kappa, k00)


def _corrected_moments(fit, X0):
    """(mean, cov) with the 1/N1-corrected kernels of (C2) in :mod:`.corrected`."""
    kappa, k00 = fit.test_kernel(X0)
    args = (fit.spectrum, fit.Q, fit.T, fit.lambda1, fit.N1)
    return lowrank.moments(corrected.system(*args), *corrected.test_terms(*args, kappa, k00))


# ---- where a method applies --------------------------------------------------------------------------------------
def _one_layer_unless_odd(activation: Activation, depth: int) -> str:
    """Any activation at one hidden layer (a non-odd one by the two-order-parameter theory, derived for one hidden
    layer), odd activations at any depth."""
    return "" if depth == 1 or activation.odd else f"derived for one hidden layer (depth = {depth})"


def _odd_one_layer(activation: Activation, depth: int) -> str:
    """Odd activations at one hidden layer: the 1/N1 correction is derived for Gaussian features without a mean."""
    if depth > 1:
        return f"derived for one hidden layer (depth = {depth})"
    return "" if activation.odd else f"needs an odd activation ({activation.name} is not odd)"


# ---- when a result holds -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Convergence:
    """When a method's result holds, and what is said where it does not.

    ``holds(grad_norm, gtol, spd)``: whether it holds (``spd``: the order parameters are positive definite);
    ``warn(fit, gtol)``: the warning of :func:`renormpp.theory.solve` where it does not; ``reason(fit)``: the reason in
    words, for :func:`fit_or_reason` and the comparison tables.
    """

    holds: Callable[[float, float, bool], bool]
    warn: Callable
    reason: Callable


def _tag(fit) -> str:
    return fit.method.replace("_", "-")


def _warn_not_stationary(fit, gtol):
    warnings.warn(
        f"the minimization of the effective action did not converge: |dS/dQ| = {fit.grad_norm:.3g} > "
        f"gtol = {gtol:.3g} after {fit.n_iter} iterations. Check fit.converged; raise maxiter or gtol.",
        ConvergenceWarning, stacklevel=4,
    )


def _not_stationary(fit) -> str:
    return f"the solve did not converge at alpha = {fit.alpha:.3g} (gradient norm {fit.grad_norm:.2g})"


def _warn_not_positive_definite(fit, gtol):
    if fit.nonodd:
        what = f"the {_tag(fit)} order parameters are not positive definite"
    else:
        what = f"the {_tag(fit)} Q is not positive definite (smallest eigenvalue {np.linalg.eigvalsh(fit.Q)[0]:.3g})"
    warnings.warn(f"{what} at alpha = {fit.alpha:.3g}: perturbation theory has broken down; use "
                  f"method={REFERENCE!r}", RuntimeWarning, stacklevel=4)


def _not_positive_definite(fit) -> str:
    q_min = float(np.min(np.linalg.eigvalsh(np.asarray(fit.Q))))
    return (f"the {_tag(fit)} Q is not positive definite at alpha = {fit.alpha:.3g} (smallest eigenvalue "
            f"{q_min:.3g}): perturbation theory has broken down")


#: A minimization: it holds where the gradient of the action reached ``gtol`` (a ConvergenceWarning otherwise).
STATIONARY = Convergence(lambda grad_norm, gtol, spd: spd and grad_norm <= gtol, _warn_not_stationary, _not_stationary)
#: An expansion that solves nothing: it holds where its order parameters are positive definite.
POSITIVE_DEFINITE = Convergence(lambda grad_norm, gtol, spd: spd, _warn_not_positive_definite, _not_positive_definite)


# ---- the record and the table ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Method:
    """One theory method.

    ``solve(problem) -> (Q, R, grad_norm, n_iter)``: the order parameter of a :class:`SpectralProblem` (R, the mean part's,
    and the gradient norm only for a non-odd activation: None otherwise, then computed from Q); ``convergence``: when
    the result holds (:data:`STATIONARY` or :data:`POSITIVE_DEFINITE`); ``label``, ``ls``, ``color``: its curve in
    the figures (:mod:`renormpp.plots`); ``noun``: its name in the report's prose (``"the one-loop theory"``);
    ``restriction(activation, depth)``: "" where it applies, else why not (:func:`applies`, :func:`why_not`);
    ``moments(fit, X0) -> (mean, cov)``: its predictions at test inputs; ``note``: what a fit's repr says in place of
    ``n_iter`` for a method that solves nothing; ``breakdown``: the note a figure writes where its curve ends (the
    one-loop Q stops being positive definite), "" for none.
    """

    name: str
    solve: Callable[[SpectralProblem], tuple]
    convergence: Convergence
    label: str
    ls: str
    noun: str
    color: str = "C0"
    restriction: Callable[[Activation, int], str] = _one_layer_unless_odd
    moments: Callable = _renormalized_moments
    note: str = ""
    breakdown: str = ""

    @property
    def tag(self) -> str:
        """The name as a figure writes it, ``one-loop``."""
        return self.name.replace("_", "-")


#: The theory methods, in the order of the tables and figures. Adding one is one record here.
METHODS: dict[str, Method] = {m.name: m for m in (
    Method("exact", _saddle_point, STATIONARY, label="theory, exact $Q^*$", ls="-",
           noun="the exact (proportional-limit) theory"),
    Method("one_loop", _one_loop, POSITIVE_DEFINITE, label="theory, one-loop $Q$", ls="--", noun="the one-loop theory",
           note="the one-loop Q solves nothing: converged means it is positive definite, and grad_norm is its distance "
                "from the saddle point",
           breakdown="one-loop $Q$ not positive definite"),
    Method("infinite_width", _infinite_width, POSITIVE_DEFINITE, label="infinite width ($Q=1$)", ls="-.", color="k",
           noun="the infinite-width limit", note="infinite width: nothing solved"),
    Method("corrected", _saddle_point, STATIONARY, label="theory, corrected", ls=":",
           noun="the 1/N1-corrected theory", restriction=_odd_one_layer, moments=_corrected_moments),
)}

#: The method the sampled networks are judged against first: the overlap figures' Q*/lambda1, the report's headline.
REFERENCE = "exact"
#: The infinite-width limit, which the reference is set against (the report's headline, the overlap figure's dashes).
BASELINE = "infinite_width"


def get_method(method: str) -> Method:
    """The :class:`Method` of a name in :data:`METHODS`.

    Parameters
    ----------
    method : str
        A name of :data:`METHODS`.

    Returns
    -------
    Method

    Raises
    ------
    ValueError
        For a name not in :data:`METHODS` (the message lists them).
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(map(repr, METHODS))}")
    return METHODS[method]


def _listed(names, last: str = "or") -> str:
    """'a', 'b' or 'c'."""
    names = [repr(n) for n in names]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {last} {names[-1]}"


def applies(method: str, activation, depth: int = 1) -> bool:
    """Whether theory ``method`` holds for ``activation`` at ``depth`` (its record's ``restriction``): at one hidden
    layer every method for odd activations, and for others (relu) the two-order-parameter theory gives ``exact``,
    ``one_loop`` and ``infinite_width`` while the 1/N1 correction (``corrected``, derived for Gaussian features
    without a mean) does not apply; at depth L > 1 ``exact``, ``one_loop`` and ``infinite_width`` for odd
    activations.

    Parameters
    ----------
    method : str
        A name of :data:`METHODS`.
    activation : str or Activation
        The network's activation.
    depth : int, default 1
        The number of hidden layers.

    Returns
    -------
    bool
    """
    return not get_method(method).restriction(get_activation(activation), depth)


def check_applies(method: str, activation, depth: int = 1) -> Method:
    """The record of ``method``, or a ValueError that says why it does not hold for ``activation`` at ``depth`` and
    which methods do.

    Parameters
    ----------
    method : str
        A name of :data:`METHODS`.
    activation : str or Activation
        The network's activation.
    depth : int, default 1
        The number of hidden layers.

    Returns
    -------
    Method

    Raises
    ------
    ValueError
        Where the method does not hold for the activation at this depth, or is unknown.
    """
    record, act = get_method(method), get_activation(activation)
    reason = record.restriction(act, depth)
    if not reason:
        return record
    if depth > 1:
        odd = [ACTIVATIONS[name] for name in ODD_ACTIVATIONS]
        deep = [m for m, r in METHODS.items() if not any(r.restriction(a, depth) for a in odd)]
        raise ValueError(
            f"method={method!r} with activation={act.name!r} does not hold at depth={depth}: {reason}; depth={depth} "
            f"holds for odd activations and the methods {_listed(deep, 'and')}. Use depth=1, or an odd activation "
            f"({', '.join(a.name for a in odd)}) with one of those methods.")
    here = [m for m, r in METHODS.items() if not r.restriction(act, depth)]
    raise ValueError(f"method={method!r} {reason}. Use method={_listed(here)}, which hold for {act.name!r}.")


# ---- a method at a fit, or why not --------------------------------------------------------------------------------
def fit_or_reason(fit, method: str, **changes):
    """``(fit.refit(method, **changes), "")``, or ``(None, reason)`` where that theory does not apply: a method that
    does not hold for the activation at the fit's depth (its record's ``restriction``), or a result that does not
    hold (its ``convergence``: a one-loop Q that is not positive definite, a minimization that did not converge).
    A fit's ``not_derived`` (a dict method -> reason; the convolutional theory's :class:`~.conv.ConvFit`) names the
    methods its theory does not have.

    Parameters
    ----------
    fit : TheoryFit
        A fit of :func:`renormpp.theory.solve` (or of another architecture's theory).
    method : str
        A name of :data:`METHODS`.
    **changes
        ``N1``, ``T``, ``lambda1`` or solver options for :meth:`TheoryFit.refit`.

    Returns
    -------
    fit : TheoryFit or None
        The fit of ``method``, None where it does not apply.
    reason : str
        Why not, in words; "" where it applies.
    """
    record = get_method(method)
    reason = (record.restriction(get_activation(fit.activation), fit.depth)
              or getattr(fit, "not_derived", {}).get(method))
    if reason:
        return None, reason
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # reported as the reason instead
        th = fit if (fit.method == method and not changes) else fit.refit(method, **changes)
    return (th, "") if th.converged else (None, record.convergence.reason(th))


def reason_of(fit) -> str:
    """Why a fit of a method of :data:`METHODS` does not hold, in its record's words; "" where it converged (the
    ``reason`` of :class:`~renormpp.theory.TheoryFit` and :class:`~renormpp.theory.conv.ConvFit`)."""
    return "" if fit.converged else get_method(fit.method).convergence.reason(fit)


def refit_or_none(fit, method: str, **changes):
    """``fit.refit(method, **changes)``, or None where that theory does not apply (:func:`why_not` says why).

    Parameters
    ----------
    fit : TheoryFit
        A fit of :func:`renormpp.theory.solve` (or of another architecture's theory).
    method : str
        A name of :data:`METHODS`.
    **changes
        ``N1``, ``T``, ``lambda1`` or solver options for :meth:`TheoryFit.refit`.

    Returns
    -------
    TheoryFit or None
    """
    return fit_or_reason(fit, method, **changes)[0]


def why_not(fit, method: str, **changes) -> str:
    """Why theory ``method`` does not apply at ``fit`` (its data, N1, activation and depth), in words.

    Parameters
    ----------
    fit : TheoryFit
        A fit of :func:`renormpp.theory.solve` (or of another architecture's theory).
    method : str
        A name of :data:`METHODS`.
    **changes
        ``N1``, ``T``, ``lambda1`` or solver options for :meth:`TheoryFit.refit`.

    Returns
    -------
    str
        The reason; "" where the method applies.
    """
    return fit_or_reason(fit, method, **changes)[1]
