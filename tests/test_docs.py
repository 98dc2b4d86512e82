"""The documentation site builds offline with warnings as errors (``mkdocs build --strict``, the notebooks rendered
unexecuted here; ``make docs`` executes them), and has its pages: the README as home, the API from the docstrings,
every notebook, the benchmarks and the paper's figures."""
from __future__ import annotations

import os
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
