"""The paper's figures from one command: ``renormpp paper FIGURE [--size quick|full|smoke] [--out DIR]``.

Each figure is drawn from one or more *series*, and each series is a sweep of ``renormpp run`` (a config printable
with ``--print-config``): it resumes, extends, checkpoints and runs on the process pool or Ray like any other run.
The series live in ``OUT/runs/NAME`` and figures that share a series (the supplement's overlap figure reuses the
MNIST D = 3 sweep of Fig. 1b and the CIFAR-10 D = 4 sweep of Fig. 1c) share its folder: run them with one ``--out``
and it is sampled once. Each figure writes ``OUT/FIGURE/``: the figure as PNG and PDF in the paper's layout (each
theory method in its line style of :data:`renormpp.theory.METHODS`: exact solid, one-loop dashed, infinite width
dot-dashed, 1/N1-corrected dotted; MC points with error bars), ``data.csv`` (theory and MC at
every sampled width, Delta and z), ``theory.csv`` (the theory curves) and ``summary.md``.

Sizes (:data:`SIZES`):

* ``full``: the paper's settings, P = P_test = 1000, T = 0.01, lambda0 = lambda1 = 1, erf, no biases, one-hot labels
  and its classes; sampling stops on accuracy (1% on eps_g, 0.01 on every overlap, tau resolved). The paper gives no
  N1 grid for Fig. 1; :data:`N1_FULL` is our choice (alpha = P/N1 from 10 to 0.5). Hours to days on 2 cores. The two
  chains start from two kinds (:data:`FULL_STARTS`), and a width is settled only where they agree.
* ``quick``: P = 200 (P_test = 1000) and the widths at the same alpha as three of the full grid's; sampling stops on
  the full size's accuracy or after :data:`QUICK_DRAWS` draws per chain, whichever comes first (never on wall time:
  a seed gives the same figure on any machine): a few minutes per figure on 2 cores, with honest (some wider, some
  flagged) error bars.
* ``smoke``: a few dozen draws at P = 40: the pipeline end to end in seconds (the tests); the numbers mean nothing.

Figures 3 and 4 of the paper (Adam and the best infinite-width GP) are :mod:`renormpp.baselines` runs, not sampled
sweeps: :mod:`.baseline_figures`, with the same command, sizes and outputs.
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import diagnostics
from ..theory import METHODS
from . import baseline_figures
from . import config as config_mod
from . import report as report_mod
from . import runner
from .signals import Interrupted
from .store import write_atomic

SIZES = ("quick", "full", "smoke")
#: the widths of Fig. 1 at the full size (P = 1000): alpha = P/N1 = 10, 4, 2, 1, 0.5
N1_FULL = (100, 250, 500, 1000, 2000)
#: draws per chain at which a quick-size width stops if it has not reached the accuracy before
QUICK_DRAWS = 1500
#: the accuracy at which sampling stops (quick and full sizes): relative on eps_g, absolute on every overlap
TARGET_ERROR = {"eps_g": 0.01, "overlap": 0.01}
#: the kinds of start of the full size's chains (``run.starts``, one chain each): a width is settled only where the
#: chains from the prior and from a prior draw at half its scale agree
FULL_STARTS = ("prior", "scaled")
_P = {"full": 1000, "quick": 200, "smoke": 40}
_P_TEST = {"full": 1000, "quick": 1000, "smoke": 100}
_PAPER_MODEL = {"T": 0.01, "lambda0": 1.0, "lambda1": 1.0, "activation": "erf"}

#: the data of each series, as a [data] table without P and P_test (the paper's data sets and classes)
DATA = {
    "linear-D1": {"name": "synthetic", "N0": 144, "D": 1, "teacher": "linear"},
    "linear-D2": {"name": "synthetic", "N0": 144, "D": 2, "teacher": "linear"},
    "erf-D10": {"name": "synthetic", "N0": 144, "D": 10, "teacher": "erf_1hl"},
    "mnist-D2": {"name": "mnist", "classes": [0, 1]},
    "mnist-D3": {"name": "mnist", "classes": [1, 2, 3]},
    "cifar10-D2": {"name": "cifar10", "classes": ["cats", "horses"]},
    "cifar10-D4": {"name": "cifar10", "classes": ["cars", "birds", "cats", "deers"]},
    "cifar10-D10": {"name": "cifar10", "classes": "all"},
}


@dataclass(frozen=True)
class Series:
    """One sweep behind a figure: its data (a key of :data:`DATA`) at widths given as loads alpha = P/N1 (``None``:
    the Fig. 1 grid, :data:`N1_FULL`); ``patch``: the one-hidden-layer CNN with ``patch`` x ``patch`` patches of the
    square images (N1 = C channels) in place of the fully connected network."""

    data: str
    alphas: tuple | None = None
    patch: int | None = None

    @property
    def name(self) -> str:
        name = self.data if self.alphas is None else f"{self.data}-alpha{'-'.join(f'{a:g}' for a in self.alphas)}"
        return name if self.patch is None else f"{name}-cnn{self.patch}"

    def widths(self, size: str) -> list[int]:
        P = _P[size]
        alphas = self.alphas or tuple(1000 / n for n in N1_FULL)
        if self.alphas is None and size != "full":
            alphas = alphas[::2] if size == "quick" else alphas[3:4]  # alpha 10, 2, 0.5; smoke: alpha 1
        return sorted({max(2, round(P / a)) for a in alphas})

    def config(self, size: str, out: Path) -> dict:
        """The ``renormpp run`` config of this series at ``size``, writing to ``out / "runs" / name``."""
        data = {**DATA[self.data], "P": _P[size], "P_test": _P_TEST[size], "seed": 0}
        sampler = {"kind": "kinetic"}
        run = {"out": str(Path(out) / "runs" / self.name), "seeds": [0]}
        if size in ("full", "quick"):
            sampler["num_samples"] = 200_000 if size == "full" else QUICK_DRAWS
            run["target_error"] = dict(TARGET_ERROR)
            if size == "full":
                run["starts"] = list(FULL_STARTS)
        else:
            sampler.update(num_warmup=20, num_samples=30, inner_steps=4)
            run["progress"] = False
        model = {"N1": self.widths(size), **_PAPER_MODEL}
        if self.patch is not None:
            model.update(architecture="conv", image_shape=math.isqrt(DATA[self.data].get("N0", 28 * 28)),
                         patch=self.patch)
        # the paper's figures compare the paper's theory: the kernel-renormalization methods, no theory beyond them
        return {"data": data, "model": model, "sampler": sampler, "run": run, "theory": {"methods": list(METHODS)}}


@dataclass(frozen=True)
class Figure:
    """A figure of the paper: its panels, each a kind of plot of one series."""

    title: str
    panels: tuple  # ((label, kind, Series), ...), kind one of "loss", "overlaps", "heatmap", "mc", "local";
    # ("versus": a tuple of Series on one panel, eps_g against the width of each architecture)

    @property
    def series(self) -> list[Series]:
        return list(dict.fromkeys(x for _, _, s in self.panels for x in (s if isinstance(s, tuple) else (s,))))


FIGURES = {
    "fig1a": Figure("Fig. 1(a): generalization loss against N1, linear teacher, N0 = 12², D = 2",
                    (("a", "loss", Series("linear-D2")),)),
    "fig1b": Figure("Fig. 1(b): MNIST, D = 2 (0, 1) and D = 3 (1, 2, 3)",
                    (("D=2", "loss", Series("mnist-D2")), ("D=3", "loss", Series("mnist-D3")))),
    "fig1c": Figure("Fig. 1(c): grayscale CIFAR-10 at 28², D = 2 (cats, horses) and D = 4 (cars, birds, cats, deers)",
                    (("D=2", "loss", Series("cifar10-D2")), ("D=4", "loss", Series("cifar10-D4")))),
    "fig1d": Figure("Fig. 1(d): grayscale CIFAR-10 at 28², D = 10 (all classes)",
                    (("D=10", "loss", Series("cifar10-D10")),)),
    "fig2": Figure("Fig. 2(b): readout overlaps Q*/lambda1 against the sampled <v v^T>/N1, CIFAR-10, D = 10, alpha = 1",
                   (("b", "heatmap", Series("cifar10-D10", (1.0,))),)),
    "sm-overlaps": Figure("Supplement, overlap figure: (a) erf teacher, D = 10, alpha = 1 and 0.1; overlaps against N1 "
                          "on (b) CIFAR-10, D = 4 and (c) MNIST, D = 3",
                          (("a", "heatmap", Series("erf-D10", (1.0, 0.1))), ("b", "overlaps", Series("cifar10-D4")),
                           ("c", "overlaps", Series("mnist-D3")))),
    "sm-mc": Figure("Supplement, Monte Carlo figure: eps_g and v1.v1/N1 of one run, erf teacher, D = 10, N1 = P",
                    (("mc", "mc", Series("erf-D10", (1.0,))),)),
    "cnn": Figure("Convolutional against fully connected (Aiudi et al., Nat. Commun. 16 (2025)): eps_g "
                  "against the width, C channels or N1 units, on the same data, theory and MC: (D=1) linear teacher, "
                  "N0 = 12² as 12 x 12 images, 4 x 4 patches; (D=2) MNIST (0, 1), 7 x 7 patches; the local overlaps "
                  "of the MNIST CNN over patch pairs, sampled against the theory",
                  (("D=1", "versus", (Series("linear-D1", patch=4), Series("linear-D1"))),
                   ("D=2", "versus", (Series("mnist-D2", patch=7), Series("mnist-D2"))),
                   ("local", "local", Series("mnist-D2", patch=7)))),
}


class UnknownFigure(config_mod.ConfigError):
    """A figure name or size that :data:`FIGURES` / :data:`SIZES` does not have."""


#: every figure name: the sampled ones, then the baselines
NAMES = (*FIGURES, *baseline_figures.FIGURES)
#: the figures of the kernel-shape renormalization paper, ``renormpp paper all`` (``cnn``, the figure from the
#: local-renormalization paper, runs on its own: at the full size its widest CNNs take days on 2 cores)
ALL = tuple(n for n in NAMES if n != "cnn")


def figure(name: str) -> Figure | None:
    """The sampled figure ``name``; None for a baseline figure (fig3, fig4).

    Parameters
    ----------
    name : str
        A figure of :data:`NAMES`.

    Returns
    -------
    Figure or None
    """
    if name not in NAMES:
        raise UnknownFigure(f"unknown figure {name!r}; choose one of {', '.join(NAMES)} (or all: every figure of the "
                            "kernel-shape paper in turn)")
    return FIGURES.get(name)


def configs(name: str, size: str = "quick", out=None, max_seconds: float | None = None) -> dict[str, dict]:
    """``{series name: renormpp run config}`` of figure ``name`` at ``size``, writing below ``out``; ``max_seconds``
    caps each width's sampling (``run.max_seconds``).

    Parameters
    ----------
    name : str
        A figure of :data:`NAMES`.
    size : {"quick", "full", "smoke"}
        The size of the series (:data:`SIZES`).
    out : str or path, optional
        The folder the runs write below.
    max_seconds : float, optional
        The cap on each width's sampling.

    Returns
    -------
    dict
        ``{series name: config}``.
    """
    if size not in SIZES:
        raise UnknownFigure(f"unknown size {size!r}; choose one of {', '.join(SIZES)}")
    out = Path(out if out is not None else default_out(size))
    fig = figure(name)
    if fig is None:
        return baseline_figures.configs(name, size, out)
    cap = {} if max_seconds is None else {"max_seconds": float(max_seconds)}
    return {s.name: (c := s.config(size, out)) | {"run": c["run"] | cap} for s in fig.series}


def default_out(size: str) -> Path:
    return Path(f"renormpp-paper-{size}")


def print_configs(name: str, size: str = "quick", out=None, series: str | None = None,
                  max_seconds: float | None = None) -> str:
    """The figure's configs as TOML, one document per series (``series``: only that one)."""
    import tomli_w

    cfgs = configs(name, size, out, max_seconds)
    dumps = config_mod.dumps if figure(name) is not None else tomli_w.dumps
    if series is not None:
        if series not in cfgs:
            raise UnknownFigure(f"figure {name} has no series {series!r}; its series are {', '.join(cfgs)}")
        return dumps(cfgs[series])
    kind = "renormpp run config" if figure(name) is not None else "baselines config"
    return "\n".join(f"# ---- series {k}: {kind} (one file each; --series {k} prints it alone)\n" + dumps(c)
                      for k, c in cfgs.items())


def make(name: str, size: str = "quick", out=None, *, executor=None, workers=None, address=None,
         progress=None, max_seconds: float | None = None) -> Path:
    """Run (or resume) the series of figure ``name`` at ``size`` and draw it; returns ``OUT/name``. ``max_seconds``:
    a cap on each width's sampling (``run.max_seconds``, a key a resumed run may change; a width that reaches it
    unsettled is drawn hollow).

    Parameters
    ----------
    name : str
        A figure of :data:`NAMES`.
    size : {"quick", "full", "smoke"}
        The size of the series (:data:`SIZES`).
    out : str or path, optional
        The folder the figures go below.
    executor : str, optional
        Overrides ``run.executor`` (how the points run: in this process, a pool of processes, or Ray).
    workers : int, optional
        Overrides ``run.workers``.
    address : str, optional
        Overrides ``run.address`` (a Ray cluster).
    progress : bool, optional
        Overrides ``run.progress``.
    max_seconds : float, optional
        The cap on each width's sampling.

    Returns
    -------
    pathlib.Path
        ``OUT/name``.
    """
    fig = figure(name)
    out = Path(out if out is not None else default_out(size))
    cfgs = configs(name, size, out, max_seconds)
    start = time.perf_counter()
    if fig is None:
        return record(_write_baselines(name, size, out, start, progress is not False), name, size, cfgs)
    for cfg in cfgs.values():
        try:
            runner.run(cfg, executor=executor, workers=workers, address=address, progress=progress)
        except Interrupted as err:
            raise Interrupted(f"{err}; the whole figure: renormpp paper {name} --size {size} --out {out}") from None
    sweeps = {k: report_mod.load_sweep(c["run"]["out"]) for k, c in cfgs.items()}
    return record(draw(name, fig, sweeps, out / name, size=size, seconds=time.perf_counter() - start), name, size,
                  cfgs)


#: the file of a figure's folder that says what drew it (:func:`record`)
PROVENANCE = "provenance.json"


def record(folder: Path, name: str, size: str, cfgs: dict) -> Path:
    """Write ``provenance.json`` into a figure's ``folder``: the renormpp version that drew it, the date, the
    command and the config of each of its series (the ``renormpp run`` configs of :func:`configs`), and add the
    same line to the top of its ``summary.md``. A stored figure can so be told apart from one an older version drew.
    Returns ``folder``."""
    import datetime
    import json
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("renormpp")
    except PackageNotFoundError:
        release = "0+unknown"
    info = {"renormpp": release, "commit": _commit(), "date": datetime.date.today().isoformat(),
            "command": f"renormpp paper {name} --size {size}", "configs": cfgs}
    write_atomic(folder / PROVENANCE, json.dumps(info, indent=1, default=str) + "\n")
    summary = folder / "summary.md"
    if summary.exists():
        lines = summary.read_text().split("\n")
        lines.insert(2, provenance_line(info) + "\n")
        write_atomic(summary, "\n".join(lines))
    return folder


def provenance_line(info: dict) -> str:
    """The line a figure's summary starts with: the version, commit and date that drew it, the command, the configs."""
    commit = f" (commit {info['commit']})" if info.get("commit") else ""
    return (f"Drawn by renormpp {info['renormpp']}{commit} on {info['date']} (`{info['command']}`; the config of "
            f"each series: [{PROVENANCE}]({PROVENANCE})).")


def _commit() -> str | None:
    """The short commit of the renormpp checkout that runs, or None for an installed wheel (no git folder)."""
    import subprocess

    here = Path(__file__).resolve().parents[2]
    if not (here / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


# ---- drawing -----------------------------------------------------------------------------------------------------
def draw(name: str, fig: Figure, sweeps: dict, folder: Path, *, size: str, seconds: float) -> Path:
    """Write the figure (PNG, PDF), ``data.csv``, ``theory.csv`` and ``summary.md`` into ``folder``."""
    import matplotlib.pyplot as plt
    import pandas as pd

    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob(f"{name}*.p*"):
        old.unlink()
    files, curves = [], []
    kinds = [k for _, k, _ in fig.panels]
    empty = [s.name for s in fig.series if not sweeps[s.name].pooled]
    if empty:
        raise runner.SweepError(f"no point of {', '.join(empty)} finished with a working sampler: nothing to draw "
                                f"(see report.md in {folder.parent / 'runs'})")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", diagnostics.ShortRunWarning)  # flagged in the tables and drawn hollow
        local_sets = {s.name: report_mod.local_overlaps(sweeps[s.name]) for _, k, s in fig.panels if k == "local"}
        losses = [(label, k, s) for label, k, s in fig.panels if k in ("loss", "versus")]
        if losses:
            width = max(7.5, 4.8 * len(losses) + 0.6)
            figure_, axes = plt.subplots(1, len(losses), figsize=(width, 5.0), layout="constrained", squeeze=False)
            for ax, (label, k, s) in zip(axes[0], losses):
                curves.append(_loss_panel(ax, label, sweeps[s.name]).assign(series=s.name) if k == "loss"
                              else _versus_panel(ax, label, [sweeps[x.name] for x in s]))
                ax.get_legend().remove()
            handles = {lab: h for ax in axes[0] for h, lab in zip(*ax.get_legend_handles_labels())}
            figure_.legend(handles.values(), handles.keys(), loc="outside lower center", ncols=2, fontsize="small")
            files += _save(figure_, folder / name)
        for label, kind, s in fig.panels:
            if kind in ("loss", "versus"):
                continue
            sw = sweeps[s.name]
            names = sw.data.class_names or None
            if kind == "overlaps":
                files += _save(plots().overlaps_vs_N1(sw.pooled, fit=sw.fit, class_names=names),
                               folder / f"{name}_{label}")
            elif kind == "heatmap":
                for ds in sw.pooled:
                    tag = f"{name}_{label}_alpha{sw.data.X.shape[0] / ds.attrs['N1']:.3g}" if len(fig.panels) > 1 \
                        or len(sw.pooled) > 1 else name
                    files += _save(plots().overlap_heatmaps(ds, class_names=names, paper_style=True), folder / tag)
            elif kind == "local":
                for ds in local_sets[s.name]:
                    files += _save(plots().local_overlaps(ds), folder / f"{name}_{label}_C{ds.attrs['N1']}")
            elif kind == "mc":
                draws = report_mod.pooled_draws([f for r, f in sw.done if r.get("status", "ok") == "ok"])
                files += _save(plots().mc_analysis(draws["eps_g"]), folder / f"{name}_eps_g")
                files += _save(plots().mc_analysis(draws["overlap"][..., 0, 0], name="$v_1\\cdot v_1/N_1$"),
                               folder / f"{name}_overlap")
    table = pd.concat([report_mod.pooled_table(sweeps[s.name].pooled).assign(series=s.name) for s in fig.series])
    table.to_csv(folder / "data.csv")
    if curves:
        pd.concat(curves).to_csv(folder / "theory.csv", index=False)
    lines = _summary(name, fig, sweeps, size, seconds, files, kinds, local_sets)
    write_atomic(folder / "summary.md", "\n".join(lines))
    return folder


def _write_baselines(name, size, out, start, progress) -> Path:
    title, files, table, lines = baseline_figures.make(name, size, out, progress=progress)
    folder = out / name
    table.to_csv(folder / "data.csv", index=False)
    head = [f"# {title}", "", f"`renormpp paper {name} --size {size}`: {time.perf_counter() - start:.0f} s in this "
            "invocation (results already computed are read back).", ""] + [f"![{name}]({f})" for f in files] + [""]
    write_atomic(folder / "summary.md", "\n".join(head + lines))
    return folder


def plots():
    from .. import plots as plots_mod

    return plots_mod


def _save(figure_, stem: Path) -> list[str]:
    import matplotlib.pyplot as plt

    # not with_suffix: a stem may hold a dot (alpha0.1)
    plots().save(figure_, *(stem.parent / f"{stem.name}.{ext}" for ext in ("png", "pdf")), dpi=150)
    plt.close(figure_)
    return [f"{stem.name}.png"]


def _loss_panel(ax, label: str, sw) -> "pd.DataFrame":
    """One panel of Fig. 1 (the theory curves on a fine grid, the MC points), and the curves as a table."""
    import pandas as pd

    N1s = np.array([ds.attrs["N1"] for ds in sw.pooled], dtype=float)
    grid = np.geomspace(N1s.min() / 1.5, N1s.max() * 1.5, 30)
    lines = plots().theory_lines(sw.fit, grid, sw.data.X_test, sw.data.Y_test)
    plots().generalization_vs_N1(sw.pooled, fit=sw.fit, X_test=sw.data.X_test, Y_test=sw.data.Y_test, N1_grid=grid,
                                 ax=ax, lines=lines)
    P, D = sw.data.X.shape[0], sw.data.Y.shape[1]
    ax.set_title(f"{sw.data.name} ({label}): $P$={P}, $D$={D}")
    return pd.DataFrame([{"N1": n, "theory": m, "eps_g": lines[m]["eps_g"][i]} for m in lines
                         for i, n in enumerate(grid)])


def _versus_panel(ax, label: str, sws: list) -> "pd.DataFrame":
    """A panel of the CNN figure: eps_g against the width of each architecture of ``sws`` (sweeps on one data set)."""
    import pandas as pd

    data = sws[0].data
    _, rows = plots().architectures_vs_N1({_architecture(sw): (sw.pooled, sw.fit) for sw in sws}, data.X_test,
                                          data.Y_test, ax=ax)
    ax.set_title(f"{data.name} ({label}): $P$={data.X.shape[0]}, $D$={data.Y.shape[1]}")
    return pd.DataFrame(rows).assign(series=label)


def _architecture(sw) -> str:
    m = sw.cfg.model
    return "fully connected" if m.architecture == "fc" else f"CNN, {m.patch}x{m.patch} patches"


def _summary(name, fig, sweeps, size, seconds, files, kinds, local_sets) -> list[str]:
    lines = [f"# {fig.title}", "", f"`renormpp paper {name} --size {size}`: {seconds:.0f} s in this invocation "
             "(series already sampled are read back, not resampled). Delta = (MC - theory) / |theory|, signed "
             "(negative where the sampled mean lies below the theory); z = (MC - theory) "
             f"/ error; a theory agrees where |z| < {diagnostics.Z_AGREE:g} and the error bar holds (reliable: tau_int "
             "resolved); R-hat is shown, \"chains disagree\" where their means differ by more than their error bars allow "
             "(`rp.diagnostics.chain_spread`).", ""]
    lines += [f"![{name}]({f})" for f in files] + [""]
    only_loss = set(kinds) == {"loss"}
    for s in fig.series:
        sw = sweeps[s.name]
        d = sw.data
        lines += [f"## {s.name}: {d.name}, P={d.X.shape[0]}, P_test={d.X_test.shape[0]}, N0={d.X.shape[1]}, "
                  f"D={d.Y.shape[1]}", ""]
        for ds in sw.pooled:
            lines += [f"### N1 = {ds.attrs['N1']:g} (alpha = {d.X.shape[0] / ds.attrs['N1']:.3g})", ""]
            lines += [_point_table(ds, ["eps_g"] if only_loss else list(ds.quantity.values)), ""]
        if s.name in local_sets:
            from ..diagnostics import local

            lines += ["Local overlaps over patch pairs, sampled against the theory (Eq. (C10)):", ""]
            lines += [f"* C = {ds.attrs['N1']}: {local.summary(ds)}" for ds in local_sets[s.name]] + [""]
        failed = [r for r, _ in sw.done if r.get("status", "ok") != "ok"]
        lines += [f"* N1={r['N1']}: FAILED, not compared: {r.get('problems', '')}" for r in failed]
    return lines


def _point_table(ds, quantities) -> str:
    methods = [str(t) for t in ds.theory.values]
    rows = ["| quantity | MC | reliable | R-hat | " + " | ".join(f"{t}: prediction, Delta, z" for t in methods) + " |",
            "|" + "---|" * (4 + len(methods))]
    for q in quantities:
        r = ds.sel(quantity=q)
        cells = []
        for t in methods:  # Delta: compare's delta, (MC - theory) / |theory|
            pred, delta, z = (float(r[v].sel(theory=t)) for v in ("prediction", "delta", "z"))
            cells.append(f"{pred:.4g}, {delta:+.1%}, {z:+.1f}" if np.isfinite(pred) and pred else "–")
        rhat = float(r.rhat) if "rhat" in ds else np.nan
        apart = (f"{rhat:.3f}" + (" (chains disagree)" if "chains_apart" in ds and bool(r.chains_apart) else "")
                 if np.isfinite(rhat) else "–")
        rows.append(f"| {q} | {float(r.mc_mean):.4g} ± {float(r.mc_error):.2g} | {bool(r.reliable)} | {apart} | "
                    + " | ".join(cells) + " |")
    return "\n".join(rows)
