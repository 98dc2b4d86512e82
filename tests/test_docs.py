"""The documentation site builds offline with warnings as errors (``mkdocs build --strict``, the notebooks rendered
unexecuted here; ``make docs`` executes them), and has its pages: the README as home, the API from the docstrings,
every notebook, the benchmarks and the paper's figures."""
from __future__ import annotations

import argparse
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_documentation_site_builds_without_warnings(tmp_path):
    env = {**os.environ, "RENORMPP_DOCS_EXECUTE": "false", "NO_MKDOCS_2_WARNING": "1"}
    site = tmp_path / "site"
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "WARNING" not in run.stderr
    home = (site / "index.html").read_text()
    assert "Run it" in home and "Test it" in home  # the README and its two commands
    api = (site / "api" / "index.html").read_text()
    for name in ("renormpp.theory.solve", "renormpp.experiments.paper", "renormpp.diagnostics"):
        assert name in api
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert (site / "notebooks" / nb.stem / "index.html").is_file(), nb.name
    figures = (site / "figures" / "index.html").read_text()
    assert "renormpp paper FIGURE" in figures and "quick/fig1a/fig1a.png" in figures
    assert (site / "figures" / "quick" / "fig1a" / "fig1a.png").is_file()
    assert "Issue 17" in (site / "benchmarks" / "index.html").read_text()


# The pages that describe the code as it is today. docs/benchmark-history.md is left out: it keeps each round as it
# was, with the names and plans of its day.
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "benchmark-history.md"),
         ROOT / "benchmarks" / "README.md"]


def _paragraphs(text: str) -> list[str]:
    """Blank-line paragraphs, and the bullets of a list one by one, each joined into one line."""
    return [" ".join(p.split()) for block in re.split(r"\n\s*\n", text) for p in re.split(r"\n(?=\* )", block)]


def test_the_validity_page_says_the_discrepancy_figure_draws_unreliable_points_hollow():
    """docs/validity.md said its discrepancy figure "does not mark" the points whose error bar does not hold, after
    issue 34 (commit f49d4b2) had made the figure draw them hollow (issue 44, item 5). The figure's behaviour is
    checked here, so that the page and the plot are changed together."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    import renormpp as rp

    rows = pd.DataFrame([dict(series="s", theory="exact", quantity="eps_g", N1=N1, delta=delta, mc_error=1e-4,
                              prediction=0.05, reliable=reliable)
                         for N1, delta, reliable in ((100, 0.10, True), (400, 0.02, False))])
    fig = rp.plots.discrepancy_vs_N1(rows, theories=("exact",))
    faces = {str(line.get_markerfacecolor()) for line in fig.axes[0].lines if len(line.get_xdata()) == 1}
    plt.close(fig)
    assert "none" in faces, "the discrepancy figure no longer draws unreliable points hollow: change docs/validity.md"
    page = (ROOT / "docs" / "validity.md").read_text()
    said = [p for p in _paragraphs(page) if "discrepancy figure" in p and "error bar" in p]
    assert said, "docs/validity.md no longer says how its discrepancy figure shows the error bars that do not hold"
    for p in said:
        assert "hollow" in p and not re.search(r"does not (mark|show)", p), p


# What a page says about a result: that it is recorded, or plainly that it has not been run; never a plan or the
# jargon of a working session ("to be run again", "comes here when it has run", "this stop"), which go stale.
PENDING = re.compile(r"comes here when|\b(?:is|are) to be (?:run|sampled|drawn|redrawn)\b|\bnot run yet\b|"
                     r"\bnot yet (?:run|sampled|drawn)\b|\bwill be (?:run|sampled|drawn|redrawn)\b|"
                     r"\bthis stop\b(?![ -](?:rule|on))",
                     re.IGNORECASE)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_docs_say_what_has_run_not_what_will(page):
    found = [m.group(0) for m in PENDING.finditer(page.read_text())]
    assert not found, f"{page.relative_to(ROOT)} promises results instead of stating them: {found}"


# A pointer into another page by section: `benchmarks/README.md`, "hard_points.py".
POINTER = re.compile(r"`?((?:benchmarks/README|docs/[\w-]+)\.md)`?,? \"([^\"]+)\"")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_pointer_to_a_section_finds_its_heading(page):
    for target, section in POINTER.findall(page.read_text()):
        headings = [line.lower() for line in (ROOT / target).read_text().splitlines() if line.startswith("#")]
        assert any(section.lower() in h for h in headings), (
            f"{page.relative_to(ROOT)} points to the section {section!r} of {target}, which has no such heading")


def _cli_parser():
    from renormpp import cli

    parser = cli._parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices


def test_the_readme_layout_is_the_package():
    """Every path in the README's layout table exists, every public module and sub-package of renormpp is in it, and
    the row of the command line names every command of ``renormpp --help``."""
    text = (ROOT / "README.md").read_text()
    layout = text[text.index("## Layout"):]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([^`]+)` \|(.*)\|$", layout, flags=re.M)}
    for path in rows:
        for part in re.split(r",\s*`?", path):
            assert (ROOT / part.strip("`")).exists(), f"README's layout names {part}, which is not there"
    package = ROOT / "renormpp"
    public = {f"renormpp/{p.name}" + ("/" if p.is_dir() else "") for p in package.iterdir()
              if not p.name.startswith(("_", ".")) and (p.suffix == ".py" or (p / "__init__.py").is_file())}
    listed = {part.strip("`") for path in rows for part in re.split(r",\s*`?", path)}
    assert not public - listed, f"README's layout misses {sorted(public - listed)}"
    cli_row = rows["renormpp/cli.py"]
    missing = [name for name in _cli_parser() if f"`renormpp {name}" not in cli_row]
    assert not missing, f"README's layout row of renormpp/cli.py misses the commands {missing}"


def test_every_name_and_flag_the_docs_use_exists():
    """Every ``rp.x.y`` / ``renormpp.x.y`` a page names resolves (attribute or module), and every ``--flag`` written
    after ``renormpp COMMAND`` is an option of that command's parser."""
    import renormpp

    commands = _cli_parser()

    def options(parser) -> set:
        out = set()
        for action in parser._actions:
            out |= set(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                for p in action.choices.values():
                    out |= options(p)
        return out

    problems = []
    for page in PAGES:
        text, where = page.read_text(), page.relative_to(ROOT)
        for m in re.finditer(r"(?<![\w./-])(?:rp|renormpp)((?:\.[A-Za-z_]\w*)+)", text):
            obj, path = renormpp, "renormpp"
            for name in m.group(1)[1:].split("."):
                path += "." + name
                try:
                    obj = getattr(obj, name) if hasattr(obj, name) else importlib.import_module(path)
                except ImportError:
                    problems.append(f"{where}: {m.group(0)}")
                    break
        commands_written = re.findall(r"`(renormpp [^`\n]+)`", text) + re.findall(r"^\s*(renormpp [^\n]+)$", text,
                                                                                 flags=re.M)
        for line in commands_written:
            words = line.split("#")[0].split()
            if len(words) < 2 or words[1] not in commands:
                continue
            known = options(commands[words[1]])
            problems += [f"{where}: {line} ({w})" for w in words[2:]
                         if w.startswith("--") and w.split("=")[0] not in known]
    assert not problems, "\n".join(problems)
