r"""The sampled networks against the theory: :func:`compare` (every quantity against every method of
:data:`renormpp.theory.METHODS`, with the error bars and equilibrium tests of :mod:`renormpp.mcstats`), its
verdicts in words (:func:`verdict`, :func:`summary`) and why a theory does not apply (:func:`why_not`, which is
:func:`renormpp.theory.why_not`)."""
from __future__ import annotations

import warnings

import numpy as np

from .. import theory
from ..mcstats import (FALSE_ALARM, chain_spread, drift, equilibrium_z, error_of_mean, rhat, sampler_health)
from .convert import _observable_draws, _sampler_stats, chain_starts
from .matching import check_match, fit_settings, run_settings

#: a theory "agrees" with the sampled mean where |z| is below this (and the error bar is reliable)
Z_AGREE = 3.0


#: the caveat of a verdict where chains from different kinds of start disagree (:mod:`renormpp.infer.starts`)
STARTS_DISAGREE = "starts disagree: not equilibrium"


def verdict(z: float, delta: float, reliable: bool, settled: bool = True, difference: float | None = None,
            starts_agree: bool = True) -> str:
    """One quantity against one theory, in words: agrees, deviates (by the signed Delta = (MC - theory)/|theory| at
    z), or no verdict; "(not settled)"
    is added where the chains disagree or the mean drifts (``settled`` False: :func:`converged` without the tau test),
    so that a deviation of a run that has not reached equilibrium is not read as the theory's. Where the theory
    predicts 0 (Delta infinite) the deviation is the absolute ``difference`` MC - theory. Where chains from different
    kinds of start disagree (``starts_agree`` False) the caveat says so: :data:`STARTS_DISAGREE`."""
    if not np.isfinite(delta) and not np.isfinite(z):
        return "does not apply"
    if not np.isfinite(z) or not reliable:
        return "no verdict: the error bar does not hold"
    caveat = ("" if settled else " (not settled: the chains disagree or the mean drifts)") if starts_agree \
        else f" ({STARTS_DISAGREE})"
    if abs(z) < Z_AGREE:
        return f"agrees (z = {z:+.1f}){caveat}"
    size = f"{delta:+.2%}" if np.isfinite(delta) or difference is None else f"{difference:+.3g} (the theory predicts 0)"
    return f"deviates by {size} at z = {z:+.1f}{caveat}"


# ---- theory against sampling ------------------------------------------------------------------------------
#: ``fit.refit(method, **changes)``, or None where that theory does not apply (:func:`renormpp.theory.refit_or_none`)
theory_fit = theory.refit_or_none
#: why theory ``method`` does not apply at ``fit``, in words; "" where it applies (:func:`renormpp.theory.why_not`)
why_not = theory.why_not


def compare(samples_or_datatree, fits, X_test=None, Y_test=None, *, error: str = "gamma", cut="auto",
            sampler: str | None = None, starts=None, method: str | None = None):
    r"""Sampled generalization loss and readout overlaps against the theories of ``fits``.

    Parameters
    ----------
    samples_or_datatree : numpyro.infer.MCMC, dict or DataTree
        The run, or a dict of samples (leading chain, draw axes, or draw only), or an ArviZ DataTree, holding either
        the recorded observables ``eps_g`` and ``overlap`` or the weights ``w`` and ``v`` (then ``X_test``,
        ``Y_test`` are needed). An MCMC's model arguments are checked against the fit's
        (:func:`renormpp.diagnostics.matching.check_match`).
    fits : fit or sequence of fits
        Fits of any theory of :data:`renormpp.theory.THEORIES` for the same data, N1, T and priors. A fit of a
        kernel-renormalization method (:class:`~renormpp.theory.TheoryFit`) first brings every method of
        :data:`renormpp.theory.METHODS`, computed from its eigendecomposition; every other fit brings its own
        theory, named by its ``method`` (and ``variant``, e.g. ``specialists[k=2]``).
    X_test, Y_test : array_like
        The test set of the theory's generalization loss.
    error : {"gamma", "blocking", "ess"}, default "gamma"
        The estimator of the error of the MC mean.
    cut : "auto" or int, default "auto"
        The thermalization cut, in draws per chain.
    sampler : str, optional
        A description of the sampler and its step, shown in the summary (taken from an MCMC's kernel if not given),
        so that a reader can judge a biased sampler (ULA at a large step) that its own error bars cannot show.
    starts : list of str, optional
        The kind of start of each chain (:mod:`renormpp.infer.starts`; read from a DataTree's ``start`` coordinate
        where not given): chains of different kinds must agree too (``starts_p``, ``starts_apart``).

    Returns
    -------
    xarray.Dataset over ``quantity`` (``eps_g`` and ``overlap[a,b]`` for a <= b) and ``theory`` (the theories of
    ``fits``): ``mc_mean``, ``mc_error``, ``tau_int``, ``reliable``, ``prediction``, ``prediction_error`` (a sampled
    theory's own Monte Carlo error, 0 for the others), ``z`` = (MC - TH) / sqrt(MC error² + TH error²), ``delta`` = :math:`({\rm MC} - {\rm TH})/|{\rm TH}|`, signed like ``z``
    (negative where the sampled mean lies below the theory; the supplement's discrepancy, eq:supp:discrep, is its
    absolute value), ``verdict`` (a string per quantity and theory, :func:`verdict`: agrees where :math:`|z| <`
    :data:`Z_AGREE`) and ``not_applicable`` (per theory: why it does not apply here, :func:`why_not`; "" where it
    does); the equilibrium
    tests ``drift_z`` and ``drifting`` (:func:`drift`), ``chains_p`` and ``chains_apart`` (:func:`chain_spread`), both
    judged among all the quantities (:func:`equilibrium_z`), ``starts_p`` and ``starts_apart`` (the same test between
    the kinds of start, NaN and False with one kind), and ``settled`` (none raises its alarm), and ``rhat``
    (:func:`rhat`, shown, not judged); ``attrs["starts"]``: the kinds of start, comma-separated per chain.
    ``attrs``: ``sampler`` (the description), ``sampler_ok`` and ``sampler_problems`` (:func:`sampler_health`
    of the recorded acceptance, divergences, and the draws of eps_g), and ``summary`` (:func:`summary`).
    Where the sampler failed, every verdict is "no verdict: the sampler failed".
    """
    import xarray as xr

    if method is not None:
        warnings.warn("compare(method=) is now compare(error=): method names a theory everywhere else",
                      FutureWarning, stacklevel=2)
        error = method
    fits = list(fits) if isinstance(fits, (list, tuple)) else [fits]
    if not fits:
        raise ValueError("give at least one fit of renormpp.theory.solve")
    fit = fits[0]
    settings = run_settings(samples_or_datatree)  # an MCMC says what it ran; samples do not
    for f in fits:
        if settings:
            check_match(fit_settings(f), settings, "the fit", "the run")
        if f is not fit:
            check_match(fit_settings(fit), fit_settings(f), "the first fit", f"the {f.method} fit")
    obs = _observable_draws(samples_or_datatree, fit, X_test, Y_test)
    starts = list(starts) if starts is not None else chain_starts(samples_or_datatree)
    D = obs["overlap"].shape[-1]
    for f in fits:
        if D != f.D:
            raise ValueError(f"the samples have D={D} outputs but the fit has D={f.D} ({f.method})")
    if X_test is None or Y_test is None:
        raise ValueError("give X_test and Y_test: the theory's generalization loss needs the test set")
    stats, described = _sampler_stats(samples_or_datatree)
    health = sampler_health(stats, obs["eps_g"])
    pairs = [(a, b) for a in range(D) for b in range(a, D)]
    series = [obs["eps_g"]] + [obs["overlap"][..., a, b] for a, b in pairs]
    names = ["eps_g"] + [f"overlap[{a},{b}]" for a, b in pairs]
    estimates = [error_of_mean(s, method=error, cut=cut) for s in series]
    drifts = [drift(s, cut=e.cut) for s, e in zip(series, estimates)]

    columns = theory_columns(fits)
    pred = np.full((len(names), len(columns)), np.nan)
    pred_err = np.zeros_like(pred)
    for j, (_, th, _) in enumerate(columns):
        if th is None:
            continue
        pred[0, j] = th.generalization_error(X_test, Y_test)
        pred[1:, j] = [th.readout_overlap[a, b] for a, b in pairs]
        own = th.monte_carlo_error(X_test, Y_test)
        pred_err[0, j] = own["eps_g"]
        pred_err[1:, j] = [own["overlap"][a, b] for a, b in pairs]
    mc = np.array([e.mean for e in estimates])
    err = np.array([e.error for e in estimates])
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (mc[:, None] - pred) / np.hypot(err[:, None], pred_err)
        delta = (mc[:, None] - pred) / np.abs(pred)
    rhats = np.array([rhat(s, cut=e.cut) for s, e in zip(series, estimates)])
    spreads = [chain_spread(s, cut=e.cut) for s, e in zip(series, estimates)]
    drifting = [d.moves(len(names)) for d in drifts]
    apart = [c.apart(len(names)) for c in spreads]
    several = starts is not None and len(set(starts)) > 1
    by_start = [chain_spread(s, e.cut, groups=starts) if several else None for s, e in zip(series, estimates)]
    starts_apart = [bool(b is not None and b.apart(len(names))) for b in by_start]
    settled = [not (d or a or s) for d, a, s in zip(drifting, apart, starts_apart)]
    verdicts = [[verdict(z[i, j], delta[i, j], estimates[i].reliable, settled[i], mc[i] - pred[i, j],
                         not starts_apart[i])
                 if health.ok or not np.isfinite(pred[i, j])
                 else "no verdict: the sampler failed" for j in range(pred.shape[1])] for i in range(len(names))]
    ds = xr.Dataset(
        dict(mc_mean=("quantity", mc), mc_error=("quantity", err),
             tau_int=("quantity", [e.tau_int for e in estimates]),
             drift_z=("quantity", [d.z for d in drifts]),
             rhat=("quantity", rhats),
             chains_p=("quantity", [c.p for c in spreads]),
             drifting=("quantity", drifting), chains_apart=("quantity", apart),
             starts_p=("quantity", [b.p if b is not None else np.nan for b in by_start]),
             starts_apart=("quantity", starts_apart),
             settled=("quantity", settled),
             reliable=("quantity", [e.reliable and health.ok for e in estimates]),
             prediction=(("quantity", "theory"), pred), prediction_error=(("quantity", "theory"), pred_err),
             z=(("quantity", "theory"), z),
             delta=(("quantity", "theory"), delta), verdict=(("quantity", "theory"), np.array(verdicts, dtype=object)),
             not_applicable=("theory", np.array([r for _, _, r in columns], dtype=object))),
        coords=dict(quantity=names, theory=[n for n, _, _ in columns],
                    a=("quantity", [-1] + [a for a, _ in pairs]), b=("quantity", [-1] + [b for _, b in pairs])),
        attrs=dict(N1=fit.N1, P=fit.P, D=D, T=fit.T, lambda0=fit.lambda0, lambda1=fit.lambda1,
                   error_method=error, cut=int(estimates[0].cut), draws=int(estimates[0].n),
                   sampler=sampler or described or "not given", sampler_ok=int(health.ok),
                   sampler_problems="; ".join(health.problems), starts=",".join(starts or [])),
    )
    ds.attrs["summary"] = summary(ds)
    return ds


def column_name(fit) -> str:
    """A fit's name in a comparison: its ``method``, with its ``variant`` where it has one (``specialists[k=2]``)."""
    variant = getattr(fit, "variant", "")
    return f"{fit.method}[{variant}]" if variant else fit.method


def theory_columns(fits) -> list:
    """``[(name, fit or None, reason)]``, one per theory a comparison shows: where the first fit is of a method of
    :data:`renormpp.theory.METHODS`, every such method (refitted from its eigendecomposition, or the reason it does
    not apply); then every other fit under :func:`column_name`, None with its ``reason`` where it did not converge."""
    columns, fits = [], list(fits)
    if fits and fits[0].method in theory.METHODS:
        for name in theory.METHODS:
            th, reason = theory.fit_or_reason(fits[0], name)
            columns.append((name, th, reason))
        fits = fits[1:]
    for f in fits:
        name = column_name(f)
        if any(name == c[0] for c in columns):
            if f.method in theory.METHODS:
                continue  # already there, refitted from the first fit
            raise ValueError(f"two fits named {name!r}: compare fits of different theories or variants")
        columns.append((name, f, "") if f.converged else (name, None, f"the fit did not converge: {f.reason}"))
    return columns


def does_not_apply(ds, method: str) -> str:
    """Why ``method`` does not apply in :func:`compare`'s ``ds`` (datasets written before the reason was kept: a
    generic one)."""
    if "not_applicable" in ds:
        return str(ds.not_applicable.sel(theory=method).item())
    return "a non-odd activation, or a one-loop Q that is not positive definite"


def summary(ds) -> str:
    """A few lines: the sampler, the MC generalization error against each theory with its verdict, and the worst
    overlap z-scores."""
    e = ds.sel(quantity="eps_g")
    lines = [f"N1={ds.attrs['N1']:g}, P={ds.attrs['P']}, D={ds.attrs['D']}, T={ds.attrs['T']:g}: "
             f"{ds.attrs['draws']} draws after a cut of {ds.attrs['cut']} per chain, errors by {ds.attrs['error_method']}",
             f"sampler: {ds.attrs.get('sampler', 'not given')}"]
    if not ds.attrs.get("sampler_ok", 1):
        lines.append(f"SAMPLER FAILED: {ds.attrs['sampler_problems']}. The draws are not the posterior; nothing "
                     "below is a comparison.")
    lines.append(f"eps_g  MC {float(e.mc_mean):.5g} +- {float(e.mc_error):.2g}")
    for th in ds.theory.values:
        p = float(e.prediction.sel(theory=th))
        lines.append(f"   {th:15s} {p:.5g}  {e.verdict.sel(theory=th).item()}" if np.isfinite(p) else
                     f"   {th:15s} (does not apply: {does_not_apply(ds, th)})")
    ov = ds.sel(quantity=ds.quantity[1:])
    for th in (theory.REFERENCE, theory.BASELINE):
        if th not in ds.theory.values:
            continue
        zs = np.abs(ov.z.sel(theory=th).values)
        if not np.isfinite(zs).any():
            continue
        lines.append(f"overlaps vs {th}: max |z| = {np.nanmax(zs):.1f} over {zs.size} entries, "
                     f"{np.mean(zs < Z_AGREE):.0%} agree (|z| < {Z_AGREE:g})")
    family = ds.sizes["quantity"]
    if "drifting" in ds:
        moving = [f"{q} (z = {z:+.1f})" for q, z, m in zip(ds.quantity.values, ds.drift_z.values, ds.drifting.values)
                  if m]
        if moving:
            lines.append(f"DRIFT: {', '.join(moving)} still drift (Geweke: the first 10% of the draws after the cut "
                         f"against the last 50%, |z| > {equilibrium_z(family):.2f} among {family} quantities); sample "
                         "longer before trusting these means")
    if "chains_apart" in ds:
        apart = [f"{q} (p = {p:.1g}, R-hat {r:.3f})" for q, p, r, a in
                 zip(ds.quantity.values, ds.chains_p.values, ds.rhat.values, ds.chains_apart.values) if a]
        if apart:
            lines.append(f"CHAINS DISAGREE: their means differ by more than their error bars allow "
                         f"(p < {FALSE_ALARM / family:.1g}) "
                         f"for {', '.join(apart[:8])}" + (f" and {len(apart) - 8} more" if len(apart) > 8 else "")
                         + "; a slow mode holds the chains apart: sample longer before trusting these error bars")
    if "starts_apart" in ds and bool(ds.starts_apart.any()):
        kinds = list(dict.fromkeys(ds.attrs.get("starts", "").split(",")))
        apart = [f"{q} (p = {p:.1g})" for q, p, a in zip(ds.quantity.values, ds.starts_p.values, ds.starts_apart.values)
                 if a]
        lines.append(f"STARTS DISAGREE: NOT EQUILIBRIUM. Chains started from {' and '.join(kinds)} give means that "
                     f"differ by more than their error bars allow (p < {FALSE_ALARM / family:.1g}) for "
                     f"{', '.join(apart[:8])}" + (f" and {len(apart) - 8} more" if len(apart) > 8 else "")
                     + "; at least one kind has not reached the posterior: these means are no verdict on the theory")
    if not bool(ds.reliable.all()):
        lines.append("WARNING: some error bars do not hold (see ds.reliable: a run too short, or a frozen chain)")
    return "\n".join(lines)
