"""Run a sweep: every (N1, seed) point of a config through an executor, then the report."""
from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
import threading
from pathlib import Path

from . import config as config_mod
from . import executors, point
from .point import STOP, Interrupted


class SweepError(RuntimeError):
    """Some points of a sweep failed; the others finished and are in the report."""


def _on_sigterm(signum, frame):
    STOP.set()
    for child in multiprocessing.active_children():  # process-pool workers: they save and stop too
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGTERM)


@contextlib.contextmanager
def stop_on_sigterm():
    """While inside, SIGTERM makes the running point finish its block of draws, save and stop."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _job(job):
    """Run one point (in this process, a pool worker or a Ray task)."""
    name, cfg, folder, opts = job
    if STOP.is_set():
        raise Interrupted(f"{name}: not started (the run was stopped)")
    with stop_on_sigterm():
        return point.run_point(cfg, folder, **opts)


def resolve_input(config, *, out=None) -> dict:
    """A resolved config from a TOML path, a dict, or the folder of an earlier run (its ``config.toml``)."""
    if isinstance(config, dict):
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

    ``config``: a TOML file, a dict, or the output folder of an earlier run (to resume it). The keyword
    arguments override ``run.out``, ``run.executor``, ``run.workers``, ``run.address`` and ``run.progress``.
    Finished points are not recomputed; an interrupted point continues from its checkpoint. On SIGTERM the
    points in flight save their progress and :class:`~renormpp.experiments.point.Interrupted` is raised.
    """
    from tqdm.auto import tqdm

    from .report import report

    cfg = resolve_input(config, out=out)
    overrides = dict(executor=executor, workers=workers, address=address, progress=progress)
    raw_run = {**cfg["run"], **{k: v for k, v in overrides.items() if v is not None}}
    cfg = config_mod.resolve({**cfg, "run": raw_run})
    opts = cfg["run"]
    outdir = Path(opts["out"]).resolve()
    cfg["run"]["out"] = str(outdir)
    saved = outdir / "config.toml"
    if saved.exists():
        ignore = config_mod.RUN_ONLY + ("model.N1", "run.seeds", "run.out")
        changed = config_mod.differences(config_mod.load(saved), config_mod.normalized(cfg), ignore=ignore)
        if changed:
            raise config_mod.ConfigError(
                f"{outdir} holds a run with a different config ({', '.join(changed)} differ); choose another "
                "run.out (only N1, seeds and the run options may change when a run is resumed or extended)")
    point.load_data(cfg["data"])  # fail now, not in every point, when the data cannot be loaded
    outdir.mkdir(parents=True, exist_ok=True)
    point.write_atomic(saved, config_mod.dumps(cfg))

    pool = executors.get(opts["executor"], workers=opts["workers"], address=opts["address"])
    in_process = opts["executor"] == "inprocess"
    point_opts = dict(progress=opts["progress"] and in_process, checkpoint_every=opts["checkpoint_every"],
                      chunk_seconds=opts["chunk_seconds"])
    jobs = [(name, p, str(outdir / "points" / name), point_opts) for name, p in config_mod.points(cfg)]
    todo = [j for j in jobs if not (Path(j[2]) / "result.json").exists()]
    failed, stopped = {}, []
    STOP.clear()
    bar = tqdm(total=len(jobs), initial=len(jobs) - len(todo), desc="points", unit="point",
               disable=not opts["progress"], dynamic_ncols=True)
    try:
        with stop_on_sigterm():
            for job, result, err in pool.map(_job, todo):
                if isinstance(err, Interrupted):
                    stopped.append(job[0])
                elif err is not None:
                    if isinstance(err, config_mod.ConfigError):
                        raise err
                    failed[job[0]] = f"{type(err).__name__}: {err}"
                else:
                    bar.update(1)
                    bar.set_postfix_str(f"{job[0]}: eps_g {result['eps_g']:.4g} ± {result['eps_g_error']:.2g}")
    finally:
        bar.close()
    if any((outdir / "points" / j[0] / "result.json").exists() for j in jobs):
        report(outdir)
    if stopped or STOP.is_set():
        raise Interrupted(f"stopped; {len(stopped)} point(s) saved their progress. Resume with: "
                          f"renormpp run {outdir}")
    if failed:
        (outdir / "failed.json").write_text(json.dumps(failed, indent=1))
        raise SweepError(f"{len(failed)} of {len(jobs)} points failed (the rest are in the report):\n"
                         + "\n".join(f"  {k}: {v}" for k, v in failed.items()))
    return outdir
