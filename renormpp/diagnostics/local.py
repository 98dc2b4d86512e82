r"""The CNN's local order parameter, sampled against the theory.

A convolutional network's theory (:mod:`renormpp.theory.conv`) predicts the readout overlaps of every pair of
patches, Eq. (C10): :math:`\frac1C\langle\sum_c v_{a,c,i}v_{b,c,j}\rangle = Q^*_{(ai),(bj)}/\lambda_1`, a
:math:`(D n_p)\times(D n_p)` matrix; the infinite-width network has :math:`\delta_{ab}\delta_{ij}/\lambda_1`. A run of
the ``conv`` architecture records the draws of these (``local_overlap``, (D, n_p, D, n_p), Rao-Blackwellized:
:func:`renormpp.readout.expected_local_overlap`); :func:`compare_local` sets their means, with error bars from the
Γ-method per entry (:func:`renormpp.mcstats.error_of_mean`), beside every method of the theory.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..mcstats import ShortRunWarning, error_of_mean

#: the theory methods set beside the sampled local overlaps (those the convolutional theory derives)
LOCAL_METHODS = ("exact", "infinite_width")


def compare_local(draws, fit, *, methods=LOCAL_METHODS, method: str = "gamma"):
    r"""The sampled local overlaps against the theory.

    Parameters
    ----------
    draws: (chains, draws, D, n_p, D, n_p) array of ``local_overlap`` (a run's ``observables.nc``).
    fit: a :class:`renormpp.theory.ConvFit` at the sampled width (its ``refit(m)`` gives each method).

    Returns
    -------
    xarray.Dataset over (output, patch, output\_, patch\_) and ``theory``: ``mc_mean``, ``mc_error`` (the error of
    the mean of each entry), ``prediction`` (:math:`Q^*/\lambda_1` of each method), ``z`` = (MC − TH)/error. Its
    ``attrs`` hold, per method, ``rel_<method>`` =
    :math:`\|{\rm MC} - {\rm TH}\|_F/\|{\rm MC} - \mathbb 1/\lambda_1\|_F`
    (the share of the sampled departure from the infinite width that the method misses: 100% for the infinite width
    itself), ``maxz_<method>`` and ``agree_<method>`` (the share of the independent entries, i ≤ j in (a, i) order,
    with |z| < 3); ``N1``; ``reliable``, the share of entries whose error bar holds (tau_int resolved).
    """
    import xarray as xr

    x = np.asarray(draws, dtype=np.float64)
    if x.ndim != 6 or x.shape[2:4] != x.shape[4:6]:
        raise ValueError(f"local overlap draws must be (chains, draws, D, n_p, D, n_p); got shape {x.shape}")
    D, n_p = x.shape[2], x.shape[3]
    if (D, n_p) != (fit.D, fit.n_patches):
        raise ValueError(f"the draws have D = {D}, n_p = {n_p} but the fit has D = {fit.D}, n_p = {fit.n_patches}: "
                         "compare draws and a fit of the same network")
    n = D * n_p
    flat = x.reshape(*x.shape[:2], n, n)
    iu = np.triu_indices(n)
    mean, err = np.zeros((n, n)), np.zeros((n, n))
    reliable = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShortRunWarning)  # counted in attrs["reliable"], not warned per entry
        for k, l in zip(*iu):
            est = error_of_mean(flat[:, :, k, l], method=method)
            mean[k, l] = mean[l, k] = est.mean
            err[k, l] = err[l, k] = est.error
            reliable.append(est.reliable)
    preds = np.stack([fit.refit(m).local_overlap.reshape(n, n) for m in methods])
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (mean[None] - preds) / err[None]
    shape = (D, n_p, D, n_p)
    dims = ("output", "patch", "output_", "patch_")
    attrs = {"N1": int(fit.N1), "reliable": float(np.mean(reliable))}
    departure = np.linalg.norm(mean - np.eye(n) / fit.lambda1)
    for m, p, zz in zip(methods, preds, z):
        attrs[f"rel_{m}"] = float(np.linalg.norm(mean - p) / departure)
        attrs[f"maxz_{m}"] = float(np.nanmax(np.abs(zz[iu])))
        attrs[f"agree_{m}"] = float(np.mean(np.abs(zz[iu]) < 3))
    return xr.Dataset(dict(mc_mean=(dims, mean.reshape(shape)), mc_error=(dims, err.reshape(shape)),
                           prediction=(("theory",) + dims, preds.reshape((len(methods),) + shape)),
                           z=(("theory",) + dims, z.reshape((len(methods),) + shape))),
                      coords={"theory": list(methods)}, attrs=attrs)


def summary(ds) -> str:
    """One line per method: how far the sampled local overlaps are from its prediction."""
    return "; ".join(f"{m}: misses {ds.attrs[f'rel_{m}']:.1%} of the sampled departure from infinite width, "
                     f"max |z| = {ds.attrs[f'maxz_{m}']:.1f}, {ds.attrs[f'agree_{m}']:.0%} of entries within 3 sigma"
                     for m in ds.theory.values) + (
        f" (error bars hold for {ds.attrs['reliable']:.0%} of the entries)" if ds.attrs["reliable"] < 1 else "")
