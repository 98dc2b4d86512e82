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
    assert "renormpp.spec.Spec" in api
    figures = (site / "figures" / "index.html").read_text()
    assert "renormpp paper fig1a" in figures and "full/fig1a/fig1a.png" in figures
    assert (site / "figures" / "full" / "fig1a" / "fig1a.png").is_file()
    assert "<h1" in (site / "benchmarks" / "index.html").read_text()  # benchmarks/README.md, made a page by the hook
    assert "validity/map_linear_erf.png" in (site / "validity" / "index.html").read_text()
    assert (site / "results" / "index.html").is_file()
    # the research log is built (the reference pages link into it) but is not in the navigation
    for name in ("validity", "figures", "benchmark-history"):
        assert (site / "log" / name / "index.html").is_file(), name
    assert (site / "log" / "index.html").is_file()
    nav = set(re.findall(r'<a[^>]*class="md-nav__link[^"]*"[^>]*href="([^"]*)"', home)
              + re.findall(r'<a[^>]*href="([^"]*)"[^>]*class="md-nav__link', home))
    assert {"results/", "validity/", "figures/"} <= nav, sorted(nav)
    assert not [h for h in nav if re.match(r"(\.\./)*log/", h)], "the research log is in the site's navigation"


# The pages that describe the code as it is today: the reference pages docs/*.md. The research log, docs/log/, is
# left out: it keeps each run as it was, with the names and plans of its day.
REFERENCE = sorted((ROOT / "docs").glob("*.md"))
LOG = ROOT / "docs" / "log"
PAGES = [ROOT / "README.md", *REFERENCE, ROOT / "benchmarks" / "README.md"]


def _nav() -> list[str]:
    """Every page of mkdocs.yml's navigation, as a path under docs/."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)  # !ENV and friends: not needed here
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)

    def walk(item):
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            for value in item.values():
                yield from walk(value)
        elif isinstance(item, list):
            for value in item:
                yield from walk(value)

    return list(walk(config["nav"])), config


def test_the_research_log_is_apart_from_the_navigation():
    """The dated record lives in docs/log/ (with a README that says what it is), outside the navigation; every
    reference page docs/*.md is in the navigation."""
    nav, config = _nav()
    assert [p for p in nav if p.startswith("log/") or p.startswith("log")] == [], nav
    assert "/log/" in config.get("not_in_nav", ""), "mkdocs.yml's not_in_nav no longer names /log/"
    for name in ("README.md", "validity.md", "figures.md", "benchmark-history.md"):
        assert (LOG / name).is_file(), f"docs/log/{name} is missing"
    missing = [p.name for p in REFERENCE if p.name not in nav]
    assert not missing, f"reference pages not in mkdocs.yml's nav: {missing}"


# The words of a working session, which belong in the research log, the changelog and commit messages.
HISTORY = re.compile(r"\bissues? ?\d+|\bsittings?\b|before the fix", re.IGNORECASE)


def test_the_reference_pages_say_what_holds_now_without_history():
    """No "issue N", "sitting" or "before the fix" in the pages of docs/ outside the log: the reference pages and
    every page of the navigation that lives in docs/ (the figures' summaries), nor in the navigation's titles."""
    nav, _ = _nav()
    pages = set(REFERENCE) | {ROOT / "docs" / p for p in nav if (ROOT / "docs" / p).is_file() and p.endswith(".md")}
    found = {str(p.relative_to(ROOT)): HISTORY.findall(p.read_text()) for p in sorted(pages)}
    found = {k: v for k, v in found.items() if v}
    assert not found, f"history words in the reference docs (move them to docs/log/): {found}"
    titles = re.findall(r"^\s*- ([^:\n]+):", (ROOT / "mkdocs.yml").read_text().split("\nnav:")[1], flags=re.M)
    assert not [t for t in titles if HISTORY.search(t)], titles


def test_the_history_check_catches_history():
    for text in ("as issue 46 asked", "Issue 17's targets", "in the second sitting", "before the fix of"):
        assert HISTORY.search(text), text
    for text in ("the paper's issue", "it issues a warning", "after the fixed warmup"):
        assert not HISTORY.search(text), text


# A fenced block with a command that reproduces what the page says.
FENCED = re.compile(r"^```(?:bash|python|console)\n(.*?)^```", re.M | re.S)
COMMAND = re.compile(r"^\s*(?:renormpp |python |\.venv/bin/|make |import renormpp)", re.M)


@pytest.mark.parametrize("page", REFERENCE, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_reference_page_has_a_command_block(page):
    blocks = FENCED.findall(page.read_text())
    assert any(COMMAND.search(b) for b in blocks), (
        f"{page.relative_to(ROOT)} has no code block with the command that reproduces it")


# A pointer into another page by section: `benchmarks/README.md`, "hard_points.py".
POINTER = re.compile(r"`?((?:benchmarks/README|docs/(?:log/)?[\w-]+)\.md)`?,? \"([^\"]+)\"")


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


# ---- the numbers of the result pages come from the stored results (scripts/docs_tables.py) ---------------------------
def _docs_tables():
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_tables", ROOT / "scripts" / "docs_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("page", ["figures.md", "results.md", "validity.md"])
def test_every_table_of_results_is_written_from_its_source(page):
    """Each table of a result page is the one scripts/docs_tables.py writes from the stored data.csv (or a dated
    record of the research log, verbatim); `python scripts/docs_tables.py` rewrites them."""
    assert _docs_tables().problems(page) == []


def test_the_docs_numbers_check_catches_a_number_typed_by_hand(tmp_path, monkeypatch):
    import shutil

    dt = _docs_tables()
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    monkeypatch.setattr(dt, "DOCS", tmp_path / "docs")
    page = tmp_path / "docs" / "figures.md"
    text = page.read_text()
    # the exact theory's eps_g of Fig. 2, recomputed from data.csv, then changed on the page
    import pandas as pd

    data = pd.read_csv(tmp_path / "docs" / "figures" / "full" / "fig2" / "data.csv")
    pred = data[(data.quantity == "eps_g") & (data.theory == "exact")].prediction.iloc[0]
    assert f"| {pred:.5g} |" in text
    page.write_text(text.replace(f"| {pred:.5g} |", f"| {pred * 1.01:.5g} |", 1))
    assert any("differs from its source" in p for p in dt.problems("figures.md"))
    page.write_text(text + "\n| a | 0.0123 ± 0.0004 |\n")  # a table of results outside any generated block
    assert any("no source generates" in p for p in dt.problems("figures.md"))
    val = tmp_path / "docs" / "validity.md"
    v = val.read_text()
    marker = "<!-- record: log/validity.md -->\n"
    at = v.index(marker) + len(marker)
    row_end = v.index("\n", v.index("\n", v.index("\n", at) + 1) + 1)  # the record's first data row
    val.write_text(v[:row_end] + " changed" + v[row_end:])
    assert any("not in log/validity.md verbatim" in p for p in dt.problems("validity.md"))
