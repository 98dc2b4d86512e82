"""One point of a sweep (one N1, one seed): the stages in order, into the point's folder.

A point's folder holds, when it is finished:

* ``config.toml``: the resolved config of this point; ``versions.json``: the package versions and machine;
* ``theory.json``: Q*, Q*/lambda1, the generalization error and the solver report for every theory method
  (``applies: false`` where a method does not apply), and under ``beyond`` the record of every other theory of
  ``[theory] methods`` (:mod:`.theories`), solved once: a resumed point reads it back;
* ``observables.nc``: the recorded observables (eps_g, v v^T/N1) per chain and draw, with the sampler's
  statistics, as an ArviZ DataTree in netCDF (``arviz.from_netcdf``);
* ``comparison.csv``, ``comparison.md``, ``comparison.nc``: :func:`renormpp.diagnostics.compare`;
* ``overlaps.png`` (Fig. 2-like), ``mc_analysis.png`` (the supplement's MC analysis of eps_g), ``trace.png``;
* ``sampling_notes.json``: the warnings the sampler gave (over resumptions);
* ``result.json``: a short summary, written last: a point with it is finished and is not recomputed. Its
  ``status`` is ``"failed"`` (with the ``problems``) where the sampler failed its health check
  (:func:`renormpp.diagnostics.sampler_health`): the report lists such a point and does not compare it.

While sampling, ``checkpoint.npz`` (:mod:`.store`) holds the sampler state and every draw so far; a resumed
point continues from it and gives the same draws as an uninterrupted run.
"""
from __future__ import annotations

from . import config as config_mod
from . import stages, theories
from .store import PointStore, check_same_config


def run_point(point: config_mod.PointConfig, folder, *, progress: bool = True) -> dict:
    """Run one point into ``folder`` (see the module docstring), or return its saved result.

    Parameters
    ----------
    point : PointConfig
        The config of one point (one width, one seed).
    folder : str or path
        Where the point's files go.
    progress : bool, default True
        Show a progress bar.

    Returns
    -------
    dict
        The point's result (its ``result.json``).
    """
    store = PointStore(folder)
    store.folder.mkdir(parents=True, exist_ok=True)
    check_same_config(store.folder / "config.toml", point, ignore=config_mod.RUN_ONLY,
                      remedy="use a new run.out folder, or delete that point's folder to recompute it")
    if store.finished:
        return store.result()
    store.write("config.toml", point.dumps())
    store.write_json("versions.json", stages.versions())
    stages.compilation_cache(point.run.compilation_cache)
    label = f"N1={point.model.N1} seed={point.run.seed}"
    data = stages.load_data(point.data, point.model)
    fit = theories.solve_theory(point.model, data)
    solved = theories.solve_beyond(point, data, store.read_json("theory.json"), progress=progress, label=label)
    store.write_json("theory.json", theories.theory_results(fit, data, solved))
    sampled = stages.sample(point, data, store, progress=progress, label=label)
    result = stages.write_outputs(point, store, fit, data, sampled, label, theories.beyond_fits(solved))
    store.finish(result)
    return result
