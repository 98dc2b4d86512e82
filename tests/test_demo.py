"""`renormpp demo` keeps the README's promise: it runs as a user runs it, records its own wall time, and that time is
within the README's range (by 30%) once scaled by how fast this machine runs a fixed reference workload
(tests/reference_workload.py), timed here before and after the demo; and its report shows what a first report should.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from renormpp.experiments import demo

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SLACK = 1.3  # a demo 30% slower than promised, on a machine scaled to the promise's, fails


def promise() -> tuple[float, float, float]:
    """(lo, hi) minutes of the README's "Run it" paragraph and the reference workload's seconds on the machine where
    they were measured."""
    head = README.read_text().split("```bash\nmake demo", 1)[0]
    minutes = re.search(r"(\d+(?:\.\d+)?)[–-](\d+(?:\.\d+)?) minutes", head)
    ref = re.search(r"reference\s+workload[^)]*?\)?\s+takes\s+(\d+(?:\.\d+)?) s", head)
    assert minutes and ref, "the README's 'Run it' paragraph must state its minutes and the reference workload's time"
    return float(minutes[1]), float(minutes[2]), float(ref[1])


def _clean_env() -> dict:
    """This environment without the test session's compilation cache: a user's first demo compiles everything."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_COMPILATION_CACHE", "JAX_PERSISTENT_CACHE"))}
    return env | {"MPLBACKEND": "Agg"}


def reference_seconds(repeats: int = 3) -> float:
    """The median of ``repeats`` runs of the reference workload (a few seconds each, noisy by some 20%)."""
    runs = [json.loads(subprocess.run([sys.executable, str(ROOT / "tests" / "reference_workload.py")],
                                      env=_clean_env(), capture_output=True, text=True, check=True).stdout)["seconds"]
            for _ in range(repeats)]
    return float(sorted(runs)[repeats // 2])


def test_the_readme_states_the_promise_and_its_machine():
    lo, hi, ref = promise()
    assert 0 < lo < hi <= 5.0, "issue 44: the demo in at most 5 minutes on the slower machines of this kind"
    head = README.read_text().split("```bash\nmake demo", 1)[0]
    assert "AMD EPYC" in head and "measured" in head  # the machines the range was measured on


@pytest.mark.slow
@pytest.mark.alone  # timed on cores nothing else uses: `make check-demo`, CI's step after `make test`
def test_the_demo_keeps_the_readme_promise_and_shows_a_first_report(tmp_path):
    lo, hi, ref = promise()
    before = reference_seconds()
    subprocess.run([sys.executable, "-m", "renormpp.cli", "demo", "--out", str(tmp_path / "demo"), "--no-progress"],
                   env=_clean_env(), check=True, capture_output=True, text=True, cwd=tmp_path)
    after = reference_seconds()
    record = json.loads((tmp_path / "demo" / "timing.json").read_text())
    assert record["size"] == "full" and not record["resumed"] and len(record["points_sampled"]) == len(demo.CONFIG["model"]["N1"])
    scale = (before + after) / 2 / ref
    allowed = SLACK * hi * 60 * scale
    print(f"demo {record['wall_seconds']:.0f} s; reference {before:.1f} and {after:.1f} s here against {ref} s where "
          f"the promise was measured: allowed {allowed:.0f} s")
    assert record["wall_seconds"] <= allowed, (
        f"the demo took {record['wall_seconds']:.0f} s, more than {SLACK} x the README's {hi} minutes scaled by this "
        f"machine's reference workload ({(before + after) / 2:.1f} s here, {ref} s there): {allowed:.0f} s")
    report = (tmp_path / "demo" / "report.md").read_text()
    for shown in ("exact", "infinite_width", "overlap", "## The hidden kernel"):
        assert shown in report, f"the demo's report lost {shown!r}"
    figures = {p.name for p in (tmp_path / "demo").glob("*.png")}
    assert {"generalization_vs_N1.png", "overlaps_vs_N1.png", "overlaps.png"} <= figures
