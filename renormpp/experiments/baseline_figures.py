"""Figs. 3 and 4 of the paper (``renormpp paper fig3`` / ``fig4``): the one-hidden-layer ReLU network trained with
Adam after a hyperparameter search (dots: mean ± std over initializations) against the best infinite-width GP (solid
lines), MSE and accuracy on the train and test sets against N1 (:mod:`renormpp.baselines`).

Each series is one data set at one or more P; its config (a TOML document, ``--print-config``) holds the data, the
widths, the search and the GP grid. Every (P, N1) result is saved as JSON in ``OUT/runs/SERIES/`` as soon as it is
computed, so a run that stops resumes where it was. The paper does not give its P, widths, epochs or search ranges:
the full size takes P = 250 and 1000 and N1 from 16 to 1024 (Fig. 4: P = 1600, N1 to 2048), 30 trials and 20
initializations per width (supplement). Fig. 3(a) is Imagenette through a pre-trained backbone, which is not
available offline: MNIST (all ten classes) stands in for it.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .store import write_atomic

SIZES = {
    "full": dict(P=[250, 1000], P_test=1000, N1=[16, 32, 64, 128, 256, 512, 1024], n_trials=30, n_init=20,
                 max_epochs=500, patience=20, batch_size=[16, 32, 64, 128, 256], lowdim_P=[1600], lowdim_P_test=400,
                 lowdim_N1=[16, 32, 64, 128, 256, 512, 1024, 2048]),
    "quick": dict(P=[200], P_test=200, N1=[16, 64, 256], n_trials=6, n_init=3, max_epochs=300, patience=30,
                  batch_size=[32, 64], lowdim_P=[400], lowdim_P_test=200, lowdim_N1=[16, 64, 256]),
    "smoke": dict(P=[60], P_test=60, N1=[8, 32], n_trials=2, n_init=2, max_epochs=10, patience=5, batch_size=[32],
                  lowdim_P=[80], lowdim_P_test=40, lowdim_N1=[8, 32]),
}
#: the grid of the best GP (not given in the paper): T over four decades, lambda0 and lambda1 over a factor 16
GP_GRID = dict(T_grid=[1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0, 3.0], lambda0_grid=[0.25, 1.0, 4.0],
               lambda1_grid=[0.25, 1.0, 4.0])
FIGURES = {
    "fig3": ("Fig. 3: Adam after a hyperparameter search against the best infinite-width GP, ReLU, (a) MNIST standing "
             "in for Imagenette features, (b) grayscale CIFAR-10, all ten classes",
             {"a": {"name": "mnist", "classes": "all"}, "b": {"name": "cifar10", "classes": "all"}}),
    "fig4": ("Fig. 4: the same on the low-dimensional regression (N0 = 12, five targets), where the paper finds that "
             "Bayesian training overfits",
             {"lowdim": {"name": "low_dimensional"}}),
}


def configs(name: str, size: str, out) -> dict[str, dict]:
    """``{series: config}`` of Fig. 3 or 4 at ``size``."""
    s = SIZES[size]
    low = name == "fig4"
    return {f"{name}-{panel}": {
        "data": data, "P": s["lowdim_P" if low else "P"], "P_test": s["lowdim_P_test" if low else "P_test"],
        "baselines": {"N1": s["lowdim_N1" if low else "N1"], "activation": "relu", "n_trials": s["n_trials"],
                      "n_init": s["n_init"], "max_epochs": s["max_epochs"], "patience": s["patience"],
                      "batch_size": s["batch_size"], "seed": 0, **GP_GRID},
        "out": str(Path(out) / "runs" / f"{name}-{panel}")} for panel, data in FIGURES[name][1].items()}


def _load(cfg: dict, P: int):
    from .. import datasets

    opts = {k: v for k, v in cfg["data"].items() if k != "name"}
    return getattr(datasets, cfg["data"]["name"])(P=P, P_test=cfg["P_test"], seed=cfg["baselines"]["seed"], **opts)


def run_series(cfg: dict, progress: bool = True) -> dict:
    """Compute (or read back) the best GP and the Adam baseline at every (P, N1) of one series; returns
    ``{P: {"gp": {...}, "adam": {N1: {...}}}}``."""
    from .. import baselines
    from ..progress import bar as progress_bar

    b, folder = cfg["baselines"], Path(cfg["out"])
    folder.mkdir(parents=True, exist_ok=True)
    saved = folder / "config.json"
    if saved.exists() and json.loads(saved.read_text()) != cfg:
        from .config import ConfigError

        raise ConfigError(f"{folder} holds a run of another config ({saved}); choose another --out")
    write_atomic(saved, json.dumps(cfg, indent=1))
    space = baselines.SearchSpace(batch_size=tuple(b["batch_size"]))
    out = {}
    bar = progress_bar(total=len(cfg["P"]) * (1 + len(b["N1"])), desc=folder.name, disable=not progress)
    for P in cfg["P"]:
        data = _load(cfg, P)
        gp_file = folder / f"P={P}_gp.json"
        if not gp_file.exists():
            gp = baselines.best_gp(data.X, data.Y, activation=b["activation"], X_test=data.X_test, Y_test=data.Y_test,
                                   seed=b["seed"], T_grid=b["T_grid"], lambda0_grid=b["lambda0_grid"],
                                   lambda1_grid=b["lambda1_grid"])
            write_atomic(gp_file, json.dumps({k: float(getattr(gp, k)) for k in (
                "T", "lambda0", "lambda1", "train_mse", "train_accuracy", "test_mse", "test_accuracy", "test_eps_g")}))
        bar.update(1)
        out[P] = {"gp": json.loads(gp_file.read_text()), "adam": {}}
        for N1 in b["N1"]:
            f = folder / f"P={P}_N1={N1}_adam.json"
            if not f.exists():
                a = baselines.adam_baseline(data.X, data.Y, N1, X_test=data.X_test, Y_test=data.Y_test, space=space,
                                            n_trials=b["n_trials"], n_init=b["n_init"], seed=b["seed"],
                                            activation=b["activation"], max_epochs=b["max_epochs"],
                                            patience=b["patience"])
                write_atomic(f, json.dumps({"config": {k: float(v) for k, v in a.config.items()}, "mean": a.mean,
                                            "std": a.std, "n_init": len(a.runs)}))
            out[P]["adam"][N1] = json.loads(f.read_text())
            bar.update(1)
    bar.close()
    return out


def draw(name: str, results: dict, folder: Path) -> tuple[list[str], "pd.DataFrame"]:
    """The figure (rows MSE and accuracy, or MSE only for the regression; columns train and test; one colour per P)
    as PNG and PDF, and its data as a table."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from .. import plots

    rows = [dict(series=s, P=P, N1=N1, model="adam", **{f"{k}_{m}": v for k in ("mean", "std")
                                                          for m, v in a[k].items()})
            for s, byP in results.items() for P, r in byP.items() for N1, a in r["adam"].items()]
    rows += [dict(series=s, P=P, model="best_gp", **{f"mean_{m}": v for m, v in r["gp"].items()})
             for s, byP in results.items() for P, r in byP.items()]
    table = pd.DataFrame(rows)
    metrics = ("mse",) if name == "fig4" else ("mse", "accuracy")
    files = []
    for series, byP in results.items():
        fig, axes = plt.subplots(len(metrics), 2, figsize=(9, 3.4 * len(metrics)), layout="constrained",
                                 squeeze=False)
        for i, (P, r) in enumerate(byP.items()):
            N1 = np.array(list(r["adam"]), dtype=float)
            for row, metric in zip(axes, metrics):
                for ax, part in zip(row, ("train", "test")):
                    key = f"{part}_{metric}"
                    mean = [a["mean"][key] for a in r["adam"].values()]
                    std = [a["std"][key] for a in r["adam"].values()]
                    ax.errorbar(N1, mean, yerr=std, color=f"C{i}", label=f"Adam, P = {P}", **plots.POINTS)
                    ax.axhline(r["gp"][key], color=f"C{i}", ls="-", label=f"best GP, P = {P}")
                    plots.log_axis(ax, table[table.series == series].N1.dropna())
                    ax.set_title(f"{part} {metric}")
                    ax.set_xlabel("hidden units $N_1$")
        axes[0][0].legend(fontsize="small")
        fig.suptitle(f"{series}: {FIGURES[name][1][series.split('-', 1)[1]]['name']}, ReLU")
        stem = folder / series
        plots.save(fig, *(folder / f"{stem.name}.{ext}" for ext in ("png", "pdf")), dpi=150)
        plt.close(fig)
        files.append(f"{stem.name}.png")
    return files, table


def make(name: str, size: str, out, progress: bool = True) -> tuple[str, list[str], "pd.DataFrame", list[str]]:
    """Run (or resume) Fig. 3 or 4 and draw it into ``out / name``: the title, the figure files, the data, and the
    summary's lines."""
    cfgs = configs(name, size, out)
    results = {s: run_series(c, progress=progress) for s, c in cfgs.items()}
    folder = Path(out) / name
    folder.mkdir(parents=True, exist_ok=True)
    files, table = draw(name, results, folder)
    lines = ["Adam: the mean ± std over the retrained initializations of the searched configuration; the best GP: "
             "the infinite-width ReLU GP with the lowest validation MSE on the grid over T, lambda0, lambda1.", ""]
    for s, byP in results.items():
        for P, r in byP.items():
            gp, acc = r["gp"], name != "fig4"  # accuracy: classification only
            lines += [f"## {s}, P = {P}", "", f"best GP: T = {gp['T']:g}, lambda0 = {gp['lambda0']:g}, lambda1 = "
                      f"{gp['lambda1']:g}; test MSE {gp['test_mse']:.4g}"
                      + (f", test accuracy {gp['test_accuracy']:.3g}" if acc else ""), "",
                      "| N1 | Adam test MSE | Adam / GP test MSE |" + (" Adam test accuracy |" if acc else ""),
                      "|---|---|---|" + ("---|" if acc else "")]
            lines += [f"| {N1} | {a['mean']['test_mse']:.4g} ± {a['std']['test_mse']:.2g} | "
                      f"{a['mean']['test_mse'] / gp['test_mse']:.3f} |"
                      + (f" {a['mean']['test_accuracy']:.3g} ± {a['std']['test_accuracy']:.2g} |" if acc else "")
                      for N1, a in r["adam"].items()]
            lines.append("")
    return FIGURES[name][0], files, table, lines
