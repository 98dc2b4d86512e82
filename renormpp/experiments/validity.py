r"""The validity map (``renormpp validity-map``): where each theory holds within 1% and 5%, and where it fails.

Every point is a finite network sampled from the exact posterior by ``renormpp run`` (resumable: stop the command
and run it again; each series is a sweep in ``OUT/runs/SERIES``), compared with every theory method of
:data:`renormpp.theory.METHODS` and with the theories beyond kernel renormalization (:data:`BEYOND`: the
adaptive-kernel theory :func:`renormpp.theory.adaptive_kernel.solve` and the shared-field theory
:func:`renormpp.theory.shared_field.solve`, erf networks), and judged by the hidden-kernel diagnosis (:mod:`renormpp.diagnostics.kernel`). Two families of series:

* **the map**: synthetic data, P fixed, a grid of loads :math:`\alpha = P/N_1` times input dimensions :math:`N_0/P`
  (small :math:`N_0/P`: few directions, which a finite network can learn), linear and one-hidden-layer erf teachers,
  erf and ReLU networks (ReLU: the two-order-parameter theory of :mod:`renormpp.theory.nonodd`; no 1/N1 correction);
* **real data** (full size): MNIST (0, 1) at P = 200 and 1000, and the supplement's randomly projected MNIST
  (:func:`renormpp.datasets.projected_mnist`, ReLU(Πx/√784)) at :math:`N_0 = 12^2` and :math:`28^2`, P = 1000: its
  discrepancy figure, :math:`\Delta = |\epsilon_{g,MC} - \epsilon_{g,TH}|/\epsilon_{g,TH}` (Eq. (S-discrep)) against
  :math:`N_1`.

Sampling stops on accuracy (``run.target_error``: the relative error of the mean of :math:`\epsilon_g`) or after
``run.max_seconds``, whichever comes first; the error bars say what was reached. A theory **holds within x%** at a
point where :math:`|\Delta| \le x\%` with an error bar that holds and is at most x%/2; it **fails** where
:math:`|\Delta| - 2\sigma > x\%`; otherwise the point does not decide (:func:`judge`).

Outputs (``OUT/``): ``validity.csv`` (one row per point and theory: MC, prediction, Δ, z, verdicts at 1% and 5%, the
kernel diagnosis), ``validity.md`` (the tables and the statement of where each theory holds), ``map_*.png`` (one
heatmap per teacher and network), ``discrepancy.png`` (real data: |Δ| against N1).
"""
from __future__ import annotations

import json
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from threadpoolctl import threadpool_limits

from ..theory import THEORIES as THEORY_RECORDS
from . import runner
from .config import ConfigError
from .report import load_sweep, markdown_table
from .signals import Interrupted
from .store import write_atomic

SIZES = ("full", "quick", "smoke")
#: the tolerances of the statement "holds within x%"
TOLERANCES = (0.01, 0.05)
#: the theories beyond kernel-shape renormalization solved at each point from its data (seconds to minutes each):
#: every record of renormpp.theory.THEORIES whose cost is not the kernel's spectrum and that needs no choice the map
#: does not make (the specialists' number k): today the adaptive-kernel and the shared-field theories.
BEYOND = tuple(name for name, t in THEORY_RECORDS.items() if t.cost != "spectrum" and not t.required)
#: the options the map solves a theory of BEYOND with (the shared field's are its size's, :class:`Size`)
BEYOND_OPTIONS = {"adaptive_kernel": dict(maxiter=60)}  # it converges in 20-40 outer iterations where it converges at all
#: the theories compared at every point: the methods of renormpp.theory.METHODS that the report shows, then BEYOND
COMPARED = ("exact", "corrected", "infinite_width", *BEYOND)
#: how the shared-field theory averages over (F1): its neurons moved there by MCMC (the Gaussian proposal's importance
#: weights, "fitted", were 18% off at MNIST alpha = 2 with a Pareto k below 0.7)
SHARED_FIELD_PROPOSAL = "mcmc"
#: the label kept in each row of shared_field.json (the average over (F1) and how the field is solved on it): a row
#: of another ("mcmc": the earlier rounds of reweighted populations; none: the fitted proposal; "mcmc, averaged
#: moments": before the control variate was kept out where it makes (F2) or (F3) indefinite; "mcmc, averaged
#: moments, guarded control": before the solve's stop asked for a Monte Carlo error below tol too) is solved again
SHARED_FIELD_METHOD = "mcmc, averaged moments, guarded control, Monte Carlo error"


@dataclass(frozen=True)
class Size:
    """One size of the map: the synthetic grid, the sampling budget per point and the real-data series."""

    P: int
    alphas: tuple
    ratios: tuple
    teachers: tuple
    activations: tuple
    num_samples: int
    max_seconds: float | None
    target: float | None
    P_test: int = 500
    #: the shared-field theory's neurons (10 000 left the linear teacher at N0/P = 0.1, alpha = 2 unsettled with
    #: Pareto k 0.74; 40 000 converge there, k 0.57)
    neurons: int = 40_000
    #: the most iterations of the shared-field theory's stochastic approximation, a cap (past 80 its solve stops
    #: where its residuals and their Monte Carlo error are below the tolerance): its default, 80, stops short on
    #: MNIST P = 200 at alpha = 2 and 4, where the residuals cross it at 90-120 (docs/validity.md)
    maxiter: int = 160
    #: real-data series: ``{name: (data table, P, N1 list, max_seconds, target)}``
    real: dict = field(default_factory=dict)


_P1000_WIDTHS = [100, 250, 500, 1000, 2000]  # alpha = 10, 4, 2, 1, 0.5 (the paper's Fig. 1 grid, renormpp paper)
GRIDS = {
    # the map: P = 200, alpha 0.5-4, N0/P 0.1-4, two teachers, two networks (64 points, at most two minutes of
    # sampling each) and the real data (35 points at P = 1000 and 200, at most ten and five minutes each)
    "full": Size(P=200, alphas=(0.5, 1, 2, 4), ratios=(0.1, 0.25, 1.0, 4.0), teachers=("linear", "erf_1hl"),
                 activations=("erf", "relu"), num_samples=100_000, max_seconds=120.0, target=0.003,
                 real={"mnist-P200": ({"name": "mnist", "classes": [0, 1]}, 200, [20, 50, 100, 200, 400], 300.0,
                                      0.003),
                       "projected-N0=144": ({"name": "projected_mnist", "N0": 144, "classes": [0, 1]}, 1000,
                                            _P1000_WIDTHS, 600.0, 0.005),
                       "projected-N0=784": ({"name": "projected_mnist", "N0": 784, "classes": [0, 1]}, 1000,
                                            _P1000_WIDTHS, 600.0, 0.005),
                       "mnist-P1000": ({"name": "mnist", "classes": [0, 1]}, 1000, _P1000_WIDTHS, 600.0, 0.005)}),
    # 2 x 2 grid, erf and ReLU on a linear teacher, P = 40, short runs (about two minutes on 2 cores): the shape of
    # the result, with wide error bars
    "quick": Size(P=40, alphas=(1, 4), ratios=(0.25, 2.0), teachers=("linear",), activations=("erf", "relu"),
                  num_samples=300, max_seconds=None, target=None, neurons=10_000, maxiter=80),
    # the pipeline end to end in seconds (the tests): the numbers mean nothing (8 000 neurons: the shared field's
    # Monte Carlo error below its tolerance in 80 iterations; 2 000 left 0.016, 6 000 0.009)
    "smoke": Size(P=24, alphas=(2,), ratios=(1.0,), teachers=("linear",), activations=("erf",), num_samples=40,
                  max_seconds=None, target=None, P_test=40, neurons=8_000, maxiter=80),
}


class UnknownSize(ConfigError):
    """A size or series that :data:`GRIDS` does not have."""


def _grid(size: str) -> Size:
    if size not in GRIDS:
        raise UnknownSize(f"unknown size {size!r}; choose one of {', '.join(SIZES)}")
    return GRIDS[size]


def default_out(size: str) -> Path:
    return Path(f"renormpp-validity-{size}")


def _config(data: dict, P: int, P_test: int, N1: list, activation: str, g: Size, out: Path, *, max_seconds,
            target) -> dict:
    sampler = {"kind": "kinetic", "num_samples": g.num_samples}
    run = {"out": str(out), "seeds": [0]}
    if target is not None:
        run["target_error"] = {"eps_g": target}
    if max_seconds is not None:
        run["max_seconds"] = max_seconds
    if g.target is None:  # the quick and smoke sizes: a fixed, short run
        sampler.update(num_warmup=max(20, g.num_samples // 3))
        run["progress"] = False
        if g.num_samples < 100:
            sampler["inner_steps"] = 4
    return {"data": {**data, "P": P, "P_test": P_test, "seed": 0},
            "model": {"N1": sorted(N1), "T": 0.01, "lambda0": 1.0, "lambda1": 1.0, "activation": activation},
            "sampler": sampler, "run": run}


def configs(size: str = "full", out=None) -> dict[str, dict]:
    """``{series: renormpp run config}`` of the map at ``size``, writing below ``out``: the synthetic columns
    (``TEACHER_ACTIVATION_N0=rP``, one sweep over N1 each), then the real-data series (cheapest first).

    Parameters
    ----------
    size : {"full", "quick", "smoke"}
        The size of the map (:data:`SIZES`).
    out : str or path, optional
        The folder the runs write below.

    Returns
    -------
    dict
        ``{series: config}``.
    """
    g = _grid(size)
    out = Path(out if out is not None else default_out(size))
    cfgs = {}
    for teacher in g.teachers:
        for activation in g.activations:
            for ratio in g.ratios:
                name = f"{teacher}_{activation}_N0={ratio:g}P"
                data = {"name": "synthetic", "N0": max(1, round(ratio * g.P)), "D": 2, "teacher": teacher}
                N1 = sorted({max(2, round(g.P / a)) for a in g.alphas})
                cfgs[name] = _config(data, g.P, g.P_test, N1, activation, g, out / "runs" / name,
                                     max_seconds=g.max_seconds, target=g.target)
    for name, (data, P, N1, seconds, target) in g.real.items():
        cfgs[name] = _config(data, P, 1000, N1, "erf", g, out / "runs" / name, max_seconds=seconds, target=target)
    return cfgs


def run(size: str = "full", out=None, *, executor=None, workers=None, address=None, progress=None,
        only=None) -> Path:
    """Sample (or resume) every series of the map at ``size`` (``only``: these series), then write the tables and
    figures (:func:`write`); returns ``OUT``.

    Parameters
    ----------
    size : {"full", "quick", "smoke"}
        The size of the map (:data:`SIZES`).
    out : str or path, optional
        The output folder.
    executor : str, optional
        Overrides ``run.executor`` (how the points run: in this process, a pool of processes, or Ray).
    workers : int, optional
        Overrides ``run.workers``.
    address : str, optional
        Overrides ``run.address`` (a Ray cluster).
    progress : bool, optional
        Overrides ``run.progress``.
    only : sequence of str, optional
        The series to sample (default: all).

    Returns
    -------
    pathlib.Path
        ``OUT``.
    """
    out = Path(out if out is not None else default_out(size))
    cfgs = configs(size, out)
    if only is not None:
        unknown = sorted(set(only) - set(cfgs))
        if unknown:
            raise UnknownSize(f"no series {', '.join(unknown)} at size {size}; its series are {', '.join(cfgs)}")
        cfgs = {k: v for k, v in cfgs.items() if k in only}
    for name, cfg in cfgs.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # short runs are flagged in the tables (reliable = False)
                runner.run(cfg, executor=executor, workers=workers, address=address, progress=progress)
        except Interrupted as err:
            raise Interrupted(f"{err}; the whole map: renormpp validity-map --size {size} --out {out}") from None
    return write(out, size)



# ---- the table ---------------------------------------------------------------------------------------------------
def judge(delta: float, sigma: float, reliable: bool, tol: float) -> str:
    """Does a theory hold within ``tol`` (relative) at a point? ``delta``: (MC - theory)/|theory|, ``sigma``: the MC
    error relative to the theory. "holds": |delta| <= tol with an error bar that holds and is at most tol/2;
    "fails": |delta| - 2 sigma > tol (with a reliable error bar); "undecided" otherwise (no prediction, or an error
    bar too wide or not holding)."""
    if not (np.isfinite(delta) and np.isfinite(sigma)) or not reliable:
        return "undecided"
    if abs(delta) <= tol and sigma <= tol / 2:
        return "holds"
    if abs(delta) - 2 * sigma > tol:
        return "fails"
    return "undecided"


def _row(fit, data, reason: str) -> dict:
    if not fit.converged:
        return {"converged": False, "reason": reason}
    return {"eps_g": float(fit.generalization_error(data.X_test, data.Y_test)),
            "overlap": [float(x) for x in np.diag(fit.readout_overlap)], "converged": True, "reason": ""}


def _solve_beyond(theory: str, data, model: dict, widths, grid: Size, checkpoints=None) -> dict:
    """``{N1: row}``, eps_g and the diagonal overlaps of a theory of :data:`BEYOND` at ``widths``: the adaptive theory
    solves each width alone; the shared-field theory solves them widest first, each continued from the last converged
    (:func:`renormpp.theory.shared_field.continued`: from the exact theory's field it degenerates where continuation
    converges; with the ``neurons`` and ``maxiter`` of the map's size ``grid``). ``widths`` are a series' planned
    widths, so a point's row does not depend on which points were solved before it. ``checkpoints``: a folder where
    the shared-field solves save their progress (:func:`renormpp.theory.shared_field.solve`'s ``checkpoint``)."""
    from ..theory import Problem, shared_field

    record = THEORY_RECORDS[theory]
    args = dict(T=model["T"], lambda0=model["lambda0"], lambda1=model["lambda1"], activation=model["activation"],
                depth=model.get("depth", 1))
    reason = record.applies(Problem(data.X, data.Y, N1=widths[0], **args))
    if reason:
        return {N1: {"reason": f"the {theory.replace('_', '-')} theory {reason}"} for N1 in widths}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a non-converging iteration warns as it goes: its verdict says so
        if theory != "shared_field":
            fits = {N1: record.solve(Problem(data.X, data.Y, N1=N1, **args), **BEYOND_OPTIONS.get(theory, {}))
                    for N1 in widths}
            return {N1: _row(f, data, f"did not converge: {f.reason}") for N1, f in fits.items()}
        del args["depth"]
        return {N1: _row(f, data, f"did not converge: {f.reason}") | {"proposal": SHARED_FIELD_METHOD,
                                                                       "maxiter": grid.maxiter}
                for N1, f in shared_field.continued(data.X, data.Y, widths, maxiter=grid.maxiter,
                                                     proposal=SHARED_FIELD_PROPOSAL, neurons=grid.neurons,
                                                     checkpoints=checkpoints, **args)}


def _beyond(theory: str, data, model: dict, N1: int, cache: dict, series: str, path: Path, grid: Size,
            compute: bool = True) -> dict:
    """The row of :func:`_solve_beyond` at width ``N1`` of ``series``, kept in ``cache`` and saved to ``path`` at once
    (seconds at P = 200, minutes at P = 1000 a point); the shared-field theory solves the series' widths together,
    each width's solve saved as it goes in ``<path's stem>_checkpoints/<series>`` (an interrupted map continues it;
    removed once the rows are kept). A kept shared-field row of another method, or of another number of iterations
    (rows without one: the solve's default then, 80), is solved again."""
    key = f"{series}/N1={N1}"
    if theory == "shared_field" and key in cache and (cache[key].get("proposal", "fitted") != SHARED_FIELD_METHOD
                                                      or cache[key].get("maxiter", 80) != grid.maxiter):
        del cache[key]  # solved with another average over (F1) (rows without one: the fitted proposal's): again
    if key not in cache:
        if not compute:
            return {"reason": f"not computed yet (the map's tables were written without the {theory} theory)"}
        widths = model["N1"] if theory == "shared_field" else [N1]
        folder = path.parent / f"{path.stem}_checkpoints" / series
        rows = _solve_beyond(theory, data, model, widths, grid, checkpoints=folder if theory == "shared_field" else None)
        cache.update({f"{series}/N1={n}": row for n, row in rows.items()})
        write_atomic(path, json.dumps(cache, indent=1))
        shutil.rmtree(folder, ignore_errors=True)
    return cache[key]


def _kernel(folders) -> dict:
    """The hidden-kernel diagnosis of a point (its first seed's kernel.json), flattened for the table."""
    for f in folders:
        path = Path(f) / "kernel.json"
        if path.exists():
            k = json.loads(path.read_text())
            return {"kernel_holds": bool(k["holds"]), "kernel_deviation": float(k["deviation"]),
                    "kernel_r1": float(k["r"][0]), "kernel_r1_theory": float(k["r_theory"][0]),
                    "alignment": float(k["alignment"]), "alignment_post": float(k["alignment_post"]),
                    "eps_g_oracle": float(k["oracle_eps_g"])}
    return {}


def table(out, size: str = "full", beyond: bool = True) -> "pd.DataFrame":
    """One row per finished point, theory and quantity (``eps_g`` and the diagonal overlaps ``overlap[a,a]``) of
    the map in ``out``: MC mean and error, the prediction, Delta = (MC - theory)/|theory| (signed), z, whether the
    error bar holds, the verdicts at 1% and 5% (:func:`judge`), the point's hidden-kernel diagnosis and where it lies
    (series, teacher, activation, N0, P, N1, alpha, N0/P). Series not sampled yet are left out. The theories of
    :data:`BEYOND` are solved once per point and kept in ``out/<theory>.json`` (seconds to minutes a point);
    ``beyond=False`` uses only what is kept there.

    Parameters
    ----------
    out : str or path
        The map's folder.
    size : {"full", "quick", "smoke"}
        The size of the map (:data:`SIZES`).
    beyond : bool, default True
        Solve the theories of :data:`BEYOND` where they are not kept yet.

    Returns
    -------
    pandas.DataFrame
    """
    import pandas as pd

    out = Path(out)
    paths = {th: out / f"{th}.json" for th in BEYOND}
    caches = {th: json.loads(p.read_text()) if p.exists() else {} for th, p in paths.items()}
    rows = []
    with threadpool_limits(limits=1, user_api="blas"):  # many BLAS threads on busy cores: up to 80x slower
        for name, cfg in configs(size, out).items():
            rows += _rows(name, cfg, caches, paths, beyond, _grid(size))
    return pd.DataFrame(rows)


def _rows(name: str, cfg: dict, caches: dict, paths: dict, beyond: bool, grid: Size) -> list[dict]:
    """The rows of one series (none where it has not started)."""
    folder = Path(cfg["run"]["out"])
    if not (folder / "config.toml").exists() or not any((folder / "points").glob("*/result.json")):
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short runs: flagged in the table (reliable = False)
        sweep = load_sweep(folder)
    model, data_cfg = cfg["model"], cfg["data"]
    where = dict(series=name, family="synthetic" if data_cfg["name"] == "synthetic" else "real",
                 teacher=data_cfg.get("teacher", data_cfg["name"]), activation=model["activation"],
                 N0=int(sweep.data.X.shape[1]), P=int(data_cfg["P"]))
    where["group"] = (f"{where['teacher']} teacher, {where['activation']} network" if where["family"] == "synthetic"
                      else name)
    rows = []
    for ds in sweep.pooled:
        N1 = int(ds.attrs["N1"])
        point = dict(where, N1=N1, alpha=where["P"] / N1, ratio=where["N0"] / where["P"], draws=int(ds.attrs["draws"]),
                     **_kernel(f for r, f in sweep.done if r.get("N1") == N1))
        solved = {th: _beyond(th, sweep.data, model, N1, caches[th], name, paths[th], grid, beyond)
                  for th in BEYOND}
        for q in [str(x) for x in ds.quantity.values]:
            diagonal = q.startswith("overlap[") and q[8] == q[10]
            if q != "eps_g" and not diagonal:
                continue
            e = ds.sel(quantity=q)
            mc, err, reliable = float(e.mc_mean), float(e.mc_error), bool(e.reliable)
            preds = {th: float(e.prediction.sel(theory=th)) for th in COMPARED if th not in BEYOND}
            preds.update({th: np.nan if not r.get("converged") else r["eps_g"] if q == "eps_g" else
                          r["overlap"][int(q[8])] for th, r in solved.items()})
            for th, pred in preds.items():
                with np.errstate(divide="ignore", invalid="ignore"):
                    delta, sigma = (mc - pred) / abs(pred), err / abs(pred)
                rows.append(dict(point, quantity=q, theory=th, mc_mean=mc, mc_error=err, reliable=reliable,
                                 prediction=pred, delta=delta, z=(mc - pred) / err,
                                 **{f"within_{round(100 * t)}%": judge(delta, sigma, reliable, t)
                                    for t in TOLERANCES}))
    return rows


# ---- the outputs -------------------------------------------------------------------------------------------------
_MARK = {"holds": "✓", "fails": "✗", "undecided": "?"}


def _mark(row) -> str:
    """✓✓ within 1%, ✓ within 5% (not decided at 1%), ✗ fails at 5%, ? otherwise (no verdict)."""
    if row["within_1%"] == "holds":
        return "✓✓"
    if row["within_5%"] == "holds":
        return "✓" + ("" if row["within_1%"] == "fails" else "?")
    return _MARK[row["within_5%"]]


def _cell(row) -> str:
    return "–" if not np.isfinite(row["prediction"]) else f"{100 * row['delta']:+.1f}% {_mark(row)}"


def holds_table(t) -> "pd.DataFrame":
    """Per group of points (a teacher and network of the map, or a real-data series) and theory, on eps_g: at how
    many points the theory holds within 1% and 5%, and fails at 5% (:func:`judge`); the rest do not decide."""
    import pandas as pd

    eps = t[(t.quantity == "eps_g") & np.isfinite(t.prediction)]
    return pd.DataFrame([{"points": group, "theory": th, "n": len(g),
                          "within 1%": int((g["within_1%"] == "holds").sum()),
                          "within 5%": int((g["within_5%"] == "holds").sum()),
                          "fails at 5%": int((g["within_5%"] == "fails").sum()),
                          "median |Δ|": f"{100 * g.delta.abs().median():.1f}%"}
                         for (group, th), g in eps.groupby(["group", "theory"], sort=False)])


def _where(g) -> str:
    """The points of ``g``: 'alpha a: N0/P r1, r2; ...' on the map, 'N1 = n1, n2' on a real-data series."""
    if g.empty:
        return "no point"
    if g.family.iloc[0] == "real":
        return "N1 = " + ", ".join(str(n) for n in sorted(g.N1))
    return "; ".join(f"α = {a:g}: N0/P = {', '.join(f'{r:g}' for r in sorted(h.ratio))}"
                     for a, h in g.groupby("alpha"))


def statement(t) -> list[str]:
    """Where each theory holds within 1% and 5% on eps_g, in words (one line per theory and group of points)."""
    eps = t[(t.quantity == "eps_g") & np.isfinite(t.prediction)]
    lines = []
    for th in COMPARED:
        for group, g in eps[eps.theory == th].groupby("group", sort=False):
            within = {tol: _where(g[g[f"within_{round(100 * tol)}%"] == "holds"]) for tol in TOLERANCES}
            n = f"{len(g)} point{'s' * (len(g) != 1)}"
            lines.append(f"* **{th}**, {group} ({n}): within 1% at {within[0.01]}; within 5% at {within[0.05]}; "
                         f"fails by more than 5% at {_where(g[g['within_5%'] == 'fails'])}.")
    return lines


def markdown(t, size: str, expected: int) -> str:
    """validity.md: the statement, the counts, the map's cells and the real-data series."""
    eps = t[t.quantity == "eps_g"]
    points = eps.drop_duplicates(["series", "N1"])
    lines = [f"# The validity map ({size} size)", "",
             f"{len(points)} of {expected} points sampled (`renormpp validity-map --size {size}` resumes the rest). "
             "Every point is a finite network sampled from the exact posterior (default sampler, stop on accuracy or "
             "time), compared on the generalization error ε_g with each theory: Δ = (MC − theory)/|theory|, signed. "
             "A theory **holds within x%** where |Δ| ≤ x% with an error bar that holds and is at most x%/2; it "
             "**fails** where |Δ| − 2σ > x%. Marks: ✓✓ within 1%, ✓ within 5%, ✓? within 5% (1% undecided), "
             "✗ fails at 5%, ? undecided; – the theory does not apply (the 1/N1 correction, the adaptive and the "
             "shared-field theories for ReLU), did not converge or was not computed yet (the adaptive and the "
             "shared-field theories).", "",
             "## Where each theory holds (ε_g)", "", *statement(t), "",
             markdown_table(holds_table(t)), ""]
    syn = eps[eps.family == "synthetic"]
    for (teacher, act), g in syn.groupby(["teacher", "activation"], sort=False):
        alphas = sorted(g.alpha.unique())
        lines += [f"## {teacher} teacher, {act} network, P = {g.P.iloc[0]}", "",
                  "Each cell: exact / corrected / infinite width / adaptive / shared field, Δ on ε_g; K: the hidden-kernel "
                  "diagnosis (holds: the posterior kernel is the theory's within errors; r1: its weight along K's "
                  "top eigenvector, measured / exact theory).", "",
                  "| N0/P | " + " | ".join(f"α = {a:g}" for a in alphas) + " |",
                  "|---|" + "---|" * len(alphas)]
        for ratio, h in g.groupby("ratio"):
            cells = []
            for a in alphas:
                c = h[h.alpha == a].set_index("theory")
                if c.empty:
                    cells.append("not sampled")
                    continue
                text = " / ".join(_cell(c.loc[th]) for th in COMPARED)
                k = c.iloc[0]
                if "kernel_holds" in c and np.isfinite(k.get("kernel_r1", np.nan)):
                    text += (f"; K {'holds' if k.kernel_holds else 'adapted'}, r1 {k.kernel_r1:.2f} / "
                             f"{k.kernel_r1_theory:.2f}")
                cells.append(text)
            lines.append(f"| {ratio:g} | " + " | ".join(cells) + " |")
        lines += ["", f"![map]({_map_name(teacher, act)})", ""]
    real = eps[eps.family == "real"]
    if not real.empty:
        lines += ["## Real data: MNIST (0, 1) and randomly projected MNIST", "",
                  "| series | N1 | α | MC ε_g | exact | corrected | infinite width | adaptive | shared field | "
                  "hidden kernel | ε_g with the measured K_post (oracle) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for (s, n), c in real.groupby(["series", "N1"], sort=False):
            c = c.set_index("theory")
            k = c.iloc[0]
            kern = (f"{'holds' if k.kernel_holds else 'adapted'}, r1 {k.kernel_r1:.2f} / {k.kernel_r1_theory:.2f}, "
                    f"alignment {k.alignment:.3f} → {k.alignment_post:.3f}"
                    if np.isfinite(k.get("kernel_r1", np.nan)) else "–")
            oracle = f"{k.eps_g_oracle:.4g}" if np.isfinite(k.get("eps_g_oracle", np.nan)) else "–"
            lines.append(f"| {s} | {n} | {k.alpha:g} | {k.mc_mean:.4g} ± {k.mc_error:.1g} | "
                         + " | ".join(_cell(c.loc[th]) for th in COMPARED) + f" | {kern} | {oracle} |")
        lines += ["", "![discrepancy](discrepancy.png)", ""]
    return "\n".join(lines) + "\n"


def _map_name(teacher: str, activation: str) -> str:
    return f"map_{teacher}_{activation}.png"


def write(out, size: str = "full", t=None, beyond: bool = True) -> Path:
    """validity.csv, validity.md and the figures in ``out`` from the points sampled so far (``beyond``: solve the
    theories of :data:`BEYOND` where they are not kept yet, :func:`table`); returns ``out``."""
    import matplotlib.pyplot as plt

    from .. import plots

    out = Path(out)
    t = table(out, size, beyond) if t is None else t
    if t.empty:
        raise runner.SweepError(f"no point of the validity map in {out} has finished: nothing to write")
    write_atomic(out / "validity.csv", t.to_csv(index=False))
    expected = sum(len(c["model"]["N1"]) for c in configs(size, out).values())
    write_atomic(out / "validity.md", markdown(t, size, expected))
    syn = t[t.family == "synthetic"]
    for (teacher, act), g in syn.groupby(["teacher", "activation"], sort=False):
        drawn = [th for th in COMPARED if np.isfinite(g[g.theory == th].prediction).any()]  # none for ReLU: no panel
        fig = plots.validity_map(g, theories=drawn, title=f"{teacher} teacher, {act} network, P = {g.P.iloc[0]}")
        plots.save(fig, out / _map_name(teacher, act))
        plt.close(fig)
    if (t.family == "real").any():
        fig = plots.discrepancy_vs_N1(t[t.family == "real"], theories=("exact", "corrected", *BEYOND))
        plots.save(fig, out / "discrepancy.png")
        plt.close(fig)
    return out
