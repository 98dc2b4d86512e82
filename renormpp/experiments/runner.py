"""Run a sweep: every (N1, seed) point of a config through an executor, then the report."""
from __future__ import annotations

import json
from pathlib import Path

from . import config as config_mod
from . import executors, stages
from .point import run_point
from .signals import STOP, Interrupted, stop_on_sigterm
from .store import PointStore, check_same_config, write_atomic


class SweepError(RuntimeError):
    """Some points of a sweep failed; the others finished and are in the report."""


def _job(job):
    """Run one point (in this process, a pool worker or a Ray task)."""
    p, folder, progress = job
    if STOP.is_set():
        raise Interrupted(f"{p.name}: not started (the run was stopped)")
    with stop_on_sigterm():
        return run_point(p, folder, progress=progress)


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
    :class:`~renormpp.experiments.signals.Interrupted` is raised.
    """
    from tqdm.auto import tqdm

    from .report import report

    cfg = resolve_input(config, out=out)
    overrides = dict(executor=executor, workers=workers, address=address, progress=progress)
    cfg = config_mod.resolve(cfg.model_dump(exclude_none=True) | {
        "run": cfg.run.model_dump(exclude_none=True) | {k: v for k, v in overrides.items() if v is not None}})
    outdir = Path(cfg.run.out).resolve()
    cfg.run.out = str(outdir)
    check_same_config(outdir / "config.toml", cfg, ignore=config_mod.RUN_ONLY + ("model.N1", "run.seeds", "run.out"),
                      remedy="choose another run.out (only N1, seeds and the run options may change when a run is "
                             "resumed or extended)")
    stages.load_data(cfg.data)  # fail now, not in every point, when the data cannot be loaded
    outdir.mkdir(parents=True, exist_ok=True)
    write_atomic(outdir / "config.toml", cfg.dumps())

    r = cfg.run
    pool = executors.get(r.executor, workers=r.workers, address=r.address)
    in_process = r.executor == "inprocess"
    points = cfg.points()
    todo = [(p, str(outdir / "points" / p.name), r.progress and in_process) for p in points
            if not PointStore(outdir / "points" / p.name).finished]
    failed, stopped = {}, []
    STOP.clear()
    bar = tqdm(total=len(points), initial=len(points) - len(todo), desc="points", unit="point",
               disable=not r.progress, dynamic_ncols=True)
    try:
        with stop_on_sigterm():
            for job, result, err in pool.map(_job, todo):
                name = job[0].name
                if isinstance(err, Interrupted):
                    stopped.append(name)
                elif err is not None:
                    if isinstance(err, config_mod.ConfigError):
                        raise err
                    failed[name] = f"{type(err).__name__}: {err}"
                else:
                    bar.update(1)
                    bar.set_postfix_str(f"{name}: eps_g {result['eps_g']:.4g} ± {result['eps_g_error']:.2g}")
    finally:
        bar.close()
    if any(PointStore(outdir / "points" / p.name).finished for p in points):
        report(outdir)
    if stopped or STOP.is_set():
        raise Interrupted(f"stopped; {len(stopped)} point(s) saved their progress. Resume with: "
                          f"renormpp run {outdir}")
    if failed:
        (outdir / "failed.json").write_text(json.dumps(failed, indent=1))
        raise SweepError(f"{len(failed)} of {len(points)} points failed (the rest are in the report):\n"
                         + "\n".join(f"  {k}: {v}" for k, v in failed.items()))
    return outdir
