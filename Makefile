# renormpp: `make demo` sets up .venv with renormpp alone and runs the main job; `make test` adds the dev extra
# (pytest, the docs tools, Ray, build/twine) and runs the first tier of the tests (unit and statistical); `make check`
# runs the second (notebooks, README examples, real-data figures, the docs site, the wall-time tests, the first tier
# again on other trajectories, the wheel).
VENV   ?= .venv
PY     := $(VENV)/bin/python
CORE   := $(VENV)/.installed-core
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast check check-demo test-other-trajectory bench docs wheelhouse clean

# Python >= 3.12 is needed (ArviZ 1.x). On this image 3.12.1 lives under pyenv; .python-version selects it.
$(PY):
	@PYBIN=$$(scripts/find-python) && echo "using $$PYBIN" && $$PYBIN -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(CORE): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e .
	@touch $(CORE)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[dev]"
	@touch $(STAMP) $(CORE)

demo: $(CORE)
	$(VENV)/bin/renormpp demo --out renormpp-demo

# the first tier: the unit and statistical tests (tests marked neither `check` nor `alone`)
test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadgroup --no-loadscope-reorder --durations=15 -m "not check and not alone"

test-fast: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadgroup --no-loadscope-reorder -m "not slow and not check and not alone"

# the second tier (CI runs it after `make test`): the tests marked `check` (tests/conftest.py, CHECK_TIER), then the
# wall-time tests alone, then the wheel a user installs
check: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadgroup --no-loadscope-reorder --durations=10 -m "check and not alone"
	$(MAKE) check-demo
	$(MAKE) test-other-trajectory
	scripts/check-wheel

# the first tier once more on other trajectories: every JAX key shifted (tests/conftest.py) and XLA limited to AVX2,
# which rounds as another CPU does; a statistical test must decide the same for any trajectory
OTHER_KEY_OFFSET ?= 17
OTHER_ISA        ?= AVX2
test-other-trajectory: $(STAMP)
	RENORMPP_TEST_KEY_OFFSET=$(OTHER_KEY_OFFSET) XLA_FLAGS="--xla_cpu_max_isa=$(OTHER_ISA) $${XLA_FLAGS:-}" $(PY) -m pytest -q -n 2 --dist loadgroup --no-loadscope-reorder -m "not check and not alone"

# the wall-time tests (the demo against the README's promise), each by itself: a test worker beside it would slow it
check-demo: $(STAMP)
	$(PY) -m pytest -q -m alone tests

bench: $(STAMP)
	$(PY) -m pip install --quiet -e ".[bench]"
	$(PY) benchmarks/theory_speed.py
	$(PY) benchmarks/sampler.py
	$(PY) benchmarks/load.py

# the documentation site in site/ (offline; warnings are errors). The notebooks are shown with the outputs they are
# stored with (their quick size); RENORMPP_DOCS_EXECUTE=true executes them again first (a few minutes; 03 and 05 need
# the MNIST and CIFAR-10 files).
docs: $(STAMP)
	RENORMPP_DOCS_EXECUTE=$${RENORMPP_DOCS_EXECUTE:-false} RENORMPP_NOTEBOOK_SIZE=quick NO_MKDOCS_2_WARNING=1 \
		$(VENV)/bin/mkdocs build --strict

# renormpp and its pinned dependencies (the versions of .venv) as wheels for a machine without internet (README, "On a
# GPU"); WHEELHOUSE_ARGS="--without-jax" for a GPU image with JAX installed, "--python-version 3.12 --platform
# manylinux" for another machine's Python, "--check" to install it offline into a fresh venv here
wheelhouse: $(CORE)
	$(PY) scripts/wheelhouse.py --out wheelhouse $(WHEELHOUSE_ARGS)

clean:
	rm -rf $(VENV) renormpp-demo renormpp-demo-smoke .pytest_cache site .cache wheelhouse
