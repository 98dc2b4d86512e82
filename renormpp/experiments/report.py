"""The report of a sweep: theory against sampling over N1, from the finished points of an output folder.

Writes into the output folder:

* ``summary.csv``: one row per finished point (N1, seed, MC eps_g and error, every theory of the
  comparison (the methods of :data:`renormpp.theory.METHODS`, then those of ``[theory] methods``) with its eps_g, signed Delta and z-score, the worst overlap z-score against the
  reference theory (:data:`renormpp.theory.REFERENCE`), draws, sampling time, divergences);
* ``pooled.csv``: one row per N1, quantity and theory, the seeds pooled as independent chains
  (:func:`renormpp.diagnostics.compare`'s table);
* ``generalization_vs_N1.png`` (Fig. 1a-like), ``overlaps_vs_N1.png``, ``overlaps.png`` (Fig. 2-like, one row per
  width);
* ``report.md``: the answer first (the eps_g figure and one table of each theory's Delta and z per width), the
  readout overlaps with the output-output correlations (the off-diagonal overlaps), one verdict per theory, links to
  each point's ``comparison.md``, and the points still missing.

Delta is signed everywhere, with one definition (:data:`DELTA_DEFINED`): (MC - theory) / |theory|.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np

from . import config as config_mod
from ..theory.recorded import RecordedFit
from . import stages, theories
from .store import PointStore
from .sections import (  # noqa: F401 (re-exported: the sections are the report's)
    DASH, DELTA_DEFINED, HIDDEN_KERNEL_DOCS, answer_table, kernel_section, local_section, off_diagonal_section,
    per_width_section, verdict_sentences)

def _finished(outdir: Path) -> list[tuple[dict, Path]]:
    stores = [PointStore(folder) for folder in sorted((outdir / "points").glob("*/"))]
    found = [(st.result(), st.folder) for st in stores if st.finished]
    return sorted(found, key=lambda r: (r[0]["N1"], r[0]["seed"]))


def _observables(folder):
    """A point's ``observables.nc`` read into memory and its file closed: a handle left open in xarray's file cache
    keeps the file open in the process's HDF5 library, which then refuses to create a file at the same path or inode
    ("unable to truncate a file which is already open")."""
    import arviz as az

    dt = az.from_netcdf(folder / "observables.nc").load()
    dt.close()
    return dt


def pooled_draws(folders, keys=("eps_g", "overlap")) -> dict:
    """The observables ``keys`` of several points (same N1, other seeds) as the chains of one run."""
    parts = [_observables(f)["posterior"] for f in folders]
    return {k: np.concatenate([np.asarray(part[k].values) for part in parts], axis=0) for k in keys}


def pooled_starts(folders) -> list | None:
    """The kind of start of every chain of :func:`pooled_draws` (None where no point records them: one kind)."""
    from ..diagnostics.convert import chain_starts

    found = [chain_starts(_observables(f)) for f in folders]
    return None if all(k is None for k in found) else [k for f, ks in zip(folders, found)
                                                          for k in (ks if ks is not None else ["prior"])]


def markdown_table(df) -> str:
    """A DataFrame as a markdown table (no index), floats to 5 significant digits, a dash for NaN."""
    def fmt(v):
        if isinstance(v, float):
            return f"{v:.5g}" if not np.isnan(v) else DASH
        return str(v)
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


class Sweep(NamedTuple):
    """A sweep's output folder, read back: its config, data, the theory at the first finished width, the finished
    points ``(result, folder)`` and the comparisons of the working ones, one per N1 with the seeds pooled."""

    cfg: config_mod.Config
    data: object
    fit: object
    done: list
    pooled: list


def load_sweep(outdir) -> Sweep:
    """Read the sweep in ``outdir`` (a folder of :func:`renormpp.experiments.run`) and compare its finished points
    with the theory, seeds pooled per N1 (:func:`renormpp.diagnostics.compare`)."""
    from .. import diagnostics

    outdir = Path(outdir)
    if not (outdir / "config.toml").exists():
        raise FileNotFoundError(f"{outdir} is not the output folder of a run (no config.toml)")
    cfg = config_mod.resolve(config_mod.load(outdir / "config.toml"))
    done = _finished(outdir)
    if not done:
        raise FileNotFoundError(f"no finished point under {outdir / 'points'} yet")
    if cfg.scaling is not None:  # compared per scale by scaling_report
        return Sweep(cfg, None, None, done, [])
    data = stages.load_data(cfg.data)
    base = theories.solve_theory(cfg.model.model_copy(update={"N1": done[0][0]["N1"]}), data)
    ok = [(r, f) for r, f in done if r.get("status", "ok") == "ok"]
    pooled = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", diagnostics.ShortRunWarning)  # flagged in the tables as reliable=False
        for N1 in sorted({r["N1"] for r, _ in ok}):
            group = [(r, f) for r, f in ok if r["N1"] == N1]
            fit = base.refit("infinite_width", N1=N1)
            folders = [f for _, f in group]
            kept = json.loads((folders[0] / "theory.json").read_text()) if (folders[0] / "theory.json").exists() else {}
            beyond = theories.beyond_fits({n: RecordedFit.from_dict(r["fit"]) for n, r in kept.get("beyond", {}).items()
                                           if r["applies"]})
            pooled.append(diagnostics.compare(pooled_draws(folders), [fit, *beyond], data.X_test, data.Y_test,
                                              error=cfg.run.error_method, sampler=group[0][0].get("sampler"),
                                              starts=pooled_starts(folders)))
    return Sweep(cfg, data, base, done, pooled)


def local_overlaps(sw: Sweep) -> list:
    """The local overlaps of a CNN sweep (``model.architecture = "conv"``) against the theory, one
    :func:`renormpp.diagnostics.local.compare_local` Dataset per width, the seeds pooled."""
    from ..diagnostics import local

    out = []
    ok = [(r, f) for r, f in sw.done if r.get("status", "ok") == "ok"]
    for N1 in sorted({r["N1"] for r, _ in ok}):
        draws = pooled_draws([f for r, f in ok if r["N1"] == N1], keys=("local_overlap",))
        out.append(local.compare_local(draws["local_overlap"], sw.fit.refit("infinite_width", N1=N1)))
    return out


def pooled_table(pooled) -> "pd.DataFrame":
    """The comparisons of :func:`load_sweep` as one table, a row per (N1, quantity, theory)."""
    import pandas as pd

    return pd.concat([ds.drop_vars(["a", "b"]).to_dataframe().assign(N1=ds.attrs["N1"]) for ds in pooled])


def report(outdir) -> Path:
    """(Re)write the report of the sweep in ``outdir`` from its finished points; returns ``report.md``'s path.

    ``report.md`` leads with the answer: the generalization error against N1 (figure and one table: each theory's
    signed Delta and z per width, :func:`answer_table`), then the readout overlaps with the output-output correlations
    (:func:`off_diagonal_section`), then one verdict per theory (:func:`verdict_sentences`). Each width's detail stays
    in its point's ``comparison.md``; the wide tables are ``summary.csv`` and ``pooled.csv``."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from .. import diagnostics, plots, theory

    outdir = Path(outdir)
    cfg, data, base, done, pooled = load_sweep(outdir)
    if cfg.scaling is not None:
        return scaling_report(outdir, cfg, done)
    m = cfg.model

    rows = []
    for res, folder in done:
        comp = pd.read_csv(folder / "comparison.csv")
        eps = comp[comp.quantity == "eps_g"].set_index("theory")
        ov = comp[comp.quantity != "eps_g"]
        row = dict(N1=res["N1"], seed=res["seed"], status=res.get("status", "ok"), eps_g=res["eps_g"],
                   eps_g_error=res["eps_g_error"])
        for t in eps.index:  # every theory of the point's comparison: the methods, then [theory] methods beyond
            pred, mc = eps.loc[t, "prediction"], eps.loc[t, "mc_mean"]
            row[f"eps_g_{t}"] = pred
            row[f"delta_{t}"] = (mc - pred) / abs(pred) if np.isfinite(pred) and pred else np.nan  # DELTA_DEFINED
            row[f"z_{t}"] = eps.loc[t, "z"]
        ref = ov[ov.theory == theory.REFERENCE]
        row[f"max_abs_z_overlap_{theory.REFERENCE}"] = float(np.nanmax(np.abs(ref.z))) if ref.z.notna().any() \
            else np.nan
        rel = res["eps_g_error"] / abs(res["eps_g"]) if res["eps_g"] else np.nan
        row.update(eps_g_rel_error=rel, max_overlap_error=float(ref.mc_error.max()) if len(ov) else np.nan,
                   stopped=res.get("stopped", "num_samples"))
        if "kernel" in res:  # the hidden kernel's diagnosis (renormpp.diagnostics.kernel)
            kz = np.abs((np.array(res["kernel"]["r"]) - res["kernel"]["r_theory"]) / np.array(res["kernel"]["r_err"]))
            row.update(kernel_holds=res["kernel"]["holds"], kernel_max_abs_z=float(np.max(kz)),
                       alignment_post=res["kernel"]["alignment_post"], eps_g_oracle=res["kernel"]["oracle_eps_g"])
        row.update(draws=res["draws"], chains=res["chains"], sampling_seconds=res["sampling_seconds"],
                   accept_prob=res.get("accept_prob"), divergences=res["divergences"], reliable=res["reliable"],
                   problems=res.get("problems", ""))
        if res.get("starts") and len(res["starts"]) > 1:
            row.update(starts="+".join(res["starts"]), starts_agree=res["starts_agree"])
        if "states" in res:  # the metastable states of the point's chains (rp.diagnostics.states)
            row.update(states=res["states"]["count"], transitions=int(sum(res["states"]["transitions"])))
        rows.append(row)
    summary = pd.DataFrame(rows)
    summary.to_csv(outdir / "summary.csv", index=False)

    failed = [(r, f) for r, f in done if r.get("status", "ok") != "ok"]
    if pooled:
        pooled_table(pooled).to_csv(outdir / "pooled.csv")

    names = data.class_names or None
    figures = {
        "generalization_vs_N1.png": lambda: plots.generalization_vs_N1(pooled, fit=base, X_test=data.X_test,
                                                                       Y_test=data.Y_test),
        "overlaps_vs_N1.png": lambda: plots.overlaps_vs_N1(pooled, fit=base, class_names=names),
        "overlaps.png": lambda: plots.overlap_heatmaps(pooled, class_names=names),  # one row per width
    } if pooled else {}
    kernels = {r["N1"]: r["kernel"] for r, _ in done if "kernel" in r and r["seed"] == done[0][0]["seed"]}
    if kernels and base is not None and not base.nonodd and base.depth == 1:
        figures["kernel_vs_N1.png"] = lambda: plots.kernel_vs_N1(kernels, fit=base)
    for name, make in figures.items():
        fig = make()
        plots.save(fig, outdir / name)
        plt.close(fig)

    missing = [point.name for point in cfg.points() if not PointStore(outdir / "points" / point.name).finished]
    P = data.X.shape[0]
    lines = [f"# renormpp sweep: {data.name}", "",
             f"P={P}, P_test={data.X_test.shape[0]}, N0={data.X.shape[1]}, D={data.Y.shape[1]}, "
             f"T={m.T:g}, lambda0={m.lambda0:g}, lambda1={m.lambda1:g}, {network_described(m)}; "
             f"sampler {cfg.sampler.kind}; errors by the {cfg.run.error_method} method.", "",
             f"{DELTA_DEFINED} A theory agrees with the sampled mean where |z| < {diagnostics.Z_AGREE:g} and the "
             "error bar holds.", ""]
    if failed:
        lines += [f"**{len(failed)} point(s) failed and are not compared** (their sampler froze, hardly accepted its "
                  "moves, or diverged; their draws are not the posterior):", ""]
        lines += [f"* N1={r['N1']} seed={r['seed']}: {r.get('problems', '')}" for r, _ in failed] + [""]
    if pooled:
        lines += ["## Generalization error against the width", "",
                  "![generalization error eps_g against N1: the sampled networks (points) and each theory (lines)]"
                  "(generalization_vs_N1.png)", ""]
        lines += answer_table(pooled, P)
        lines += off_diagonal_section(pooled, names)
        lines += ["## Verdicts", "", "The generalization error eps_g against each theory, over the widths:", ""]
        lines += verdict_sentences(pooled, data)
        lines += per_width_section(pooled, done, outdir)
    else:
        lines += ["No point finished with a working sampler: nothing to compare.", ""]
    if kernels:
        lines += kernel_section(kernels, "kernel_vs_N1.png" in figures)
    if pooled and m.architecture == "conv":
        lines += local_section(local_overlaps(Sweep(cfg, data, base, done, pooled)), outdir)
    lines += ["## Tables", "",
              "* [summary.csv](summary.csv): one row per point (N1, seed): the sampled eps_g and its error, each "
              "theory's eps_g, Delta and z, the worst overlap z, the hidden kernel's diagnosis, the sampler's "
              "acceptance, divergences and time.",
              "* [pooled.csv](pooled.csv): one row per width, quantity and theory, the seeds pooled: MC mean and "
              "error, prediction, delta, z, verdict and the equilibrium tests." if pooled else "", ""]
    return _write_report(outdir, [ln for i, ln in enumerate(lines) if ln or not (i and lines[i - 1] == "")], missing)


#: the one definition of Delta of every report, verdict and CSV (:func:`renormpp.diagnostics.compare`'s ``delta``)
def network_described(model) -> str:
    """The network in a report's header: the activation, the architecture's label and its own options that differ from
    their defaults (all of them where they have none: the convolutional network's image shape and patch)."""
    arch = stages.architecture(model)
    options = "".join(f", {k}={v}" for k, v in _non_default_options(model).items())
    return f"activation={model.activation}; network: {arch.label} (architecture={arch.name}{options})"


def _non_default_options(model) -> dict:
    """The architecture's own options of a ``[model]`` table that differ from their defaults (``depth`` > 1)."""
    fields = type(model).model_fields
    return {k: v for k, v in model.options().items() if v != fields[k].default}


# ---- finite-size scaling ----------------------------------------------------------------------------------------
def scaling_table(done) -> "pd.DataFrame":
    """One row per (scale, quantity, theory) of the finished points that passed their health check, seeds pooled:
    the MC mean and error (weighted over seeds), the prediction, and Delta = MC - theory, absolute and relative."""
    import pandas as pd

    rows = []
    for res, folder in done:
        if res.get("status", "ok") != "ok":
            continue
        comp = pd.read_csv(folder / "comparison.csv")
        scale = config_mod.resolve(config_mod.load(folder / "config.toml"), point=True).scaling.scale
        comp = comp.assign(scale=scale, N1=res["N1"], seed=res["seed"])
        rows.append(comp[["scale", "N1", "seed", "quantity", "theory", "mc_mean", "mc_error", "prediction"]])
    if not rows:
        return pd.DataFrame()
    table = pd.concat(rows)
    w = 1.0 / table.mc_error**2
    table = table.assign(w=w, wm=w * table.mc_mean)
    pooled = table.groupby(["scale", "N1", "quantity", "theory"], as_index=False).agg(
        wsum=("w", "sum"), wmsum=("wm", "sum"), prediction=("prediction", "first"), seeds=("seed", "nunique"))
    pooled["mc_mean"] = pooled.wmsum / pooled.wsum
    pooled["mc_error"] = 1.0 / np.sqrt(pooled.wsum)
    pooled["delta"] = pooled.mc_mean - pooled.prediction
    pooled["delta_rel"] = pooled.delta / pooled.prediction.abs()
    pooled["delta_rel_error"] = pooled.mc_error / pooled.prediction.abs()
    return pooled.drop(columns=["wsum", "wmsum"])


def _groups(table):
    """eps_g, and the diagonal overlaps averaged (relative Delta), per (scale, theory)."""
    diag = table[table.quantity.str.match(r"overlap\[(\d+),\1\]")]
    ov = diag.groupby(["scale", "N1", "theory"], as_index=False).agg(
        delta_rel=("delta_rel", "mean"), n=("delta_rel", "size"),
        err2=("delta_rel_error", lambda e: float(np.sum(np.asarray(e) ** 2))))
    ov["delta_rel_error"] = np.sqrt(ov.err2) / ov.n
    eps = table[table.quantity == "eps_g"][["scale", "N1", "theory", "delta_rel", "delta_rel_error"]]
    return {"eps_g": eps, "overlap diagonal (mean)": ov[["scale", "N1", "theory", "delta_rel", "delta_rel_error"]]}


def scaling_report(outdir: Path, cfg, done) -> Path:
    """The report of a finite-size-scaling sweep: Delta = MC - theory against 1/N1 for every theory, extrapolated to
    1/N1 = 0 (:func:`renormpp.diagnostics.extrapolate`); ``scaling.csv``, ``extrapolation.csv``, ``scaling.png``."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from .. import diagnostics, plots

    table = scaling_table(done)
    lines = [f"# renormpp finite-size scaling: {cfg.data.name}", "",
             f"alpha = P/N1 = {cfg.data.P / cfg.model.N1[0]:g} fixed; scales {cfg.scaling.scales} (P = s x {cfg.data.P}, "
             f"N1 = s x {cfg.model.N1[0]}" + (f", N0 = s x {cfg.data.N0}" if cfg.scaling.grow_N0 else "") +
             f"); T={cfg.model.T:g}, {network_described(cfg.model)}; sampler {cfg.sampler.kind}. Delta = MC - "
             "theory, relative to the theory, fitted as Delta = Delta_inf + c / N1 (weighted least squares; errors "
             "scaled by sqrt(chi2/dof) where that exceeds 1).", ""]
    failed = [(r, f) for r, f in done if r.get("status", "ok") != "ok"]
    if failed:
        lines += [f"**{len(failed)} point(s) failed and are left out**: " +
                  "; ".join(f"{f.name}: {r.get('problems', '')}" for r, f in failed), ""]
    if table.empty:
        lines += ["No point finished with a working sampler: nothing to extrapolate.", ""]
    else:
        table.to_csv(outdir / "scaling.csv", index=False)
        fits = []
        for group, g in _groups(table).items():
            for th in g.theory.unique():
                sub = g[g.theory == th].sort_values("N1")
                fit = diagnostics.extrapolate(1.0 / sub.N1, sub.delta_rel, sub.delta_rel_error)
                fits.append(dict(quantity=group, theory=th, delta_inf=fit.intercept, delta_inf_error=fit.intercept_error,
                                 slope=fit.slope, slope_error=fit.slope_error, chi2_dof=fit.chi2_dof, points=fit.n))
        fits = pd.DataFrame(fits)
        fits.to_csv(outdir / "extrapolation.csv", index=False)
        fig = plots.scaling(_groups(table), fits)
        plots.save(fig, outdir / "scaling.png")
        plt.close(fig)
        lines += ["![Delta against 1/N1](scaling.png)", "", "## Extrapolation to 1/N1 = 0", "",
                  "| quantity | theory | Delta_inf (relative) | slope c | chi2/dof | points |", "|---|---|---|---|---|---|"]
        for r in fits.itertuples():
            z = r.delta_inf / r.delta_inf_error if r.delta_inf_error > 0 else float("nan")
            lines.append(f"| {r.quantity} | {r.theory} | {r.delta_inf:+.2%} ± {r.delta_inf_error:.2%} (z = {z:+.1f}) | "
                         f"{r.slope:+.3g} ± {r.slope_error:.2g} | {r.chi2_dof:.2g} | {r.points} |")
        lines += ["", "## Delta per scale (seeds pooled)", "", markdown_table(
            table[table.quantity == "eps_g"][["scale", "N1", "theory", "mc_mean", "mc_error", "prediction", "delta_rel",
                                              "delta_rel_error"]]), ""]
    missing = [point.name for point in cfg.points() if not PointStore(outdir / "points" / point.name).finished]
    return _write_report(outdir, lines, missing)


def _write_report(outdir, lines: list, missing: list):
    """``report.md`` from ``lines``, ending with the points not finished yet and how to resume them."""
    if missing:
        lines = lines + [f"**{len(missing)} point(s) not finished yet**: {', '.join(missing)}. Resume with "
                         f"`renormpp run {outdir}`.", ""]
    path = outdir / "report.md"
    path.write_text("\n".join(lines))
    return path
