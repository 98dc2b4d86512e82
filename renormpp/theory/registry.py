r"""Every theory of the package as one table, :data:`THEORIES`, and the one entry point :func:`solve`.

A :class:`Theory` record says where the theory applies (``applies(problem) -> reason``), what it costs (its
:data:`COSTS` class: from the kernel's spectrum, milliseconds; from the data, seconds; sampled, minutes), how it
solves (``solve(problem, **options) -> fit``, the options its solver takes) and how figures and reports name it.
:func:`solve` (``rp.theory.solve``) and ``spec.theory(name)`` reach every record with one signature.

The records:

* the kernel-renormalization methods of :data:`~renormpp.theory.METHODS` (``exact``, ``one_loop``,
  ``infinite_width``, ``corrected``), for odd activations, ReLU (two order parameters, :mod:`.nonodd`), deep
  networks (Eq. (D1)) and the convolutional network (``conv=``, :mod:`.conv`, Eqs. (C1)-(C10));
* ``adaptive_kernel``: a kernel that adapts beyond the D x D rescaling (:mod:`.adaptive_kernel`, Eqs. (A1)-(A5));
* ``shared_field``: one Gaussian field shared by all neurons, each neuron's law exact (:mod:`.shared_field`,
  Eqs. (F1)-(F3));
* ``specialists``: k neurons exact in the field of a renormalized bulk (:mod:`.specialists`, Eqs. (SP1)-(SP4));
* ``field_specialists``: k neurons exact in the field of a bulk that follows the shared field
  (:mod:`.field_specialists`, Eqs. (FS1)-(FS4)); k = 0 is ``shared_field``, k = N1 the exact posterior;
* ``measured_kernel``: the oracle, a kernel-renormalization method on a measured kernel (:mod:`.measured`; option
  ``kernel``, e.g. :func:`~renormpp.theory.measured.sampled_kernel` of a run's hidden weights).

Every fit they return keeps one protocol (:data:`PROTOCOL`): ``method``, ``converged``, ``reason``, ``Q``,
``readout_overlap``, ``predict(X0) -> Prediction(mean, cov)``, ``generalization_error(X0, Y0)``, the network's
``N1``, ``T``, ``lambda0``, ``lambda1``, ``activation``, ``depth``, and for a theory that samples the number of its
``draws`` and ``monte_carlo_error(X0, Y0)``, its own error of ε_g and of the overlaps (zero for the others).

A theory that samples takes one more option, ``replicates=R`` (R >= 2): R solves with the seeds ``seed`` ...
``seed + R - 1`` as one fit (:class:`~renormpp.theory.replicates.Replicates`), whose error is measured from their
spread, the noise of the solve's own fixed point included (Eq. (R1)).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._checks import positive_int
from ..network import ActivationLike, get_activation
from . import adaptive_kernel, field_specialists, measured, shared_field, specialists
from .conv import CONV_METHODS
from .fit import solve_renormalized
from .methods import METHODS, _listed
from .replicates import Replicates

#: The cost classes, the time a solve takes on 2 cores at P ~ 1000, in words for reports and the CLI.
COSTS = {"spectrum": "milliseconds (from the kernel's spectrum)",
         "data": "seconds to minutes (iterations on the data)",
         "sampled": "minutes (it samples neurons)"}

#: What every fit of every theory has (the attributes a test checks on each record).
PROTOCOL = ("method", "converged", "reason", "Q", "readout_overlap", "predict", "generalization_error", "N1", "T",
            "lambda0", "lambda1", "activation", "depth", "D", "P", "draws", "monte_carlo_error")


@dataclass(frozen=True)
class Problem:
    """A network and its training data, as every theory sees them: inputs ``X`` (P, N0), labels ``Y`` (P, D), width
    ``N1``, temperature ``T``, prior precisions ``lambda0`` and ``lambda1``, the activation, the number of hidden
    layers ``depth`` and, for the convolutional network, ``conv`` (``dict(image_shape=(s, s), patch=m)``)."""

    X: np.ndarray
    Y: np.ndarray
    N1: float
    T: float = 0.01
    lambda0: object = 1.0
    lambda1: float = 1.0
    activation: ActivationLike = "erf"
    depth: int = 1
    conv: object = None


@dataclass(frozen=True)
class Theory:
    """One theory: ``name``; ``cost``, a key of :data:`COSTS`; ``applies(problem) -> str``, "" where it applies,
    else why not; ``solver(problem, **options) -> fit``; ``options``, the names its solver takes; ``label``, ``ls``,
    ``color``, ``marker``: its curve and points in figures (``applies`` says why not as a predicate of the method:
    "needs an odd activation ..."); ``noun``: its name in a report's prose; ``required``: the
    options it cannot do without; ``explains``: its solver says itself, with the ways out, why it does not apply."""

    name: str
    cost: str
    applies: Callable[[Problem], str]
    solver: Callable
    options: tuple
    label: str
    ls: str
    noun: str
    color: str = "C0"
    marker: str = "o"
    required: tuple = ()
    explains: bool = False

    def solve(self, problem: Problem, **options):
        """The fit of this theory on ``problem``.

        Raises
        ------
        ValueError
            Where the theory does not apply to the problem (the message says why and which theories do), or for an
            option its solver does not take.
        """
        replicates = options.pop("replicates", 1)
        if replicates != 1 and self.cost != "sampled":
            raise ValueError(f"replicates is an option of the theories that sample; the {self.name} theory samples "
                             "nothing, so its replicates would all be one")
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise ValueError(f"the {self.name} theory takes no option {_listed(unknown, 'or')}; its options are "
                             f"{_listed(self.options, 'and') if self.options else 'none'}")
        missing = [n for n in self.required if n not in options]
        if missing:
            raise ValueError(f"the {self.name} theory needs the option {_listed(missing, 'and')}: solve(..., "
                             f"method={self.name!r}, {missing[0]}=...) (renormpp.theory.THEORIES[{self.name!r}])")
        reason = self.applies(problem)
        if reason and not self.explains:
            here = [t.name for t in THEORIES.values() if not t.applies(problem)]
            ways = f"Use method={_listed(here)}, which apply here" if here else "No theory of renormpp applies here"
            raise ValueError(f"method={self.name!r} {reason}. {ways}")
        if replicates == 1:
            return self.solver(problem, **options)
        replicates = positive_int("replicates", replicates)
        seed = options.pop("seed", 0)
        seeds = tuple(seed + r for r in range(replicates))
        return Replicates(tuple(self.solver(problem, seed=s, **options) for s in seeds), seeds)


# ---- where each theory applies -------------------------------------------------------------------------------------
def _kernel_method(name: str) -> Callable[[Problem], str]:
    record = METHODS[name]

    def applies(pb: Problem) -> str:
        act = get_activation(pb.activation)
        if pb.conv is not None:
            if name not in CONV_METHODS:
                return "is not derived for the convolutional network"
            if pb.depth != 1:
                return f"is derived for the convolutional network with one hidden layer (depth = {pb.depth})"
            return "" if act.odd else f"needs an odd activation for the convolutional network ({act.name} is not odd)"
        return record.restriction(act, pb.depth)

    return applies


def _one_layer_fc(odd: tuple | None = None) -> Callable[[Problem], str]:
    """A fully connected network with one hidden layer and an odd activation (``odd``: the names it covers)."""

    def applies(pb: Problem) -> str:
        act = get_activation(pb.activation)
        if pb.conv is not None:
            return "is derived for the fully connected network, not the convolutional one"
        if pb.depth != 1:
            return f"is derived for one hidden layer (depth = {pb.depth})"
        if not act.odd or (odd is not None and act.name not in odd):
            covered = f" ({', '.join(odd)})" if odd else ""
            return f"needs an odd activation{covered}; got {act.name!r}"
        return ""

    return applies


# ---- how each solves -----------------------------------------------------------------------------------------------
def _network(pb: Problem) -> dict:
    return dict(N1=pb.N1, T=pb.T, lambda0=pb.lambda0, lambda1=pb.lambda1, activation=pb.activation)


def _options(fn, *taken) -> tuple:
    """The keyword options of a solver: its parameters less the problem's."""
    skip = {"X", "Y", "N1", "T", "lambda0", "lambda1", "activation", "method", "depth", "conv", *taken}
    return tuple(n for n, p in inspect.signature(fn).parameters.items()
                 if n not in skip and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))


def _sampled(fn) -> tuple:
    """The options of a theory that samples: its solver's, and ``replicates`` (:meth:`Theory.solve`)."""
    return _options(fn) + ("replicates",)


def _renormalized(name: str):
    def solver(pb: Problem, **options):
        return solve_renormalized(pb.X, pb.Y, method=name, depth=pb.depth, conv=pb.conv, **_network(pb), **options)
    return solver


def _beyond(module):
    def solver(pb: Problem, **options):
        return module.solve(pb.X, pb.Y, **_network(pb), **options)
    return solver


_MARKERS = {"exact": "o", "one_loop": "v", "infinite_width": "^", "corrected": "s"}


def _kernel_record(name: str) -> Theory:
    m = METHODS[name]
    return Theory(name, "spectrum", _kernel_method(name), _renormalized(name), ("gtol", "maxiter"), m.label, m.ls,
                  m.noun, m.color, _MARKERS.get(name, "o"), explains=True)


#: Every theory, in the order of tables and figures. Adding one is one record here.
THEORIES: dict[str, Theory] = {t.name: t for t in (
    *(_kernel_record(name) for name in METHODS),
    Theory("adaptive_kernel", "data", _one_layer_fc(adaptive_kernel.ACTIVATIONS), _beyond(adaptive_kernel),
           _options(adaptive_kernel.solve), label="adaptive kernel", ls=(0, (3, 1, 1, 1)), noun="the adaptive-kernel theory", color="C4", marker="D"),
    Theory("shared_field", "sampled", _one_layer_fc(), _beyond(shared_field), _sampled(shared_field.solve),
           label="shared field", ls=(0, (5, 1)), noun="the shared-field theory", color="C2", marker="P"),
    Theory("specialists", "sampled", _one_layer_fc(), _beyond(specialists), _sampled(specialists.solve),
           label="specialists in a renormalized bulk", ls=(0, (1, 1)), noun="the specialist theory", color="C3", marker="X",
           required=("k",)),
    Theory("field_specialists", "sampled", _one_layer_fc(), _beyond(field_specialists),
           _sampled(field_specialists.solve), label="specialists in the shared field", ls=(0, (4, 1, 1, 1, 1, 1)),
           noun="the theory of specialists in the shared field", color="C6", marker="h", required=("k",)),
    Theory("measured_kernel", "data", _one_layer_fc(), _beyond(measured), _options(measured.solve),
           label="measured kernel (oracle)", ls=(0, (2, 2)), noun="the theory on the measured kernel", color="C5",
           marker="*", required=("kernel",)),
)}


def noun_of(column: str) -> str:
    """A comparison's column (a theory's name, with its variant: ``specialists[k=2]``) in a report's prose."""
    name, _, variant = column.partition("[")
    record = METHODS.get(name) or THEORIES.get(name)
    noun = record.noun if record is not None else f"the {name} theory"
    return f"{noun} ({variant[:-1]})" if variant else noun


def get_theory(name: str) -> Theory:
    """The record of a name of :data:`THEORIES`; a ValueError that lists them for any other."""
    if name not in THEORIES:
        raise ValueError(f"unknown method {name!r}; choose one of {_listed(list(THEORIES))} "
                         "(renormpp.theory.THEORIES)")
    return THEORIES[name]


def solve(X, Y, N1, T: float = 0.01, lambda0=1.0, lambda1: float = 1.0, activation: ActivationLike = "erf",
          method: str = "exact", *, depth: int = 1, conv=None, **options):
    r"""Solve any theory of :data:`THEORIES` for a network on data (X, Y).

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
        A name of :data:`THEORIES`: ``"exact"`` (the saddle point of paper Eq. (1)), ``"one_loop"``,
        ``"infinite_width"``, ``"corrected"`` (:func:`renormpp.theory.fit.solve_renormalized` says how each is
        solved), ``"adaptive_kernel"`` (:func:`renormpp.theory.adaptive_kernel.solve`), ``"shared_field"``
        (:func:`renormpp.theory.shared_field.solve`) or ``"specialists"``
        (:func:`renormpp.theory.specialists.solve`; option ``k``, the number of explicit neurons),
        ``"field_specialists"`` (:func:`renormpp.theory.field_specialists.solve`; option ``k``) or
        ``"measured_kernel"`` (:func:`renormpp.theory.measured.solve`; option ``kernel``, the measured kernel).
    depth : int, default 1
        Number of hidden layers L, all of width N1 (Eq. (D1) of :mod:`renormpp.theory`): ``exact``, ``one_loop``
        and ``infinite_width``, odd activations.
    conv : dict or Patches, optional
        ``dict(image_shape=(s, s), patch=m)``: the one-hidden-layer CNN of :mod:`renormpp.theory.conv` (``exact``,
        ``one_loop``, ``infinite_width``).
    **options
        The theory's own options (``THEORIES[method].options``): ``gtol`` and ``maxiter`` for the kernel methods,
        ``k``, ``iterations``, ``seed``, ... for the specialists, and so on.

    Returns
    -------
    fit
        A fit with the protocol of :data:`PROTOCOL`: :class:`~renormpp.theory.TheoryFit`,
        :class:`~renormpp.theory.conv.ConvFit`, :class:`~renormpp.theory.adaptive_kernel.AdaptiveKernelFit`,
        :class:`~renormpp.theory.shared_field.SharedFieldFit`, :class:`~renormpp.theory.specialists.SpecialistFit`,
        :class:`~renormpp.theory.field_specialists.FieldSpecialistFit` or
        :class:`~renormpp.theory.measured.MeasuredKernelFit`.
        A ConvergenceWarning where it did not converge (``converged`` is then False and ``reason`` says why).

    Raises
    ------
    ValueError
        For an unknown method, a method that does not apply to this network (the message says why and which do),
        an option the method does not take, data of mismatched shapes, NaN or inf entries, or a parameter out of
        its range.
    """
    record = get_theory(method)
    problem = Problem(X=X, Y=Y, N1=N1, T=T, lambda0=lambda0, lambda1=lambda1, activation=activation, depth=depth,
                      conv=conv)
    return record.solve(problem, **options)
