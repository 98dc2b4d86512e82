"""The report of a sweep: theory against sampling over N1, from the finished points of an output folder.

Writes into the output folder:

* ``summary.csv``: one row per finished point (N1, seed, MC eps_g and error, every theory method of
  :data:`renormpp.theory.METHODS` with its eps_g, signed Delta and z-score, the worst overlap z-score against the
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

import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np

from . import config as config_mod
from . import stages
from .store import PointStore

#: Where a reader of the report finds the equations of the hidden kernel, (H1) and (H2) (the report lives in the run's
#: output folder, so the page is named by its path in the repository and on the documentation site)
HIDDEN_KERNEL_DOCS = ('`docs/theory.md` in the renormpp repository (the documentation\'s Theory page), section "The '
                      'hidden kernel: does the shape renormalization hold?"')


def _finished(outdir: Path) -> list[tuple[dict, Path]]:
    stores = [PointStore(folder) for folder in sorted((outdir / "points").glob("*/"))]
    found = [(st.result(), st.folder) for st in stores if st.finished]
    return sorted(found, key=lambda r: (r[0]["N1"], r[0]["seed"]))


def pooled_draws(folders, keys=("eps_g", "overlap")) -> dict:
    """The observables ``keys`` of several points (same N1, other seeds) as the chains of one run."""
    import arviz as az

    parts = [az.from_netcdf(f / "observables.nc")["posterior"] for f in folders]
    return {k: np.concatenate([np.asarray(part[k].values) for part in parts], axis=0) for k in keys}


def pooled_starts(folders) -> list | None:
    """The kind of start of every chain of :func:`pooled_draws` (None where no point records them: one kind)."""
    import arviz as az

    from ..diagnostics.convert import chain_starts

    found = [chain_starts(az.from_netcdf(f / "observables.nc")) for f in folders]
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
    base = stages.solve_theory(cfg.model.model_copy(update={"N1": done[0][0]["N1"]}), data)
    ok = [(r, f) for r, f in done if r.get("status", "ok") == "ok"]
    pooled = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", diagnostics.ShortRunWarning)  # flagged in the tables as reliable=False
        for N1 in sorted({r["N1"] for r, _ in ok}):
            group = [(r, f) for r, f in ok if r["N1"] == N1]
            fit = base.refit("infinite_width", N1=N1)
            folders = [f for _, f in group]
            pooled.append(diagnostics.compare(pooled_draws(folders), fit, data.X_test, data.Y_test,
                                              method=cfg.run.error_method, sampler=group[0][0].get("sampler"),
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
        for t in theory.METHODS:
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
        lines += local_section(Sweep(cfg, data, base, done, pooled), outdir)
    lines += ["## Tables", "",
              "* [summary.csv](summary.csv): one row per point (N1, seed): the sampled eps_g and its error, each "
              "theory's eps_g, Delta and z, the worst overlap z, the hidden kernel's diagnosis, the sampler's "
              "acceptance, divergences and time.",
              "* [pooled.csv](pooled.csv): one row per width, quantity and theory, the seeds pooled: MC mean and "
              "error, prediction, delta, z, verdict and the equilibrium tests." if pooled else "", ""]
    return _write_report(outdir, [ln for i, ln in enumerate(lines) if ln or not (i and lines[i - 1] == "")], missing)


#: the one definition of Delta of every report, verdict and CSV (:func:`renormpp.diagnostics.compare`'s ``delta``)
DELTA_DEFINED = ("Δ = (MC - theory) / |theory|, signed: negative where the sampled networks lie below the theory; "
                 "z = (MC - theory) / sigma_MC, sigma_MC the error of the MC mean.")

#: a dash where a table has no value (a theory that does not apply at that width)
DASH = "—"

#: the marks of a width whose MC mean needs a caveat, and the caveat, printed once under the table
_MARKS = {"unreliable": ("¹", "the error bar does not hold (a run too short, or a frozen chain): z is no verdict"),
          "unsettled": ("²", "not settled (the chains disagree or the mean drifts): a gap may be the run's, not the "
                             "theory's"),
          "starts": ("³", "chains from different kinds of start disagree: not equilibrium")}


def _pct(x: float) -> str:
    """A signed relative deviation in percent, or a dash."""
    return DASH if not np.isfinite(x) else _percent(x)


def _z(z: float) -> str:
    return DASH if not np.isfinite(z) else f"{z:+.1f}"


def value_error(mean: float, error: float) -> str:
    """``mean ± error`` with the error to two significant digits and the mean to the same decimal place."""
    if not np.isfinite(mean):
        return DASH
    if not (np.isfinite(error) and error > 0):
        return f"{mean:.5g}"
    digits = max(0, 1 - int(np.floor(np.log10(error))))
    return f"{mean:.{digits}f} ± {error:.{digits}f}"


def _widths(pooled) -> list[dict]:
    """Per width (sorted by N1): the sampled eps_g, its caveats, and per theory prediction, signed Delta, z, verdict."""
    from .. import diagnostics, theory

    rows = []
    for ds in sorted(pooled, key=lambda d: d.attrs["N1"]):
        e = ds.sel(quantity="eps_g")
        marks = [k for k, flag in (("unreliable", not bool(e.reliable)),
                                   ("unsettled", "settled" in e and not bool(e.settled)),
                                   ("starts", "starts_apart" in e and bool(e.starts_apart))) if flag]
        row = dict(N1=float(ds.attrs["N1"]), mc=float(e.mc_mean), err=float(e.mc_error), marks=marks, ds=ds)
        for t in theory.METHODS:
            pred = float(e.prediction.sel(theory=t))
            delta = (row["mc"] - pred) / abs(pred) if np.isfinite(pred) and pred else np.nan
            row[t] = dict(pred=pred, delta=delta, z=float(e.z.sel(theory=t)) if np.isfinite(pred) else np.nan,
                          verdict=str(e.verdict.sel(theory=t).item()),
                          why=("" if np.isfinite(pred) else diagnostics.does_not_apply(ds, t)))
        rows.append(row)
    return rows


def _where(N1s) -> str:
    """``N1 = 50``, ``N1 = 50 and 400``, ``N1 = 50, 100 and 400``."""
    N1s = [f"{n:g}" for n in N1s]
    return "N1 = " + (N1s[0] if len(N1s) == 1 else ", ".join(N1s[:-1]) + " and " + N1s[-1])


def answer_table(pooled, P: int) -> list[str]:
    """The report's first table: per width N1, alpha = P/N1, the sampled eps_g ± its error, and for each theory that
    applies at some width its signed Delta and z (a dash where it does not apply); under it, once, why a theory does
    not apply (one sentence per theory) and what the marks on a width mean."""
    from .. import theory

    rows = _widths(pooled)
    shown = [t for t in theory.METHODS if any(np.isfinite(r[t]["pred"]) for r in rows)]
    head = ["N1", "alpha = P/N1", "MC eps_g ± sigma"] + [f"{t} {c}" for t in shown for c in ("Δ", "z")]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        mark = "".join(_MARKS[k][0] for k in r["marks"])
        cells = [f"{r['N1']:g}", f"{P / r['N1']:.3g}", value_error(r["mc"], r["err"]) + mark]
        cells += [c for t in shown for c in (_pct(r[t]["delta"]), _z(r[t]["z"]))]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    notes = []
    for k, (mark, text) in _MARKS.items():
        hit = [r["N1"] for r in rows if k in r["marks"]]
        if hit:
            notes.append(f"{mark} At {_where(hit)}: {text}.")
    for t, method in theory.METHODS.items():
        absent = [r for r in rows if not np.isfinite(r[t]["pred"])]
        if not absent:
            continue
        name = method.noun[0].upper() + method.noun[1:]
        whys = list(dict.fromkeys(r[t]["why"] for r in absent))
        if len(absent) == len(rows):
            where = "at any width here"
        else:
            where = f"at {_where([r['N1'] for r in absent])} ({DASH} in the table)"
        reason = whys[0] if len(whys) == 1 else "; ".join(
            f"at {_where([r['N1'] for r in absent if r[t]['why'] == w])}: {w}" for w in whys)
        notes.append(f"{name} ({t}) does not apply {where}: {reason}.")
    return out + ([" ".join(notes), ""] if notes else [])


def off_diagonal_section(pooled, class_names=None) -> list[str]:
    """The readout overlaps: the figures, and the output-output correlations called out, the off-diagonal
    <v_a v_b>/N1 sampled against the exact theory's Q*_ab/lambda1 (0 at infinite width) per width, as a table."""
    from .. import theory
    from ..diagnostics import Z_AGREE

    rows = _widths(pooled)
    D = int(pooled[0].attrs["D"])
    names = list(class_names) if class_names is not None else [str(a) for a in range(D)]
    N1s = [r["N1"] for r in rows]
    out = ["## Readout overlaps and the output-output correlations", "",
           "![readout overlaps <v_a v_b>/N1 against N1: the diagonal entries (top) and the off-diagonal ones (bottom), "
           "sampled (points) against the exact theory's Q*/lambda1 (solid) and the infinite width (dashed)]"
           "(overlaps_vs_N1.png)", "",
           f"![readout overlaps at {_where(N1s)}, one row per width: the exact theory's Q*/lambda1, the sampled "
           "<v_a v_b>/N1 and their z](overlaps.png)", ""]
    ref = theory.REFERENCE
    pairs = [(a, b) for a in range(D) for b in range(a + 1, D)]
    if pairs:
        keep = max(1, min(len(pairs), 6, 24 // len(rows)))
        first = rows[0]["ds"]
        size = {p: abs(float(first.prediction.sel(quantity=f"overlap[{p[0]},{p[1]}]", theory=ref))) for p in pairs}
        order = sorted(pairs, key=lambda p: -np.nan_to_num(size[p]))  # the pairs the theory correlates most
        chosen = sorted(order[:keep])
        table = ["| N1 | outputs (a, b) | sampled <v_a v_b>/N1 | exact Q*_ab/lambda1 | z against exact | z against 0 |",
                 "|---|---|---|---|---|---|"]
        resolved = agree = total = 0
        shaky = False
        for r in rows:
            ds = r["ds"]
            for a, b in pairs:
                q = ds.sel(quantity=f"overlap[{a},{b}]")
                mc, err = float(q.mc_mean), float(q.mc_error)
                z0 = mc / err if err > 0 else np.nan
                zt = float(q.z.sel(theory=ref))
                total += 1
                resolved += bool(np.isfinite(z0) and abs(z0) >= Z_AGREE)
                agree += bool(np.isfinite(zt) and abs(zt) < Z_AGREE)
                if (a, b) in chosen:
                    shaky |= not bool(q.reliable)
                    table.append(f"| {r['N1']:g} | ({names[a]}, {names[b]}) | {value_error(mc, err)}"
                                 f"{'' if bool(q.reliable) else _MARKS['unreliable'][0]} | "
                                 f"{_num(float(q.prediction.sel(theory=ref)))} | {_z(zt)} | {_z(z0)} |")
        out += ["At infinite width the readouts of different outputs are uncorrelated: every off-diagonal overlap "
                "<v_a v_b>/N1 is 0. At finite width the kernel's renormalization correlates them, and the exact "
                f"theory predicts Q*_ab/lambda1. Over {_count(len(rows), 'width')} and {_count(len(pairs), 'pair')}, "
                "the sampled "
                f"off-diagonal overlaps are resolved from 0 (|z| >= {Z_AGREE:g}) at {resolved} of {total}, and "
                f"agree with the exact theory (|z| < {Z_AGREE:g}) at {agree} of {total}"
                + (f"; the table shows the {keep} pairs that the theory correlates most, every pair is in pooled.csv"
                   if keep < len(pairs) else "") + ":", ""] + table + [""]
        if shaky:
            out += [f"{_MARKS['unreliable'][0]} {_MARKS['unreliable'][1][0].upper()}{_MARKS['unreliable'][1][1:]}.", ""]
    diag = []
    for r in rows:
        ds = r["ds"]
        d = ds.sel(quantity=[q for q, a, b in zip(ds.quantity.values, ds.a.values, ds.b.values) if a == b >= 0],
                   theory=ref)
        if np.isfinite(d.z.values).any():  # the diagonal overlap furthest (in error bars) from Q*/lambda1
            k = int(np.nanargmax(np.abs(d.z.values)))
            pred = float(d.prediction[k])
            diag.append({"N1": r["N1"], "overlap": (float(d.mc_mean[k]) - pred) / abs(pred),
                         "z_overlap": float(d.z[k])})
    if diag:
        out += [f"The diagonal overlaps <v_a v_a>/N1 against Q*_aa/lambda1, the entry furthest in error bars: "
                f"Δ {_span(diag, 'overlap')}.", ""]
    return out


def _num(x: float) -> str:
    return DASH if not np.isfinite(x) else f"{x:.4g}"


def verdict_sentences(pooled, data=None) -> list[str]:
    """One sentence per theory on eps_g over the widths, with the signed Delta and z: "agrees within 1.2% at every
    width (largest |z| 1.3)", or where it deviates, by how much at which width, and whether the gap shrinks as N1
    grows; then which theory is closest, and (where the exact theory deviates) what is known about such gaps."""
    from .. import theory

    rows = _widths(pooled)
    out = []
    for t, method in theory.METHODS.items():
        have = [r for r in rows if np.isfinite(r[t]["pred"])]
        if not have:
            continue
        agree = [r for r in have if r[t]["verdict"].startswith("agrees")]
        off = [r for r in have if r[t]["verdict"].startswith("deviates")]
        none = [r for r in have if not (r in agree or r in off)]
        parts = []
        if agree and len(agree) == len(have):
            every = ("at every width" if len(have) == len(rows) else "at the one width where it applies"
                     if len(have) == 1 else f"at the {len(have)} widths where it applies")
            parts.append(f"agrees within {_abs_pct(max(abs(r[t]['delta']) for r in agree))} {every} "
                         f"(largest |z| {max(abs(r[t]['z']) for r in agree):.1f})")
        else:
            if off:
                one = lambda r: f"{_pct(r[t]['delta'])} at N1 = {r['N1']:g} (z = {r[t]['z']:+.1f})"  # noqa: E731
                parts.append(f"deviates by {one(off[0])}" if len(off) == 1 else
                             f"deviates at {len(off)} of {len(have)} widths, by {one(off[0])} to {one(off[-1])}")
            if agree:
                parts.append(f"agrees at {_where([r['N1'] for r in agree])} (within "
                             f"{_abs_pct(max(abs(r[t]['delta']) for r in agree))})")
        for why in dict.fromkeys(_no_verdict(r[t]["verdict"]) for r in none):
            parts.append(f"no verdict at {_where([r['N1'] for r in none if _no_verdict(r[t]['verdict']) == why])}"
                         + (f" ({why})" if why else ""))
        finite = [r for r in have if np.isfinite(r[t]["delta"])]
        if len(finite) > 1 and off:
            gaps = np.abs([r[t]["delta"] for r in finite])
            if np.all(np.diff(gaps) < 0):
                parts.append("|Δ| shrinks as N1 grows")
            elif np.all(np.diff(gaps) > 0):
                parts.append("|Δ| grows with N1")
        if len(have) < len(rows):
            parts.append(f"it does not apply at {_where([r['N1'] for r in rows if r not in have])}")
        out.append(f"* **{t}** ({method.noun}): " + "; ".join(parts) + ".")
    ref, base = theory.REFERENCE, theory.BASELINE
    both = [r for r in rows if np.isfinite(r[ref]["delta"]) and np.isfinite(r[base]["delta"])]
    text = []
    if both:
        closer = sum(abs(r[ref]["delta"]) < abs(r[base]["delta"]) for r in both)
        text.append(f"The exact theory is closer to the sampled eps_g than the infinite-width limit at {closer} of "
                    f"{len(both)} widths.")
    if data is not None and any(np.isfinite(r[ref]["pred"]) and not r[ref]["verdict"].startswith("agrees")
                                for r in rows):
        P = data.X.shape[0]
        text.append(
            "What is known: the exact theory is the leading order as P and N1 grow at fixed alpha; at a small P a gap "
            "of a few percent is expected and, with small error bars, it is many error bars (z says whether a gap is "
            "resolved, Δ how large it is). Where the input dimension N0 stays fixed as P grows the gap does not "
            "vanish: in the finite-size scaling of studies/theory_beyond.py (alpha = 2, N0 = 50) it "
            "extrapolates to -5.3% ± 0.8% as N1 grows (the network learns the few input directions, which no kernel "
            "renormalization describes), and to +0.2% ± 0.9% where N0 grows with P. notebooks/07_validity_map.ipynb "
            f"maps where the theory holds over alpha and N0/P (here N0/P = {data.X.shape[1] / P:.3g}).")
    return out + [""] + ([" ".join(text), ""] if text else [])


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _no_verdict(verdict: str) -> str:
    """Why a verdict is none: the text after "no verdict: " (the error bar does not hold, the sampler failed)."""
    return verdict.split(":", 1)[1].strip() if verdict.startswith("no verdict:") else verdict


def _abs_pct(x: float) -> str:
    return f"{x:.1%}" if x >= 0.01 else f"{x:.2%}"


def per_width_section(pooled, done, outdir: Path) -> list[str]:
    """Where each width's detail is: its points' ``comparison.md`` (every quantity against every theory, the
    equilibrium tests and the hidden kernel), with the draws and the sampler of the pooled comparison."""
    out = ["## Per width", "",
           "Every quantity against every theory, with the equilibrium tests and the hidden kernel, per point:", ""]
    for ds in sorted(pooled, key=lambda d: d.attrs["N1"]):
        N1 = ds.attrs["N1"]
        links = ", ".join(f"[{f.name}]({f.relative_to(outdir).as_posix()}/comparison.md)"
                          for r, f in done if r["N1"] == N1 and r.get("status", "ok") == "ok")
        out.append(f"* N1 = {N1:g}: {links}; {ds.attrs['draws']} draws after a cut of {ds.attrs['cut']} per chain; "
                   f"sampler: {ds.attrs.get('sampler', 'not given')}")
    return out + [""]


def local_section(sw: Sweep, outdir: Path) -> list[str]:
    """The report's section on a CNN's local overlaps over patch pairs, per N1 (seeds pooled): the summary of
    :func:`renormpp.diagnostics.local.compare_local` and its figure (``local_overlaps_N1=...png``)."""
    import matplotlib.pyplot as plt

    from .. import plots
    from ..diagnostics import local

    out = ["## Local overlaps over patch pairs (CNN)", "",
           "The sampled sum_c v_(a,c,i) v_(b,c,j) / C against the theory's Q*_((a,i),(b,j)) / lambda1 (Eq. (C10) of "
           "renormpp.theory.conv), as departures from the infinite width delta / lambda1:", ""]
    for ds in local_overlaps(sw):
        name = f"local_overlaps_N1={ds.attrs['N1']}.png"
        fig = plots.local_overlaps(ds)
        plots.save(fig, outdir / name)
        plt.close(fig)
        out += [f"* N1 = {ds.attrs['N1']}: {local.summary(ds)}", "", f"  ![local overlaps]({name})", ""]
    return out


def kernel_section(kernels: dict, figure: bool) -> list[str]:
    """The report's section on the posterior's hidden kernel: per N1 (first seed) the verdict (does kernel shape
    renormalization hold: the measured K_post along the top directions of K as the theory predicts, Eq. (H2) of
    :mod:`renormpp.theory.hidden`), the alignment, and the oracle's eps_g (the theory with the measured K_post)."""
    out = ["## The hidden kernel", "",
           "The posterior's hidden kernel K_post = <sigma(h) sigma(h)^T>/N1 measured while sampling, against the prior "
           "(NNGP) kernel K and against the K_post that kernel shape renormalization itself predicts (it moves K along "
           "the target). The oracle is the exact theory with the measured K_post in place of K (it also counts the "
           "theory's own adaptation again: on a linear network, where the theory holds, it is 38% low; see "
           "renormpp.diagnostics.kernel). Details per point in its comparison.md.", ""]
    if figure:
        out += ["![hidden kernel against N1](kernel_vs_N1.png)", "",
                "The figure shows, against the width, how much the posterior's hidden kernel grew (above 1) or shrank "
                "(below 1) against the prior kernel along the prior kernel's top directions (left) and how well it "
                "lines up with the labels (right), the sampled networks as points and the theory's prediction dashed: "
                "a gap between a point and its line of more than a few error bars (the verdicts below) is an "
                "adaptation of the kernel that the theory (kernel shape renormalization) does not predict, a point on "
                "its line a kernel that moved as the theory says. The equations, (H1) and (H2): "
                f"{HIDDEN_KERNEL_DOCS}.", ""]
    out += ["| N1 | kernel | alignment K -> K_post (theory) | eps_g theory | eps_g oracle |", "|---|---|---|---|---|"]
    for N1, k in sorted(kernels.items()):
        out.append(f"| {N1:g} | {k['verdict']} | {k['alignment']:.4f} -> {k['alignment_post']:.4f} ± "
                   f"{k['alignment_err']:.4f} ({k['alignment_theory']:.4f}) | {k['theory_eps_g']:.5g} | "
                   f"{k['oracle_eps_g']:.5g} ± {k['oracle_err']:.2g} |")
    return out + [""]


def _percent(x: float) -> str:
    return f"{x:+.1%}" if abs(x) >= 0.01 else f"{x:+.2%}"


def _span(rows, key) -> str:
    """``Delta (z)`` at the first and last width, e.g. "-8.7% (z -28) at N1 = 50 to -1.3% (z -40) at N1 = 800"."""
    first, last = rows[0], rows[-1]
    one = lambda r: f"{_percent(r[key])} (z {r['z_' + key]:+.1f}) at N1 = {r['N1']:g}"  # noqa: E731
    return one(first) if len(rows) == 1 else f"{one(first)} to {one(last)}"


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
