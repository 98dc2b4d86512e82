"""The tables of the documentation's result pages, generated from the stored results.

A table on docs/figures.md, docs/results.md or docs/validity.md lies between two markers::

    <!-- table: figure full/fig1a -->
    ...the table this script writes...
    <!-- /table -->

and is rewritten from its source: ``figure SIZE/NAME`` from the figure's stored ``docs/figures/SIZE/NAME/data.csv``
(the sampled networks against the exact theory per series and width), ``baselines SIZE/NAME`` from the stored
``data.csv`` of Fig. 3 and 4 (Adam against the best infinite-width GP), ``provenance SIZE/NAME`` from its
``provenance.json`` (the version and the command that drew it). A table whose run outputs are not stored carries
``<!-- record: log/FILE.md -->`` instead: it is a dated record of the research log and must appear there verbatim.

``python scripts/docs_tables.py`` rewrites the pages; ``--check`` only says which table differs from its source (the
test ``tests/test_docs.py`` runs it). Δ = (MC − theory)/|theory| and z = (MC − theory)/σ are recomputed from the
stored means, errors and predictions, never copied from a stored column.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = ("figures.md", "results.md", "validity.md")
BLOCK = re.compile(r"(<!-- table: (?P<kind>\w+) (?P<arg>[\w./-]+) -->\n)(?P<body>.*?)(<!-- /table -->)", re.S)
RECORD = re.compile(r"<!-- record: (?P<log>log/[\w-]+\.md) -->\n(?P<body>(?:\|.*\n)+)")
Z_AGREE = 3.0


def _pct(x: float) -> str:
    return "–" if not np.isfinite(x) else (f"{x:+.1%}" if abs(x) >= 0.01 else f"{x:+.2%}").replace("-", "−")


def _num(x: float, err: float | None = None) -> str:
    """``0.04406 ± 0.00009``: the mean to the error's second significant digit."""
    if err is None or not np.isfinite(err) or err <= 0:
        return f"{x:.4g}"
    digits = max(0, 1 - int(np.floor(np.log10(err))))
    return f"{x:.{digits}f} ± {err:.{digits}f}"


def _signed(x: float, fmt: str) -> str:
    return format(x, fmt).replace("-", "−")


def _status(rows: pd.DataFrame) -> str:
    """Whether every quantity's error bar holds (reliable: τ_int resolved) and settled (no drift, chains agree)."""
    bad = [q for q, r in rows.iterrows() if not (bool(r.reliable) and bool(r.get("settled", True)))]
    if not bad:
        return "every error bar holds"
    if "eps_g" in bad:
        return "hollow: the error bar of ε_g does not hold"
    return f"ε_g holds; not settled: {', '.join(bad)}"


def figure_table(arg: str) -> str:
    """Per series and width: the sampled ε_g against the exact theory, the readout overlaps against Q*/λ1, and
    whether the error bars hold."""
    data = pd.read_csv(DOCS / "figures" / arg / "data.csv")
    exact = data[data.theory == "exact"]
    lines = ["| series | N1 (α) | ε_g, MC | exact theory | Δ, z | diagonal overlaps: Δ against Q\\*/λ1 | "
             "off-diagonal: largest \\|MC − Q\\*/λ1\\| | status |", "|---|---|---|---|---|---|---|---|"]
    P = _P(arg)
    for (series, N1), rows in exact.groupby(["series", "N1"], sort=False):
        rows = rows.set_index("quantity")
        e = rows.loc["eps_g"]
        delta, z = (e.mc_mean - e.prediction) / abs(e.prediction), (e.mc_mean - e.prediction) / e.mc_error
        over = rows[rows.index.str.startswith("overlap[")]
        ab = over.index.str.extract(r"overlap\[(\d+),(\d+)\]").astype(int).to_numpy()
        diag, off = over[ab[:, 0] == ab[:, 1]], over[ab[:, 0] != ab[:, 1]]
        dd = (diag.mc_mean - diag.prediction) / diag.prediction.abs()
        diag_txt = (_pct(dd.min()) if dd.min() == dd.max() else f"{_pct(dd.min())} to {_pct(dd.max())}") \
            if len(dd) else "–"
        off_txt = f"{np.max(np.abs(off.mc_mean - off.prediction)):.4f}" if len(off) else "–"
        alpha = f" ({P / N1:.3g})" if P else ""
        lines.append(f"| {series} | {N1:g}{alpha} | {_num(e.mc_mean, e.mc_error)} | {e.prediction:.5g} | "
                     f"{_pct(delta)}, {_signed(z, '+.1f')} | {diag_txt} | {off_txt} | {_status(rows)} |")
    return "\n".join(lines) + "\n"


def _P(arg: str) -> int | None:
    """The number of training points of a figure's series, from its provenance (None where not recorded)."""
    info = _provenance(arg)
    if not info:
        return None
    sizes = {c["data"].get("P") for c in info["configs"].values() if "data" in c}
    return sizes.pop() if len(sizes) == 1 else None


def _provenance(arg: str) -> dict | None:
    path = DOCS / "figures" / arg / "provenance.json"
    return json.loads(path.read_text()) if path.exists() else None


def baselines_table(arg: str) -> str:
    """Adam's test MSE after the hyperparameter search against the best infinite-width GP's, per width."""
    data = pd.read_csv(DOCS / "figures" / arg / "data.csv")
    lines = ["| series | N1 | Adam test MSE | best GP test MSE | Adam / GP |", "|---|---|---|---|---|"]
    for series, rows in data.groupby("series", sort=False):
        gp = float(rows[rows.model == "best_gp"].mean_test_mse.iloc[0])
        for _, r in rows[rows.model == "adam"].iterrows():
            lines.append(f"| {series} | {r.N1:g} | {r.mean_test_mse:.4g} | {gp:.4g} | {r.mean_test_mse / gp:.3f} |")
    return "\n".join(lines) + "\n"


def provenance_table(arg: str) -> str:
    """What drew each stored figure (``all``) or one (``SIZE/NAME``): the renormpp version and commit, the date, the
    command; a figure drawn before figures recorded it says so."""
    folders = sorted((DOCS / "figures").glob("*/*/data.csv")) if arg == "all" else [DOCS / "figures" / arg / "x"]
    lines = ["| figure | drawn by | date | command |", "|---|---|---|---|"]
    for f in folders:
        name = f"{f.parent.parent.name}/{f.parent.name}"
        info = _provenance(name)
        if info is None:
            lines.append(f"| [{name}](figures/{name}/summary.md) | not recorded (a version before figures recorded "
                         "it): rerun it before quoting | – | – |")
            continue
        commit = f" (commit {info['commit']})" if info.get("commit") else ""
        lines.append(f"| [{name}](figures/{name}/summary.md) | renormpp {info['renormpp']}{commit} | {info['date']} "
                     f"| `{info['command']}` |")
    return "\n".join(lines) + "\n"


KINDS = {"figure": figure_table, "baselines": baselines_table, "provenance": provenance_table}


def render(text: str) -> str:
    """``text`` with every generated table rewritten from its source."""
    return BLOCK.sub(lambda m: m.group(1) + KINDS[m.group("kind")](m.group("arg")) + m.group(5), text)


def problems(page: str) -> list[str]:
    """What is wrong with ``docs/page``: a generated table that differs from its source, a record table missing from
    its log, a table of results that is neither."""
    text = (DOCS / page).read_text()
    out = []
    for m in BLOCK.finditer(text):
        fresh = KINDS[m.group("kind")](m.group("arg"))
        if fresh != m.group("body"):
            out.append(f"{page}: the table '{m.group('kind')} {m.group('arg')}' differs from its source")
    for m in RECORD.finditer(text):
        if m.group("body") not in (DOCS / m.group("log")).read_text():
            out.append(f"{page}: a record table is not in {m.group('log')} verbatim: {m.group('body')[:80]!r}")
    rest = RECORD.sub("", BLOCK.sub("", text))
    for line in rest.splitlines():
        if line.startswith("|") and re.search(r"\d%|±|\d\.\d{2,}", line):
            out.append(f"{page}: a table row with results that no source generates: {line[:100]!r}")
    return out


def main(argv: list[str]) -> int:
    if "--check" in argv:
        found = [p for page in PAGES for p in problems(page)]
        print("\n".join(found) or "every table matches its source")
        return 1 if found else 0
    for page in PAGES:
        path = DOCS / page
        text = path.read_text()
        if render(text) != text:
            path.write_text(render(text))
            print(f"rewrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
