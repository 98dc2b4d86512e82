"""Whether a theory fit and a sampled run are of the same network: the hyperparameters each says it has, and a
clear error where they differ (:func:`check_match`). :func:`renormpp.diagnostics.compare` and
:meth:`renormpp.Spec.compare` refuse a mismatch with it, so that a fit at one temperature is never silently compared
with a run at another.
"""
from __future__ import annotations

import functools
import inspect

import numpy as np

#: the hyperparameters a fit and a run must share (read from a fit's attributes and a run's model arguments)
MATCHED = ("N1", "T", "lambda0", "lambda1", "activation", "depth")


def activation_name(activation) -> str:
    """The name of an activation given by name, as a record with a ``name`` or as a function."""
    if isinstance(activation, str):
        return activation
    return getattr(activation, "name", None) or getattr(activation, "__name__", None) or repr(activation)


def fit_settings(fit) -> dict:
    """The hyperparameters of a theory fit (:data:`MATCHED`)."""
    lam0 = np.atleast_1d(np.asarray(fit.lambda0, dtype=float))
    return dict(N1=fit.N1, T=fit.T, lambda0=float(lam0[0]) if np.all(lam0 == lam0[0]) else tuple(lam0),
                lambda1=fit.lambda1, activation=activation_name(fit.activation), depth=getattr(fit, "depth", 1))


def _inner_kernel(kernel):
    while kernel is not None and not callable(getattr(kernel, "model", None)) and hasattr(kernel, "inner"):
        kernel = kernel.inner
    return kernel


def run_settings(run) -> dict:
    """The hyperparameters an MCMC run was made with, as far as they can be read: the keywords its model was bound
    with (a ``functools.partial``, as :attr:`Spec.model`), then those of ``mcmc.run``, then the model's defaults.
    Empty for samples (a dict or a DataTree), which do not say."""
    kernel = getattr(run, "sampler", None)
    model = getattr(kernel, "model", None)
    if model is None:
        model = getattr(getattr(kernel, "inner_kernel", None), "model", None)
    if model is None:
        return {}
    kw = {}
    fn = model
    while isinstance(fn, functools.partial):
        kw = {**fn.keywords, **kw}
        fn = fn.func
    kw.update(getattr(run, "_kwargs", None) or {})
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    for name, p in params.items():
        if p.default is not inspect.Parameter.empty:
            kw.setdefault(name, p.default)
    out = {}
    if "N1" in kw:
        out["N1"] = kw["N1"]
    for name in ("T", "lambda0", "lambda1", "depth"):
        if name in kw:
            out[name] = kw[name]
    if "lambdas" in kw:  # mlp: one number for all layers, or one per hidden layer then the readout
        lams = np.broadcast_to(np.atleast_1d(np.asarray(kw["lambdas"], dtype=float)), (int(kw.get("depth", 1)) + 1,))
        hidden = lams[:-1]
        out["lambda0"] = float(hidden[0]) if np.all(hidden == hidden[0]) else tuple(hidden)
        out["lambda1"] = float(lams[-1])
    if "activation" in kw:
        out["activation"] = activation_name(kw["activation"])
    return out


def _same(a, b) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    a, b = np.atleast_1d(np.asarray(a, dtype=float)), np.atleast_1d(np.asarray(b, dtype=float))
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-9, atol=0))


def check_match(first: dict, second: dict, first_name: str = "the fit", second_name: str = "the run") -> None:
    """Refuse two sets of hyperparameters that differ where both say: a ValueError listing every difference.

    Parameters
    ----------
    first, second : dict
        Hyperparameters by name (:func:`fit_settings`, :func:`run_settings`, :meth:`Spec.hyperparameters`).
    first_name, second_name : str
        What each is, for the message.

    Raises
    ------
    ValueError
        Where a hyperparameter of :data:`MATCHED` differs.
    """
    diffs = [f"{k}: {first[k]!r} in {first_name}, {second[k]!r} in {second_name}" for k in MATCHED
             if k in first and k in second and not _same(first[k], second[k])]
    if diffs:
        raise ValueError(f"{first_name} and {second_name} are of different networks ({'; '.join(diffs)}): solve the "
                         "theory with the run's hyperparameters (rp.Spec(...).theory() and rp.Spec(...).kernel() "
                         "share them)")
