"""Test-wide set-up: the real data sets are found by the loaders' own rules (see tests/realdata.py), and compiled
XLA programs are shared across the session through JAX's persistent compilation cache.

Many tests build the same tiny network at the same sizes (a point of `renormpp run`, a kernel of the notebooks' quick
size) in new closures, which JAX's in-memory cache does not recognize: each one compiled its programs anew, about 4 s
of a tiny point's 5 s. The persistent cache keys a program by its HLO, so the second test that builds the same
program loads it instead (the same executable: the draws are unchanged). The cache folder is new for every session
(nothing carries over between runs, so a session's time is what a fresh clone sees); each xdist worker has its own
folder below it (see :data:`_ROOT_ENV`), shared with the subprocesses of its CLI tests and its notebooks' kernels
through the environment.

Compilation is most of many tests' time (65% of the sampler-against-NUTS test: 56 of 82 s alone), and most of it is
LLVM optimizing machine code that runs for a second. The tests compile at LLVM's level 1 without its expensive passes
(:data:`TEST_XLA_FLAGS`, appended to the ``XLA_FLAGS`` of the session and of its subprocesses unless they already name
an optimization level): compile 56 -> 41 s and the test 82 -> 67 s alone; the three heaviest tests together 216 ->
190 s on 2 workers (issue 44). The machine code differs from the default's in its last bits (a chain's draws from one
seed part after some steps, as they do between two CPUs of one kind), so every statistical test meets, here too, the
condition its margin was earned for: draws that are not bit-identical to those the bound was checked on. Users' runs
keep XLA's defaults.

NumPy's OpenBLAS runs one thread per process in the test session (``OPENBLAS_NUM_THREADS=1``, inherited by the
workers, the CLI's subprocesses and the notebooks' kernels). Its threads wait for work by spinning: with two workers
on two cores, a worker's idle BLAS threads took the cores from the other worker's computation. Measured on 2 cores,
the shared-field test against NUTS beside notebook 06: 72 s (25 s alone), 29 s with one thread; the pair 75 -> 45 s.

Both workers (``make test``: ``-n 2 --dist loadgroup``) share the work by groups: a test file is one group (its
module-scoped fixtures are built once, its programs compiled once), except the notebooks, each its own group. Groups
start heaviest first (:data:`HEAVY_FIRST`, from the last measured durations), so that the two workers finish
together. The groups are made by :class:`GroupScheduling`, xdist's scheduler by group with the group computed from the
test's id: xdist's own (``xdist_group`` marks, which it appends to ``item._nodeid``) groups nothing under pytest 9,
whose ids no longer read that attribute, so every test was its own group and a file's module fixtures were built on
both workers (issue 44: the `sweep` fixture of test_experiments.py, 15 s, twice).
"""
import os
import shutil
import tempfile

import pytest
import realdata

_CACHE_ENV = "JAX_COMPILATION_CACHE_DIR"

#: XLA's CPU flags of the test session: cheaper compilation of programs that run briefly (see the module's docstring)
TEST_XLA_FLAGS = "--xla_backend_optimization_level=1 --xla_llvm_disable_expensive_passes=true"
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):  # before JAX starts its backend
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {TEST_XLA_FLAGS}".strip()
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads OpenBLAS: one thread per worker (docstring)

#: the session's cache folder, set by the controller; each xdist worker keeps its programs in its own folder below it
#: (before JAX reads the variable): JAX writes cache entries without a lock, and a worker read an entry that the other
#: was still writing ("Error reading persistent compilation cache entry ... truncated stream", a warning that a test
#: turning warnings into errors failed on, 2026-11-28). JAX's lock comes only with a size limit, whose eviction scans
#: the whole folder at every write: the suite took 1483 s instead of ~850 with it. Programs shared between the
#: workers saved ~20 of ~700 worker-seconds of compilation (issue 44), so little is lost.
_ROOT_ENV = "RENORMPP_TEST_JAX_CACHE"
if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get(_ROOT_ENV) == os.environ.get(_CACHE_ENV):
    os.environ[_CACHE_ENV] = os.path.join(os.environ[_ROOT_ENV], os.environ["PYTEST_XDIST_WORKER"])


#: ``RENORMPP_TEST_KEY_OFFSET=k`` adds k to the seed of every JAX key made in the test session (``jax.random.PRNGKey``
#: and ``jax.random.key``, in the tests and in renormpp alike), so every sampled trajectory changes, as it does on a
#: CPU that rounds otherwise. A statistical test must decide the same way for any offset: its claim is about the law
#: of the draws, not about one trajectory. NumPy's seeds (the data sets) are left alone: they draw the same numbers on
#: every machine. The CLI's subprocesses and the notebooks' kernels are not shifted (their keys come from configs), so
#: a test that compares a child process's draws with this process's bit for bit (marked ``same_keys``) is skipped
#: under an offset.
KEY_OFFSET_ENV = "RENORMPP_TEST_KEY_OFFSET"


def shift_keys(offset: int) -> None:
    """Make ``jax.random.PRNGKey(s)`` and ``jax.random.key(s)`` return the key of seed ``s + offset``."""
    import jax

    if not offset or getattr(jax.random, "_renormpp_key_offset", 0) == offset:
        return
    prng, key = jax.random.PRNGKey, jax.random.key

    def shifted(make):
        def make_shifted(seed, *args, **kwargs):
            return make(seed + offset, *args, **kwargs)
        make_shifted.__wrapped__ = make
        make_shifted.__doc__ = make.__doc__
        return make_shifted

    jax.random.PRNGKey, jax.random.key = shifted(prng), shifted(key)
    jax.random._renormpp_key_offset = offset


def pytest_configure(config):
    realdata.prepare()
    shift_keys(int(os.environ.get(KEY_OFFSET_ENV) or 0))
    if os.environ.get(_CACHE_ENV) is None and not os.environ.get("PYTEST_XDIST_WORKER"):
        folder = tempfile.mkdtemp(prefix="renormpp-test-jax-cache-")
        os.environ[_CACHE_ENV] = folder
        os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")  # every program, not only slow ones
        os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
        os.environ[_ROOT_ENV] = folder
        config._renormpp_jax_cache = folder


def pytest_unconfigure(config):
    folder = getattr(config, "_renormpp_jax_cache", None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


#: the test files (and the notebooks) that take longest, heaviest first: they start first; the rest follow in order
HEAVY_FIRST = ("test_infer.py", "test_experiments.py", "test_paper.py", "test_readme.py", "test_theory_beyond.py",
               "test_shared_field.py", "test_cnn_model.py", "test_gpu_kit.py", "notebook-06", "test_diagnostics.py",
               "test_starts.py", "test_trust.py", "test_readout.py", "test_conv_validation.py", "test_baselines.py",
               "test_deep.py", "test_validity.py", "test_tempering.py", "test_hidden_kernel.py", "test_mcmc.py",
               "notebook")


#: The second tier, ``make check``; the first, ``make test``, is the unit tests and the statistical tests of the
#: samplers, estimators and the exact theory, at most 10 minutes on the slower 2-core machines. The second is what
#: exercises the package whole, as a user meets it, and the research theories' validations against sampled networks:
#: by test file, or ``file::test`` for one test of a file. Each gets the mark ``check``
#: (:func:`pytest_collection_modifyitems`). The worker-seconds are of one run of the whole suite on a 2-core AMD EPYC
#: whose reference workload (tests/reference_workload.py) takes 2.6 s: 2321 in all, 1333 of them here.
CHECK_TIER = (
    # what a reader meets: the notebooks (183 s), the README's examples (57), the documentation site (8), the paper's
    # figures on synthetic and real data (228), the GPU kit at smoke size on the CPU (61)
    "test_notebooks.py",
    "test_readme.py::test_every_readme_example_runs_as_written",
    "test_readme.py::test_every_claim_of_the_example_holds_for_any_key",
    "test_docs.py::test_the_documentation_site_builds_without_warnings",
    "test_paper.py",
    "test_gpu_kit.py",
    "test_benchmark_samplers.py",
    # renormpp run, validity-map and the hyperparameter search end to end (367 + 71 + 29 + 15 + 10)
    "test_experiments.py",
    "test_validity.py::test_the_smoke_map_end_to_end_reproduced_independently",
    "test_validity.py::test_the_shared_field_rows_are_the_series_solved_widest_first_with_continuation",
    "test_baselines.py::test_ray_backend_runs_a_tiny_search",
    "test_tempering.py::test_a_tempered_run_through_the_config",
    "test_deep.py::test_a_deep_point_through_the_experiments",
    # the theories beyond kernel renormalization against sampled networks (199 + 46 + 62 + 30)
    "test_shared_field.py::test_moved_neurons_average_their_moments_and_their_populations",
    "test_shared_field.py::test_against_sampled_networks_at_two_widths",
    "test_shared_field.py::test_the_monte_carlo_error_is_the_spread_of_independent_solves",
    "test_conv_validation.py",
    "test_theory_beyond.py::test_corrected_moves_toward_the_sampled_networks_where_the_leading_order_deviates",
    "test_theory_beyond.py::test_relu_theory_is_closer_to_the_sampled_networks_than_infinite_width",
    "test_specialist_theory.py::test_against_sampled_networks_where_specialists_appear",
    "test_field_specialists.py::test_against_sampled_networks_at_two_widths",
    "test_cavity.py::test_against_sampled_networks_at_two_widths",
    # a sampled theory's replicates: two sets of seeds agree within their error (50)
    "test_replicates.py::test_two_sets_of_seeds_agree_within_the_replicates_error",
)


def tier(nodeid: str) -> str:
    """``"check"`` for a test of :data:`CHECK_TIER`, else ``"test"``."""
    path, _, name = nodeid.partition("::")
    file = path.rsplit("/", 1)[-1]
    base = name.split("[", 1)[0]
    return "check" if file in CHECK_TIER or f"{file}::{base}" in CHECK_TIER else "test"


def group(nodeid: str) -> str:
    """The group of the test ``nodeid``: its file, or for a notebook's run the notebook."""
    path, _, name = nodeid.partition("::")
    file = path.rsplit("/", 1)[-1]
    if file == "test_notebooks.py" and "runs_at" in name and "[" in name:
        return "notebook-" + name[name.index("[") + 1:name.rindex("]")]
    return file


def _rank(group: str) -> int:
    return next((i for i, heavy in enumerate(HEAVY_FIRST) if group.startswith(heavy)), len(HEAVY_FIRST))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark the second tier's tests ``check`` (:data:`CHECK_TIER`) and put the heavy groups first (the scheduler
    hands out the groups in the order of the collection)."""
    offset = int(os.environ.get(KEY_OFFSET_ENV) or 0)
    for item in items:
        if tier(item.nodeid) == "check":
            item.add_marker(pytest.mark.check)
        if offset and item.get_closest_marker("same_keys"):
            item.add_marker(pytest.mark.skip(reason=f"{KEY_OFFSET_ENV}={offset} shifts this process's keys, not its "
                                                    "child processes': their draws differ by construction"))
    items.sort(key=lambda item: _rank(group(item.nodeid)))  # stable: the order within a group is kept


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """With ``--dist loadgroup``: :class:`GroupScheduling` (see the module's docstring)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        """xdist's scheduling by scope, a scope being a test's :func:`group`: each group runs whole on one worker."""

        def _split_scope(self, nodeid: str) -> str:
            return group(nodeid)

    return GroupScheduling(config, log)


def pytest_report_header(config):
    """The two switches that change every trajectory: the key offset and XLA's instruction set."""
    isa = next((f.split("=", 1)[1] for f in os.environ.get("XLA_FLAGS", "").split() if "xla_cpu_max_isa" in f),
               "the CPU's own")
    return f"renormpp: JAX key offset {int(os.environ.get(KEY_OFFSET_ENV) or 0)}, XLA instruction set {isa}"
