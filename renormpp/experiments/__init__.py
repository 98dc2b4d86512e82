"""Experiments end to end: a config names the data, the model, the sampler and the sweep over N1 and seeds;
:func:`run` computes the theory, samples finite networks (resumably), compares them and writes a report.

* :func:`run` / ``renormpp run CONFIG.toml``: run or resume a sweep (see :mod:`.config` for the format);
* :func:`report` / ``renormpp report OUTDIR``: rewrite the report from the finished points;
* :mod:`.executors`: in-process (default), a local process pool, or Ray (``renormpp[ray]``).
"""
from .config import ConfigError, dumps, load, points, resolve
from .point import Interrupted, run_point
from .report import report
from .runner import SweepError, run

__all__ = ["ConfigError", "Interrupted", "SweepError", "dumps", "load", "points", "report", "resolve", "run",
           "run_point"]
