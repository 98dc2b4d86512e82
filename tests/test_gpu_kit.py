"""The GPU kit (issue 45, item 4): the wheelhouse of an offline machine (scripts/wheelhouse.py, ``make wheelhouse``;
scripts/check-wheel builds one in CI and installs renormpp from it without an index) and the GPU check
(benchmarks/gpu_check.py) at its smoke size on the CPU."""
import importlib.util
import json
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from realdata import missing

ROOT = Path(__file__).resolve().parents[1]


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def wheelhouse():
    return _load(ROOT / "scripts" / "wheelhouse.py")


def _unmet(pinned: dict, root: str = "renormpp", without=()) -> list[str]:
    """The requirements (no extras of ``root``, markers evaluated here) of ``root`` and of every pinned package that
    the pins do not meet: a package left out, or a pinned version outside the specifier."""
    skip = {canonicalize_name(n) for n in without}
    bad = []
    for name in (root, *pinned):
        for line in metadata.distribution(name).requires or []:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            child = canonicalize_name(req.name)
            if child in skip:
                continue
            if child not in pinned or not req.specifier.contains(pinned[child], prereleases=True):
                bad.append(f"{name} -> {line}")
    return bad


def test_the_wheelhouse_pins_the_closure_of_renormpp_at_the_installed_versions(wheelhouse):
    pinned = wheelhouse.pins()
    assert _unmet(pinned) == []  # closed: every requirement of renormpp and of its requirements, met by a pin
    assert all(v == metadata.version(n) for n, v in pinned.items())  # the tested versions
    assert {"jax", "jaxlib", "numpyro", "arviz", "numpy", "scipy"} <= set(pinned)
    assert not {"pytest", "ray", "mkdocs", "build", "renormpp"} & set(pinned)  # no extras, not itself
    # the check above fails on incomplete pins: numpy left out is numpy required and unmet
    assert any("-> numpy" in b for b in _unmet({n: v for n, v in pinned.items() if n != "numpy"}))
    # a GPU image's JAX: jax, jaxlib and what only they need are left out, everything else is still closed
    lean = wheelhouse.pins(without=wheelhouse.JAX)
    assert not {"jax", "jaxlib"} & set(lean) and set(lean) < set(pinned)
    assert _unmet(lean, without=wheelhouse.JAX) == []
    only_jax = set(pinned) - set(lean)  # jax, jaxlib, and what comes with them (ml-dtypes, opt-einsum)
    requirers = {n for n in lean for line in metadata.distribution(n).requires or []
                 if canonicalize_name(Requirement(line).name) in only_jax - set(wheelhouse.JAX)
                 and (Requirement(line).marker is None or Requirement(line).marker.evaluate({"extra": ""}))}
    assert requirers == set()  # what was left out besides jax and jaxlib is needed by nothing that stays


def test_the_wheelhouse_refuses_a_python_without_renormpp(wheelhouse):
    with pytest.raises(SystemExit, match="not installed in .*: renormpp-not-installed; install renormpp there"):
        wheelhouse.pins("renormpp-not-installed")


@pytest.fixture(scope="module")
def gpu_check():
    return _load(ROOT / "benchmarks" / "gpu_check.py")


def test_the_paper_projection_prices_each_width_from_its_family(gpu_check):
    rows = [dict(series="linear-D2", N1=100, chains=2, ms_per_draw=10.0),
            dict(series="linear-D2", N1=200, chains=2, ms_per_draw=20.0),
            dict(series="mnist-D2", N1=100, chains=2, ms_per_draw=40.0),
            dict(series="mnist-D2", N1=100, chains=32, skipped="no MNIST")]
    assert gpu_check.cost(rows, "linear-D2", 2, 150) == pytest.approx(0.015)  # linear between measured widths
    assert gpu_check.cost(rows, "linear-D2", 2, 1000) == pytest.approx(0.1)  # in proportion to N1 beyond them
    assert gpu_check.cost(rows, "linear-D2", 2, 50) == pytest.approx(0.01)  # the narrowest below it
    assert gpu_check.cost(rows, "mnist-D2", 32, 100) is None
    configs = {"synthetic": {"data": {"name": "synthetic"}, "model": {"N1": [100, 400]}},
               "images": {"data": {"name": "mnist"}, "model": {"N1": [100]}}}
    hours = gpu_check.projection(configs, rows, (2, 32))
    per_width = (gpu_check.CHAIN_DRAWS / 2 + gpu_check.WARMUP) / 3600
    assert hours[2] == pytest.approx((0.01 + 0.04 + 0.04) * per_width) and hours[32] is None


@pytest.mark.slow
def test_the_gpu_checks_timings_keep_its_budget_and_go_narrow_widths_first(gpu_check):
    configs = {"linear-D2": {"model": {"N1": [10, 20]}}, "mnist-D2": {"model": {"N1": [10, 30]}}}
    rows = gpu_check.timings(configs, (2, 32), 3, deadline=-np.inf)  # past: nothing is started
    assert [(r["series"], r["N1"], r["chains"]) for r in rows] == [
        ("linear-D2", 10, 2), ("linear-D2", 10, 32), ("mnist-D2", 10, 2), ("mnist-D2", 10, 32),
        ("linear-D2", 20, 2), ("linear-D2", 20, 32), ("mnist-D2", 30, 2), ("mnist-D2", 30, 32)]
    assert all("time budget" in r["skipped"] for r in rows)


def test_the_gpu_check_runs_at_smoke_size(gpu_check, tmp_path, monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "")  # restored after the test: the check sets its own
    report = gpu_check.main(["--size", "smoke", "--out", str(tmp_path)])
    assert report["xla_flags"] == gpu_check.NO_AUTOTUNE  # XLA's autotuning off unless --autotune
    from renormpp.infer.alerts import NOISE_BOUND

    noise = report["noise"]  # two chains' noise after the warmup of Fig. 1a alpha = 10 (P = 40: N1 = 4)
    assert noise["N1"] == 4 and len(noise["noise"]) == 2 and noise["ok"]
    assert all(0 < x < NOISE_BOUND / 100 for x in noise["noise"])  # float32 at full precision: ~1e-4
    widths = {"linear-D2": [40], "mnist-D2": [40]}
    got = {(r["series"], r["N1"], r["chains"]) for r in report["timings"]}
    assert got == {(s, n, c) for s, ns in widths.items() for n in ns for c in (2, 4)}
    for r in report["timings"]:
        if r["series"] == "mnist-D2" and missing("mnist"):
            assert "MNIST" in r["skipped"]
            continue
        assert r["ms_per_draw"] > 0 and r["chain_draws_per_s"] == pytest.approx(r["chains"] / r["ms_per_draw"] * 1e3)
    acc = report["accuracy"]
    if missing("mnist"):
        assert "MNIST" in acc["skipped"] and report["paper_hours"] == {2: None, 4: None}
    else:
        # the smoke config's 30 draws come first (its accuracy is far off); the result is the point's own
        assert acc["stopped"] == "num_samples" and acc["draws"] == 30 and acc["chains"] == 2
        assert np.isfinite(acc["eps_g"]) and acc["eps_g_error"] > 0
        assert all(h > 0 for h in report["paper_hours"].values())
    saved = json.loads((tmp_path / "gpu_check.json").read_text())
    assert saved["timings"] == json.loads(json.dumps(report["timings"]))
    md = (tmp_path / "gpu_check.md").read_text()
    assert "| linear-D2 | 40 | 4 |" in md and "rounding noise" in md


def test_the_gpu_profile_runs_at_smoke_size(tmp_path):
    report = _load(ROOT / "benchmarks" / "gpu_profile.py").main(["--size", "smoke", "--out", str(tmp_path)])
    pieces = {r["piece"] for r in report["rows"]}
    assert {"chol", "trsm", "cholinv[128]", "cholinv[1]", "gram", "force[128]", "force[1]", "draw[128]"} <= pieces
    assert all(r["ms"] > 0 for r in report["rows"])
    draw = next(r for r in report["rows"] if r["piece"] == "draw[128]")
    assert draw["chain_draws_per_s"] == pytest.approx(draw["chains"] / draw["ms"] * 1e3)
    assert json.loads((tmp_path / "gpu_profile.json").read_text())["rows"] == json.loads(json.dumps(report["rows"]))
