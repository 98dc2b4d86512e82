"""The theory stage of a point: the kernel-renormalization methods from one eigendecomposition, and the theories of
``[theory] methods`` beyond them through :data:`renormpp.theory.THEORIES`, solved once per point and kept in
``theory.json`` (a theory that samples takes minutes: a resumed point and the report read it back as a
:class:`renormpp.theory.RecordedFit`)."""
from __future__ import annotations

import sys
import time
import warnings

from .. import architectures, theory
from ..theory.recorded import RecordedFit


def solve_theory(model, data):
    """The kernel eigendecomposition of the data at the point's width (``infinite_width``: the other methods are
    refits of it, :func:`renormpp.theory.fit_or_reason`)."""
    return architectures.get_architecture(model.architecture).solve(
        data.X, data.Y, N1=model.N1, T=model.T, lambda0=model.lambda0, lambda1=model.lambda1,
        activation=model.activation, method="infinite_width", **model.options())


def problem(model, data) -> theory.Problem:
    """The point's network and training data as every theory sees them."""
    options = model.options()
    return theory.Problem(X=data.X, Y=data.Y, N1=model.N1, T=model.T, lambda0=model.lambda0, lambda1=model.lambda1,
                          activation=model.activation, depth=options.get("depth", 1),
                          conv=options if model.architecture == "conv" else None)


def beyond(point) -> list[str]:
    """The theories of the point's ``[theory] methods`` that are not kernel-renormalization methods."""
    return [name for name in point.theory.chosen() if name not in theory.METHODS]


def solve_beyond(point, data, known: dict | None = None, *, progress: bool = True, label: str = "") -> dict:
    """``{name: RecordedFit or reason}`` for every theory of :func:`beyond`: the record of its fit on the point's
    test set, or why it does not apply. ``known`` (a ``theory.json`` read back) gives the ones already solved. A
    solve that fails (its own error) is recorded as not converged, with the error as its reason."""
    pb = problem(point.model, data)
    out = {}
    for name in beyond(point):
        record = theory.THEORIES[name]
        if known and name in known.get("beyond", {}):
            kept = known["beyond"][name]
            out[name] = RecordedFit.from_dict(kept["fit"]) if kept["applies"] else kept["reason"]
            continue
        reason = record.applies(pb)
        if reason:
            out[name] = f"{record.noun} {reason}"
            continue
        if progress and record.cost == "sampled":
            print(f"{label}: solving {record.noun} ({theory.COSTS[record.cost]})", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", theory.ConvergenceWarning)  # kept as the record's reason
            try:
                fit = record.solve(pb, **point.theory.options_of(name))
            except (ValueError, RuntimeError, FloatingPointError) as err:
                out[name] = _failed(record, pb, data, str(err), time.perf_counter() - t0)
                continue
            out[name] = RecordedFit.of(fit, data.X_test, data.Y_test, seconds=time.perf_counter() - t0)
    return out


def _failed(record, pb, data, reason: str, seconds: float) -> RecordedFit:
    """The record of a solve that raised: not converged, NaN predictions, the error as its reason."""
    import numpy as np

    from ..theory.recorded import fingerprint

    D = np.asarray(data.Y).reshape(len(data.Y), -1).shape[1]
    nan = np.full((D, D), np.nan)
    return RecordedFit(method=record.name, variant="", converged=False, reason=reason, Q=nan, readout_overlap=nan,
                       eps_g=np.nan, eps_g_error=np.nan, overlap_error=nan, test=fingerprint(data.X_test, data.Y_test),
                       train=fingerprint(pb.X), N1=float(pb.N1), T=float(pb.T), lambda0=float(pb.lambda0), lambda1=float(pb.lambda1),
                       activation=str(pb.activation), P=int(len(pb.X)), seconds=seconds)


def beyond_fits(solved: dict) -> list:
    """The fits of :func:`solve_beyond`'s result that a comparison shows (those that apply; an unconverged one shows
    its reason there)."""
    return [f for f in solved.values() if isinstance(f, RecordedFit)]


def theory_results(fit, data, solved: dict | None = None) -> dict:
    """``theory.json``: every method of :data:`renormpp.theory.METHODS` at ``fit``'s N1 as plain numbers, and under
    ``beyond`` every theory of :func:`solve_beyond` (its record, or why it does not apply)."""
    out = {}
    for method in theory.METHODS:
        th = theory.refit_or_none(fit, method)
        if th is None:
            out[method] = {"applies": False}
            continue
        out[method] = dict(applies=True, Q=th.Q.tolist(), readout_overlap=th.readout_overlap.tolist(),
                           eps_g=float(th.generalization_error(data.X_test, data.Y_test)), converged=bool(th.converged),
                           grad_norm=float(th.grad_norm), action=float(th.action), n_iter=int(th.n_iter))
    if solved:
        out["beyond"] = {name: (dict(applies=True, fit=f.to_dict()) if isinstance(f, RecordedFit)
                                else dict(applies=False, reason=f)) for name, f in solved.items()}
    return out
