"""From what a run gives (a ``numpyro.infer.MCMC``, a dict of samples, an ArviZ DataTree) to named arrays: the
DataTree with named dims (:func:`to_datatree`), the observables' draws and the sampler statistics that
:func:`~renormpp.diagnostics.compare` judges."""
from __future__ import annotations

import numpy as np

from ..mcstats import describe_sampler


def to_datatree(source, *, coords: dict | None = None, sample_stats: dict | None = None, dims: dict | None = None):
    """An ArviZ DataTree with named dimensions from ``numpyro.infer.MCMC`` or a dict of samples.

    Dims: w (hidden, input), v (output, hidden), b (hidden), c (output), f (data, output), eps_g (),
    overlap (output, output_) (:data:`renormpp.models.DIMS`, :data:`renormpp.observables.DIMS`); the convolutional
    network's w (channel, patch_pixel) and v (output, channel, patch) (:data:`renormpp.models.CNN_DIMS`). From an
    ``MCMC`` the model's sites take the names of its plates (as ArviZ infers them); a dict's sites take ``dims``
    (default: the fully connected network's, :data:`renormpp.models.DIMS`, or the CNN's where v has one axis more
    than w; or an architecture record's ``dims``). A dict must have leading (chain, draw) axes
    (``get_samples(group_by_chain=True)``).

    Parameters
    ----------
    source : numpyro.infer.MCMC or dict
        A run, or a dict of samples with leading (chain, draw) axes.
    coords : dict, optional
        Coordinates of the named dims, as ArviZ takes them.
    sample_stats : dict, optional
        For a dict source: arrays with the same leading axes, which become the ``sample_stats`` group.
    dims : dict, optional
        For a dict source: the dims of each site (default as above).

    Returns
    -------
    xarray.DataTree
        The run with ``posterior`` (and ``sample_stats``) groups, its dims named.
    """
    import arviz as az

    from ..models import CNN_DIMS, DIMS as MODEL_DIMS
    from ..observables import DIMS as OBS_DIMS

    if isinstance(source, dict):
        groups = {"posterior": {k: np.asarray(v) for k, v in source.items()}}
        post = groups["posterior"]
        if dims is None and "w" in post and "v" in post and post["v"].ndim == post["w"].ndim + 1:
            dims = CNN_DIMS  # v (D, C, n_p) of the convolutional network
        named = {**MODEL_DIMS, **OBS_DIMS, **(dims or {})}
        if sample_stats is not None:
            groups["sample_stats"] = {k: np.asarray(v) for k, v in sample_stats.items()}
        return az.from_dict(groups, dims={k: v for k, v in named.items() if k in groups["posterior"]}, coords=coords)
    named = {**_plate_dims(source, MODEL_DIMS), **OBS_DIMS, **(dims or {})}
    return az.from_numpyro(source, dims=named, coords=coords)


def _plate_dims(mcmc, default: dict) -> dict:
    """The dims of the model's sites named by its plates, as ArviZ infers them (it does not where it is given
    ``dims``, which the recorded observables need); ``default`` where the model cannot be traced."""
    try:
        from arviz_base.io_numpyro import infer_dims

        return infer_dims(mcmc.sampler.model, mcmc._args, mcmc._kwargs)
    except Exception:  # an older ArviZ, or a kernel without a model (a potential_fn)
        return default


def _observable_draws(source, fit, X_test, Y_test) -> dict:
    """{"eps_g": (chain, draw), "overlap": (chain, draw, D, D)} from samples, a DataTree or MCMC."""
    from .. import observables

    if hasattr(source, "get_samples"):  # numpyro MCMC
        source = source.get_samples(group_by_chain=True)
    if not isinstance(source, dict):  # DataTree or Dataset
        post = source["posterior"] if "posterior" in getattr(source, "children", {}) else source
        source = {k: np.asarray(post[k].values) for k in post.data_vars}
    samples = {k: np.asarray(v) for k, v in source.items()}
    if "eps_g" in samples and "overlap" in samples:
        eps, ov = samples["eps_g"], samples["overlap"]
        if eps.ndim == 1:
            eps, ov = eps[None], ov[None]
        return {"eps_g": eps, "overlap": ov}
    if "w" in samples and "v" in samples:
        if X_test is None or Y_test is None:
            raise ValueError("the samples hold weights: give X_test and Y_test to compute the generalization loss")
        batch = 2 if samples["w"].ndim == 4 else 1
        fn = observables.default(X_test, Y_test, fit.activation)
        out = observables.evaluate(fn, {k: v for k, v in samples.items() if k in ("w", "v", "b", "c")}, batch_dims=batch)
        out = {k: np.asarray(v) for k, v in out.items()}
        return out if batch == 2 else {k: v[None] for k, v in out.items()}
    raise ValueError(f"found sites {sorted(samples)}; need 'eps_g' and 'overlap' (recorded observables) or 'w' and 'v'")


def chain_starts(source) -> list | None:
    """The kind of start of each chain (:mod:`renormpp.infer.starts`), where a DataTree or Dataset records it (the
    ``start`` coordinate along ``chain`` that ``renormpp run`` writes); None otherwise."""
    if isinstance(source, dict) or hasattr(source, "get_samples"):
        return None
    post = source["posterior"] if "posterior" in getattr(source, "children", {}) else source
    return [str(k) for k in post["start"].values] if "start" in post.coords else None


def _sampler_stats(source) -> tuple[dict | None, str | None]:
    """The sampler statistics and a description of the sampler, where ``source`` has them."""
    if hasattr(source, "get_samples"):  # numpyro MCMC: the extra fields it collected
        extra = source.get_extra_fields(group_by_chain=True)
        stats = {k: np.asarray(extra[k]) for k in ("accept_prob", "diverging") if k in extra}
        return stats or None, describe_sampler(source.sampler, source.last_state)
    groups = getattr(source, "children", {})
    if "sample_stats" in groups:
        st = source["sample_stats"]
        return {k: np.asarray(st[k].values) for k in ("accept_prob", "diverging") if k in st.data_vars}, None
    return None, None
