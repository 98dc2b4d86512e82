"""What `pip install renormpp` brings: every package renormpp imports is a declared dependency, the HDF5 library that
writes observables.nc included; `make demo` installs no extras; the license and citation files are there.
(scripts/check-wheel, called by CI, builds the wheel and runs it in a fresh venv.)"""
import ast
import importlib.metadata as md
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# imports that need an extra: only where the code catches the ImportError and names the extra
OPTIONAL = {"ray": "ray"}


def names(requirements) -> set[str]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


def third_party_imports() -> dict[str, set[str]]:
    """{top-level module: files} of every absolute import in renormpp/, at module level or inside functions."""
    found = {}
    for path in (ROOT / "renormpp").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = [node.module]
            else:
                continue
            for m in modules:
                top = m.split(".")[0]
                if top not in sys.stdlib_module_names and top != "renormpp":
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_import_is_a_declared_dependency():
    core = names(PYPROJECT["dependencies"])
    extras = {k: names(v) for k, v in PYPROJECT["optional-dependencies"].items()}
    dists = md.packages_distributions()
    undeclared = {}
    for module, files in third_party_imports().items():
        assert module in dists, f"{module} (imported by {sorted(files)}) is not installed"
        declared = core | extras.get(OPTIONAL.get(module), set())
        if not {canonicalize_name(d) for d in dists[module]} & declared:
            undeclared[module] = sorted(files)
    assert not undeclared, f"imported but not in pyproject's dependencies: {undeclared}"


def test_observables_nc_has_its_hdf5_library():
    """xarray writes observables.nc through h5netcdf, which reads and writes HDF5 through h5py; h5netcdf >= 1.8 makes
    h5py an extra, so renormpp must ask for it (a fresh `pip install renormpp` failed: "No module named 'h5py'")."""
    requires = [Requirement(r) for r in md.requires("h5netcdf") or []]
    h5netcdf_brings_it = any(r.name == "h5py" and r.marker is None for r in requires)
    declared = names(PYPROJECT["dependencies"])
    asks_for_it = "h5py" in declared or any(
        Requirement(r).name == "h5netcdf" and "h5py" in Requirement(r).extras for r in PYPROJECT["dependencies"])
    assert "h5netcdf" in declared and (asks_for_it or h5netcdf_brings_it)


def test_the_optional_imports_are_guarded():
    """An import left to an extra fails with a message that names the extra, not a bare ModuleNotFoundError."""
    for module, extra in OPTIONAL.items():
        for file in third_party_imports()[module]:
            text = (ROOT / file).read_text()
            assert "except ImportError" in text and f"renormpp[{extra}]" in text, file


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
@pytest.mark.parametrize("target, dev", [("demo", False), ("test", True)])
def test_make_demo_installs_the_package_alone(tmp_path, target, dev):
    """`make demo` installs renormpp without extras (what a user's `pip install` gets); `make test` the dev extra."""
    plan = subprocess.run(["make", "-n", "-C", str(ROOT), target, f"VENV={tmp_path / 'venv'}"], capture_output=True,
                          text=True, check=True).stdout
    installs = [line for line in plan.splitlines() if "pip install" in line and "--upgrade pip" not in line]
    assert installs and all(("[dev]" in line) == dev for line in installs), plan


def test_license_citation_and_metadata():
    assert PYPROJECT["license"] == "MIT" and "MIT License" in (ROOT / "LICENSE").read_text()
    citation = (ROOT / "CITATION.cff").read_text()
    assert "cff-version: 1.2.0" in citation and "arXiv:2412.15911" in citation
    classifiers = PYPROJECT["classifiers"]
    assert {"Programming Language :: Python :: 3.12", "Intended Audience :: Science/Research"} <= set(classifiers)
    assert PYPROJECT["authors"] and "one-hidden-layer" not in PYPROJECT["description"]


def test_the_docs_cite_the_paper_not_a_local_folder():
    for doc in ("README.md", *(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))):
        assert "shared/reference" not in (ROOT / doc).read_text(), f"{doc} cites a folder a user's clone lacks"


def test_demo_smoke_is_the_demo_made_small(capsys):
    """`renormpp demo --size smoke` (scripts/check-wheel's run): the demo's sweep at fewer widths and draws."""
    from renormpp import experiments as ex
    from renormpp.cli import main
    from renormpp.experiments import demo

    assert main(["demo", "--size", "smoke", "--print-config"]) == 0
    smoke, full = ex.resolve(tomllib.loads(capsys.readouterr().out)), ex.resolve(demo.CONFIG)
    assert smoke.data == full.data and set(smoke.model.N1) < set(full.model.N1)
    assert smoke.sampler.num_samples * 5 <= full.sampler.num_samples and smoke.run.out != full.run.out
