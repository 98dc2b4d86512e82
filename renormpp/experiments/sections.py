"""The sections of a sweep's report (:func:`renormpp.experiments.report.report`), each a list of markdown lines: the
answer table (each theory's signed Delta and z per width), the off-diagonal overlaps (the output-output
correlations), one verdict sentence per theory, the links to each width's ``comparison.md``, the CNN's local overlaps
and the hidden kernel.

Delta is signed everywhere, with one definition (:data:`DELTA_DEFINED`): (MC - theory) / |theory|.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

#: Where a reader of the report finds the equations of the hidden kernel, (H1) and (H2) (the report lives in the run's
#: output folder, so the page is named by its path in the repository and on the documentation site)
HIDDEN_KERNEL_DOCS = ('`docs/theory.md` in the renormpp repository (the documentation\'s Theory page), section "The '
                      'hidden kernel: does the shape renormalization hold?"')


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


def _columns(pooled) -> list[str]:
    """The theories the comparisons show, in their order: every method of :data:`renormpp.theory.METHODS`, then the
    theories beyond them that a width's comparison has (``[theory] methods``)."""
    out = []
    for ds in pooled:
        out += [str(t) for t in ds.theory.values if str(t) not in out]
    return out


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
        for t in _columns(pooled):
            if t not in ds.theory.values:  # not solved at this width
                row[t] = dict(pred=np.nan, delta=np.nan, z=np.nan, verdict="", why="it was not solved at this width")
                continue
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


def closest(row: dict, shown: list) -> str:
    """The theory with the smallest |Δ| at a width of :func:`_widths` among ``shown``, and that Δ: ``adaptive
    (-2.1%)``; a dash where none predicts."""
    have = [t for t in shown if np.isfinite(row[t]["delta"])]
    if not have:
        return DASH
    best = min(have, key=lambda t: abs(row[t]["delta"]))
    return f"{best} ({_pct(row[best]['delta'])})"


def answer_table(pooled, P: int) -> list[str]:
    """The report's first table: per width N1, alpha = P/N1, the sampled eps_g ± its error, and for each theory that
    applies at some width its signed Delta and z (a dash where it does not apply); under it, once, why a theory does
    not apply (one sentence per theory) and what the marks on a width mean. The last column names the theory closest
    to the sampled eps_g at each width (:func:`closest`)."""
    from .. import theory

    rows = _widths(pooled)
    shown = [t for t in _columns(pooled) if any(np.isfinite(r[t]["pred"]) for r in rows)]
    head = ["N1", "alpha = P/N1", "MC eps_g ± sigma"] + [f"{t} {c}" for t in shown for c in ("Δ", "z")] + ["closest"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        mark = "".join(_MARKS[k][0] for k in r["marks"])
        cells = [f"{r['N1']:g}", f"{P / r['N1']:.3g}", value_error(r["mc"], r["err"]) + mark]
        cells += [c for t in shown for c in (_pct(r[t]["delta"]), _z(r[t]["z"]))]
        cells.append(closest(r, shown))
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    notes = []
    for k, (mark, text) in _MARKS.items():
        hit = [r["N1"] for r in rows if k in r["marks"]]
        if hit:
            notes.append(f"{mark} At {_where(hit)}: {text}.")
    for t in _columns(pooled):
        absent = [r for r in rows if not np.isfinite(r[t]["pred"])]
        if not absent:
            continue
        noun = theory.noun_of(t.partition("[")[0])
        name = noun[0].upper() + noun[1:]
        verb = "has no prediction" if all(w.startswith("the fit did not converge") for w in
                                          (r[t]["why"] for r in absent)) else "does not apply"
        whys = list(dict.fromkeys(r[t]["why"] for r in absent))
        if len(absent) == len(rows):
            where = "at any width here"
        else:
            where = f"at {_where([r['N1'] for r in absent])} ({DASH} in the table)"
        reason = whys[0] if len(whys) == 1 else "; ".join(
            f"at {_where([r['N1'] for r in absent if r[t]['why'] == w])}: {w}" for w in whys)
        notes.append(f"{name} ({t}) {verb} {where}: {reason}.")
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
    for t in _columns(pooled):
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
        out.append(f"* **{t}** ({theory.noun_of(t)}): " + "; ".join(parts) + ".")
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


def local_section(comparisons: list, outdir: Path) -> list[str]:
    """The report's section on a CNN's local overlaps over patch pairs, per N1 (seeds pooled): the summary of each
    :func:`renormpp.diagnostics.local.compare_local` Dataset of ``comparisons``
    (:func:`renormpp.experiments.report.local_overlaps`) and its figure (``local_overlaps_N1=...png``)."""
    import matplotlib.pyplot as plt

    from .. import plots
    from ..diagnostics import local

    out = ["## Local overlaps over patch pairs (CNN)", "",
           "The sampled sum_c v_(a,c,i) v_(b,c,j) / C against the theory's Q*_((a,i),(b,j)) / lambda1 (Eq. (C10) of "
           "renormpp.theory.conv), as departures from the infinite width delta / lambda1:", ""]
    for ds in comparisons:
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
