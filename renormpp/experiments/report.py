"""The report of a sweep: theory against sampling over N1, from the finished points of an output folder.

Writes into the output folder:

* ``summary.csv``: one row per finished point (N1, seed, MC eps_g and error, the three theories, z-scores,
  the worst overlap z-score, draws, sampling time, divergences);
* ``pooled.csv``: one row per N1 and quantity, the seeds pooled as independent chains;
* ``generalization_vs_N1.png`` (Fig. 1a-like), ``overlaps_vs_N1.png``, ``overlaps.png`` (Fig. 2-like, the
  smallest N1);
* ``report.md``: the config, the tables and the figures, and the points still missing.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from . import config as config_mod
from . import stages
from .store import PointStore


def _finished(outdir: Path) -> list[tuple[dict, Path]]:
    stores = [PointStore(folder) for folder in sorted((outdir / "points").glob("*/"))]
    found = [(st.result(), st.folder) for st in stores if st.finished]
    return sorted(found, key=lambda r: (r[0]["N1"], r[0]["seed"]))


def _pooled_draws(folders) -> dict:
    """The observables of several points (same N1, other seeds) as the chains of one run."""
    import arviz as az

    parts = [az.from_netcdf(f / "observables.nc")["posterior"] for f in folders]
    return {k: np.concatenate([np.asarray(p[k].values) for p in parts], axis=0) for k in ("eps_g", "overlap")}


def _markdown(df) -> str:
    def fmt(v):
        return f"{v:.5g}" if isinstance(v, float) else str(v)
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def report(outdir) -> Path:
    """(Re)write the report of the sweep in ``outdir`` from its finished points; returns ``report.md``'s path."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from .. import diagnostics, plots, theory

    outdir = Path(outdir)
    if not (outdir / "config.toml").exists():
        raise FileNotFoundError(f"{outdir} is not the output folder of a run (no config.toml)")
    cfg = config_mod.resolve(config_mod.load(outdir / "config.toml"))
    done = _finished(outdir)
    if not done:
        raise FileNotFoundError(f"no finished point under {outdir / 'points'} yet")
    data = stages.load_data(cfg.data)
    m = cfg.model
    base = stages.solve_theory(m.model_copy(update={"N1": done[0][0]["N1"]}), data)

    rows = []
    for res, folder in done:
        comp = pd.read_csv(folder / "comparison.csv")
        eps = comp[comp.quantity == "eps_g"].set_index("theory")
        ov = comp[comp.quantity != "eps_g"]
        row = dict(N1=res["N1"], seed=res["seed"], status=res.get("status", "ok"), eps_g=res["eps_g"],
                   eps_g_error=res["eps_g_error"])
        for t in theory.METHODS:
            row[f"eps_g_{t}"] = eps.loc[t, "prediction"]
            row[f"z_{t}"] = eps.loc[t, "z"]
        row["max_abs_z_overlap_exact"] = float(np.nanmax(np.abs(ov[ov.theory == "exact"].z))) \
            if ov[ov.theory == "exact"].z.notna().any() else np.nan
        row.update(draws=res["draws"], chains=res["chains"], sampling_seconds=res["sampling_seconds"],
                   accept_prob=res.get("accept_prob"), divergences=res["divergences"], reliable=res["reliable"],
                   problems=res.get("problems", ""))
        rows.append(row)
    summary = pd.DataFrame(rows)
    summary.to_csv(outdir / "summary.csv", index=False)

    ok = [(r, f) for r, f in done if r.get("status", "ok") == "ok"]
    failed = [(r, f) for r, f in done if r.get("status", "ok") != "ok"]
    pooled = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", diagnostics.ShortRunWarning)  # flagged in the tables as reliable=False
        for N1 in sorted({r["N1"] for r, _ in ok}):
            group = [(r, f) for r, f in ok if r["N1"] == N1]
            fit = base.refit("infinite_width", N1=N1)
            pooled.append(diagnostics.compare(_pooled_draws([f for _, f in group]), fit, data.X_test, data.Y_test,
                                              method=cfg.run.error_method, sampler=group[0][0].get("sampler")))
    if pooled:
        table = pd.concat([ds.drop_vars(["a", "b"]).to_dataframe().assign(N1=ds.attrs["N1"]) for ds in pooled])
        table.to_csv(outdir / "pooled.csv")

    names = data.class_names or None
    figures = {
        "generalization_vs_N1.png": lambda: plots.generalization_vs_N1(pooled, fit=base, X_test=data.X_test,
                                                                       Y_test=data.Y_test),
        "overlaps_vs_N1.png": lambda: plots.overlaps_vs_N1(pooled, fit=base, class_names=names),
        "overlaps.png": lambda: plots.overlap_heatmaps(pooled[0], class_names=names),
    } if pooled else {}
    for name, make in figures.items():
        fig = make()
        fig.savefig(outdir / name, dpi=110)
        plt.close(fig)

    missing = [p.name for p in cfg.points() if not PointStore(outdir / "points" / p.name).finished]
    lines = [f"# renormpp sweep: {data.name}", "",
             f"P={data.X.shape[0]}, P_test={data.X_test.shape[0]}, N0={data.X.shape[1]}, D={data.Y.shape[1]}, "
             f"T={m.T:g}, lambda0={m.lambda0:g}, lambda1={m.lambda1:g}, activation={m.activation}; "
             f"sampler {cfg.sampler.kind}; errors by the {cfg.run.error_method} method. A theory agrees with the "
             f"sampled mean where |z| < {diagnostics.Z_AGREE:g} and the error bar holds; otherwise the verdict gives "
             "the relative deviation Delta and z.", ""]
    if failed:
        lines += [f"**{len(failed)} point(s) failed and are not compared** (their sampler froze, hardly accepted its "
                  "moves, or diverged; their draws are not the posterior):", ""]
        lines += [f"* N1={r['N1']} seed={r['seed']}: {r.get('problems', '')}" for r, _ in failed] + [""]
    if pooled:
        lines += ["![generalization error against N1](generalization_vs_N1.png)", "",
                  "![readout overlaps against N1](overlaps_vs_N1.png)", "",
                  f"![readout overlaps at N1={pooled[0].attrs['N1']:g}](overlaps.png)", "",
                  "## Theory against sampling, per N1 (seeds pooled)", ""]
        for ds in pooled:
            lines += [f"### N1 = {ds.attrs['N1']:g}", "", "```", ds.attrs["summary"], "```", "",
                      stages.comparison_markdown(ds), ""]
    else:
        lines += ["No point finished with a working sampler: nothing to compare.", ""]
    lines += ["## Points", "", _markdown(summary), ""]
    if missing:
        lines += [f"**{len(missing)} point(s) not finished yet**: {', '.join(missing)}. "
                  f"Resume with `renormpp run {outdir}`.", ""]
    path = outdir / "report.md"
    path.write_text("\n".join(lines))
    return path
