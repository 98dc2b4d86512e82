"""Run a sweep: every (N1, seed) point of a config through an executor, then the report."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

from ..diagnostics import SamplerWarning
from . import config as config_mod
from . import executors, stages
from .point import run_point
from .signals import STOP, Interrupted, NotStarted, stop_on_sigterm
from .store import FolderLock, PointStore, check_same_config, writable_folder, write_atomic


class SweepError(RuntimeError):
    """Some points of a sweep failed; the others finished and are in the report."""


def _job(job):
    """Run one point (in this process, a pool worker or a Ray task)."""
    point, folder, progress = job
    if STOP.is_set():
        raise NotStarted(f"{point.name}: not started (the run was stopped)")
    with stop_on_sigterm():
        return run_point(point, folder, progress=progress)


def resolve_input(config, *, out=None) -> config_mod.Config:
    """A resolved config from a TOML path, a dict, a Config, or the folder of an earlier run (its ``config.toml``)."""
    if isinstance(config, (dict, config_mod.Config)):
        return config_mod.resolve(config, out=out)
    path = Path(config)
    if path.is_dir():
        if not (path / "config.toml").exists():
            raise config_mod.ConfigError(f"{path} is a folder without a config.toml: give a config file or the "
                                         "output folder of an earlier run")
        return config_mod.resolve(config_mod.load(path / "config.toml"), out=out or str(path))
    return config_mod.resolve(config_mod.load(path), out=out)


def run(config, *, out=None, executor: str | None = None, workers: int | None = None, address: str | None = None,
        progress: bool | None = None) -> Path:
    """Run (or resume) the sweep of ``config`` and write its report; returns the output folder.

    ``config``: a TOML file, a dict, a :class:`~renormpp.experiments.config.Config`, or the output folder of an
    earlier run (to resume it). The keyword arguments override ``run.out``, ``run.executor``, ``run.workers``,
    ``run.address`` and ``run.progress``. Finished points are not recomputed; an interrupted point continues from
    its checkpoint. On SIGTERM the points in flight save their progress and
    :class:`~renormpp.experiments.signals.Interrupted` is raised. The folder is locked while the sweep runs: a
    second run on it raises :class:`~renormpp.experiments.store.FolderInUse`.

    Parameters
    ----------
    config : str, path, dict or Config
        A TOML file, a dict, a :class:`~renormpp.experiments.config.Config`, or the output folder of an earlier run
        (to resume it).
    out : str or path, optional
        Overrides ``run.out``, the output folder.
    executor : str, optional
        Overrides ``run.executor`` (how the points run: in this process, a pool of processes, or Ray).
    workers : int, optional
        Overrides ``run.workers``.
    address : str, optional
        Overrides ``run.address`` (a Ray cluster).
    progress : bool, optional
        Overrides ``run.progress``.

    Returns
    -------
    pathlib.Path
        The output folder.

    Raises
    ------
    Interrupted
        On SIGTERM, after the points in flight saved their progress.
    FolderInUse
        Where another run holds the folder.
    """
    cfg = resolve_input(config, out=out)
    overrides = dict(executor=executor, workers=workers, address=address, progress=progress)
    cfg = config_mod.resolve(cfg.model_dump(exclude_none=True) | {
        "run": cfg.run.model_dump(exclude_none=True) | {k: v for k, v in overrides.items() if v is not None}})
    outdir = Path(cfg.run.out).resolve()
    cfg.run.out = str(outdir)
    check_same_config(outdir / "config.toml", cfg, ignore=config_mod.RUN_ONLY + ("model.N1", "run.seeds", "run.out",
                                                                             "scaling.scales"),
                      remedy="choose another run.out (only N1, seeds and the run options may change when a run is "
                             "resumed or extended)")
    stages.load_data(cfg.data, cfg.model)  # fail now, not in every point, when the data cannot be loaded or used
    writable_folder(outdir)
    with FolderLock(outdir):
        write_atomic(outdir / "config.toml", cfg.dumps())
        return _run_points(cfg, outdir)


def _run_points(cfg: config_mod.Config, outdir: Path) -> Path:
    from ..progress import bar as progress_bar
    from .report import report

    r = cfg.run
    pool = executors.get(r.executor, workers=r.workers, address=r.address)
    in_process = r.executor == "inprocess"
    points = cfg.points()
    todo = [(point, str(outdir / "points" / point.name), r.progress and in_process) for point in points
            if not PointStore(outdir / "points" / point.name).finished]
    failed, stopped, not_started = {}, [], []
    STOP.clear()
    bar = progress_bar(total=len(points), initial=len(points) - len(todo), desc="points", unit="point",
                       disable=not r.progress)
    try:
        with stop_on_sigterm():
            for job, result, err in pool.map(_job, todo):
                name = job[0].name
                if isinstance(err, NotStarted):
                    not_started.append(name)
                elif isinstance(err, Interrupted):
                    stopped.append(name)
                elif err is not None:
                    if isinstance(err, config_mod.ConfigError):
                        raise err
                    failed[name] = f"{type(err).__name__}: {err}"
                else:
                    bar.set_postfix_str(f"{name}: eps_g {result['eps_g']:.4g} ± {result['eps_g_error']:.2g}")
                    bar.update(1)
    finally:
        bar.close()
    stores = [PointStore(outdir / "points" / point.name) for point in points]
    reported = any(st.finished for st in stores)
    if reported:
        report(outdir)
    sick = [(st.folder.name, st.result()["problems"]) for st in stores
            if st.finished and st.result().get("status", "ok") != "ok"]
    if sick:
        warnings.warn(f"{len(sick)} of {len(points)} points failed their sampler's health check and are not compared "
                      f"in the report ({outdir / 'report.md'}):\n" + "\n".join(f"  {n}: {why}" for n, why in sick),
                      SamplerWarning, stacklevel=3)
    if stopped or not_started or STOP.is_set():
        saved = (f"{len(stopped)} point(s) in progress saved their progress ({', '.join(stopped)})" if stopped
                 else "no point was in progress")
        waiting = f"; {len(not_started)} had not started" if not_started else ""
        raise Interrupted(f"stopped: {saved}{waiting}. Resume with: renormpp run {outdir}")
    if failed:
        listing = "\n".join(f"  {k}: {v}" for k, v in failed.items())
        try:
            write_atomic(outdir / "failed.json", json.dumps(failed, indent=1))
        except OSError as err:
            listing += f"\n  (failed.json could not be written: {err})"
        rest = ("the rest are in the report, " + str(outdir / "report.md")) if reported else "no point finished"
        raise SweepError(f"{len(failed)} of {len(points)} points failed ({rest}):\n{listing}")
    return outdir
