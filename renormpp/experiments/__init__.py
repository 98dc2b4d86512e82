"""Experiments end to end: a config names the data, the model, the sampler and the sweep over N1 and seeds;
:func:`run` computes the theory, samples finite networks (resumably), compares them and writes a report.

Layers: :mod:`.config` (typed configs), :mod:`.stages` (data, theory, sampling, outputs of one point),
:mod:`.samplers` (one record per ``sampler.kind``), :mod:`.store` (what is on disk: atomic writes, the finished marker, config checks, checkpoints), :mod:`.signals`
(SIGTERM), :mod:`.point` (one point), :mod:`.executors` (where points run), :mod:`.runner` (a sweep) and
:mod:`.report`; :mod:`.paper` (the paper's figures, each from one or more sweeps).

* :func:`run` / ``renormpp run CONFIG.toml``: run or resume a sweep;
* :func:`report` / ``renormpp report OUTDIR``: rewrite the report from the finished points;
* :func:`paper.make` / ``renormpp paper FIGURE``: a figure of the paper, its sweeps run (or resumed) and drawn.
"""
from .config import Config, ConfigError, PointConfig, dumps, load, resolve
from . import paper, samplers
from .point import run_point
from .report import report
from .runner import SweepError, run
from .signals import Interrupted, NotStarted
from .store import CheckpointError, FolderInUse

__all__ = ["CheckpointError", "Config", "ConfigError", "FolderInUse", "Interrupted", "NotStarted", "PointConfig", "SweepError", "dumps", "load",
           "paper", "report", "resolve", "run", "run_point", "samplers"]
