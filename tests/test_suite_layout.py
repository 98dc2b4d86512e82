"""How `make test` shares the suite over the two workers (tests/conftest.py): a file is one group, each notebook its
own, the heavy groups first; the slowest tests are printed at the end."""
from __future__ import annotations

import os
import re
from pathlib import Path

import conftest
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _group_of(item) -> str:
    return conftest.group(item.nodeid)


def _recipe(target: str) -> str:
    return re.search(rf"^{target}: .*\n\t(.*)$", (ROOT / "Makefile").read_text(), flags=re.M)[1]


def test_make_test_shares_the_groups_over_both_workers_and_prints_the_slowest():
    recipe = _recipe("test")
    assert "-n 2" in recipe and "--dist loadgroup" in recipe and "--no-loadscope-reorder" in recipe
    assert "--durations=15" in recipe


def test_the_wall_time_tests_run_alone_in_ci_and_nothing_else_is_left_out():
    """`make test` leaves out the second tier (marked `check`) and the tests marked `alone` (the demo's wall time,
    which a worker beside it would slow: 139 s alone, 221-241 s beside the other worker); `make check` runs the
    second tier, then exactly the `alone` tests without workers (`make check-demo`), then the first tier again on
    other trajectories (every JAX key shifted, XLA limited to another instruction set), then the wheel check; CI runs
    `make test` then `make check`: no test is dropped from CI."""
    assert _recipe("test").endswith('-m "not check and not alone"')
    check = re.search(r"^check: .*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), flags=re.M)[1]
    lines = [line.strip() for line in check.splitlines()]
    assert '-m "check and not alone"' in lines[0] and "-n 2" in lines[0]
    assert lines[1:] == ["$(MAKE) check-demo", "$(MAKE) test-other-trajectory", "scripts/check-wheel"]
    other = _recipe("test-other-trajectory")
    assert "RENORMPP_TEST_KEY_OFFSET=" in other and "--xla_cpu_max_isa=" in other
    assert other.endswith('-m "not check and not alone"')  # the whole first tier
    demo = _recipe("check-demo")
    assert "-m alone" in demo and " -n " not in demo
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.startswith("#")]
    assert ci[-2:] == ["make test", "make check"]
    import test_demo

    marked = [name for name, fn in vars(test_demo).items() if name.startswith("test_")
              and any(m.name == "alone" for m in getattr(fn, "pytestmark", []))]
    assert marked == ["test_the_demo_keeps_the_readme_promise_and_shows_a_first_report"]


def test_the_second_tier_names_tests_that_exist(request):
    """Every entry of conftest.CHECK_TIER is a test file or a ``file::test`` that exists (a renamed test would leave
    the first tier silently), and the marks follow the list."""
    files = {p.name for p in (ROOT / "tests").glob("test_*.py")}
    for entry in conftest.CHECK_TIER:
        file, _, name = entry.partition("::")
        assert file in files, entry
        if name:
            assert re.search(rf"^def {re.escape(name)}\(", (ROOT / "tests" / file).read_text(), flags=re.M), entry
    assert conftest.tier("tests/test_kernels.py::test_x[1]") == "test"
    for item in request.session.items:
        marked = item.get_closest_marker("check") is not None
        assert marked == (conftest.tier(item.nodeid) == "check"), item.nodeid


def test_every_notebook_is_its_own_group_and_every_other_file_one(request):
    items = request.session.items
    groups: dict[str, set] = {}
    for item in items:
        groups.setdefault(item.path.name, set()).add(_group_of(item))
    runs = [item for item in items if item.path.name == "test_notebooks.py" and "runs_at" in item.name]
    if runs:  # collected with the rest of the suite (not when this file runs alone)
        assert len({_group_of(item) for item in runs}) == len(runs) > 1
    for name, found in groups.items():
        if name != "test_notebooks.py":
            assert found == {name}, (name, found)


def test_make_test_schedules_by_these_groups():
    """`--dist loadgroup` gets conftest's scheduler, whose scope of a test is its group (xdist's own grouping by
    marks does nothing under pytest 9, issue 44)."""
    from types import SimpleNamespace

    from xdist.scheduler import LoadScopeScheduling

    config = SimpleNamespace(getvalue=lambda name: "loadgroup", option=SimpleNamespace(maxschedchunk=None))
    sched = conftest.pytest_xdist_make_scheduler(config, log=None)
    assert isinstance(sched, LoadScopeScheduling)
    ids = ["tests/test_infer.py::test_a", "tests/test_infer.py::test_b[x-1]",
           "tests/test_notebooks.py::test_notebook_runs_at_smoke_size[06_deep_networks.ipynb]",
           "tests/test_notebooks.py::test_the_notebooks_are_valid"]
    assert [sched._split_scope(i) for i in ids] == ["test_infer.py", "test_infer.py", "notebook-06_deep_networks.ipynb",
                                                    "test_notebooks.py"]
    config = SimpleNamespace(getvalue=lambda name: "load")
    assert conftest.pytest_xdist_make_scheduler(config, log=None) is None


@pytest.mark.parametrize("k", range(4))
def test_a_file_runs_on_one_worker(k):
    """The tests of this file, as make test runs them (two workers), run on one worker: each records its worker in
    a file of the session's folder, the last compares. On the old grouping (xdist_group marks) they ran on both."""
    worker, root = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get(conftest._ROOT_ENV)
    if not worker or not root:
        pytest.skip("not an xdist worker of a test session (make test runs it in one)")
    record = Path(root) / "test_suite_layout.workers"
    with record.open("a") as f:
        f.write(f"{k} {worker}\n")
    if k == 3:
        seen = dict(line.split() for line in record.read_text().splitlines())
        assert len(seen) == 4 and len(set(seen.values())) == 1, seen


def test_heavy_groups_come_first_in_the_order_of_the_list(request):
    ranks = [conftest._rank(_group_of(item)) for item in request.session.items]
    assert ranks == sorted(ranks)
    assert conftest._rank("test_infer.py") == 0 and conftest._rank("test_kernels.py") == len(conftest.HEAVY_FIRST)


def test_the_session_compiles_cheaply_and_blas_does_not_spin_beside_the_other_worker():
    """conftest's environment reaches this worker: XLA's cheaper compilation, and one OpenBLAS thread in the NumPy
    that is loaded (set after NumPy's import it would be ignored: threadpoolctl reads the library's own count)."""
    import os

    import numpy as np

    assert conftest.TEST_XLA_FLAGS in os.environ["XLA_FLAGS"] or "xla_backend_optimization_level" in os.environ[
        "XLA_FLAGS"]
    import threadpoolctl  # a dependency of renormpp
    np.ones((64, 64)) @ np.ones((64, 64))
    blas = [p for p in threadpoolctl.threadpool_info() if p["internal_api"] == "openblas"]
    assert blas and all(p["num_threads"] == 1 for p in blas), blas


def test_each_worker_compiles_into_its_own_cache_folder():
    """JAX writes its persistent cache without a lock: two workers on one folder read each other's half-written
    entries (conftest._ROOT_ENV). Under xdist each worker's folder lies below the session's, named after it."""
    import os

    import jax

    worker = os.environ.get("PYTEST_XDIST_WORKER")
    root = os.environ.get(conftest._ROOT_ENV)
    if not worker or not root:
        pytest.skip("not an xdist worker of a session with the test cache (make test runs it in one)")
    assert os.environ[conftest._CACHE_ENV] == os.path.join(root, worker)
    assert jax.config.jax_compilation_cache_dir == os.path.join(root, worker)
