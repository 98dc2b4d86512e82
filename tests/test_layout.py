"""The repository's layout a reader finds things by: no module of renormpp/ longer than a reader takes in (600 lines),
every benchmark named in benchmarks/README.md with its table, every study in studies/README.md with the result it
produced."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: the most lines a module of renormpp/ may have: past it, split it into a package of one idea a module
MAX_LINES = 600


def _long_modules(root: Path, limit: int) -> list[str]:
    return [f"{p.relative_to(root.parent)}: {n} lines" for p in sorted(root.rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > limit]


def test_no_module_of_the_package_is_longer_than_600_lines():
    long = _long_modules(ROOT / "renormpp", MAX_LINES)
    assert not long, "modules over 600 lines (split them into packages of one idea a module):\n" + "\n".join(long)


def test_the_line_count_finds_a_long_module(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "short.py").write_text("x = 1\n" * 600)
    (package / "long.py").write_text("x = 1\n" * 601)
    assert _long_modules(package, MAX_LINES) == ["pkg/long.py: 601 lines"]


def _unnamed_scripts(folder: Path) -> list[str]:
    """The scripts of ``folder`` that its README.md does not name (as ``name.py``)."""
    readme = (folder / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"\b(\w+\.py)\b", readme))
    return [p.name for p in sorted(folder.glob("*.py")) if p.name not in named]


@pytest.mark.parametrize("folder", ["benchmarks", "studies"])
def test_every_script_is_named_in_its_folders_readme(folder):
    missing = _unnamed_scripts(ROOT / folder)
    assert not missing, f"{folder}/README.md does not name {missing}: give each its section or row"


def test_the_readme_check_finds_a_script_it_does_not_name(tmp_path):
    (tmp_path / "README.md").write_text("## `a.py`: speed\n\nSee also `b.py`.\n")
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_text("")
    assert _unnamed_scripts(tmp_path) == ["c.py"]


def test_the_benchmarks_are_not_studies():
    """A script lives in one of the two folders, and the Makefile's `bench` target names benchmarks that exist."""
    both = {p.name for p in (ROOT / "benchmarks").glob("*.py")} & {p.name for p in (ROOT / "studies").glob("*.py")}
    assert not both, f"in both benchmarks/ and studies/: {sorted(both)}"
    bench = re.search(r"^bench:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), flags=re.M)
    assert bench, "the Makefile has no bench target"
    scripts = re.findall(r"\b(benchmarks/\w+\.py)\b", bench[1])
    assert scripts and all((ROOT / s).is_file() for s in scripts), scripts
