"""renormpp and its pinned dependencies as wheels, for a machine without internet (``make wheelhouse``; issue 45).

The pins are the versions installed beside renormpp in the Python that runs this script (the repository's .venv:
the set ``make test`` tested): the closure of renormpp's requirements (no extras; markers evaluated here), each at
its installed version. The folder gets

* ``renormpp-<version>-py3-none-any.whl`` (built from this repository) and one wheel per pinned dependency, for this
  machine's Python and platform, or for another one with ``--python-version`` and ``--platform`` (pip's tags,
  e.g. ``manylinux2014_x86_64``);
* ``requirements.txt``: ``renormpp==<version>`` and every pin;
* ``INSTALL.txt``: the command for the offline machine,
  ``pip install --no-index --find-links WHEELHOUSE -r WHEELHOUSE/requirements.txt``.

``--without-jax``: for a GPU image with JAX's CUDA build already installed: jax, jaxlib and what only they need are
left out (pip keeps the image's JAX where it meets renormpp's ``jax>=``). ``--jax cuda12``: JAX's CUDA 12 wheels
too (``jax[cuda12]`` at the pinned jax version, with its NVIDIA libraries: about 3 GB).

    make wheelhouse                                       # ./wheelhouse, for this machine
    .venv/bin/python scripts/wheelhouse.py --out wh --without-jax --python-version 3.12 --platform manylinux
    .venv/bin/python scripts/wheelhouse.py --check        # then install it offline into a fresh venv and import
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import venv
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
#: the platform tags of an x86-64 Linux with glibc >= 2.28 (``--platform manylinux``)
MANYLINUX = ("manylinux2014_x86_64", *(f"manylinux_2_{n}_x86_64" for n in range(17, 29)))
#: what a GPU image with JAX's CUDA build installed already has (``--without-jax``)
JAX = ("jax", "jaxlib")


def pins(dist: str = "renormpp", without: tuple[str, ...] = ()) -> dict[str, str]:
    """``{canonical name: installed version}`` for the closure of ``dist``'s requirements (no extras of ``dist``;
    the extras its requirements ask for followed; markers evaluated in this Python), not descending into the packages
    named in ``without`` (nor listing them). A requirement that is not installed is an error: the pins would be
    incomplete."""
    skip = {canonicalize_name(n) for n in without}
    found, missing, seen = {}, [], set()
    todo = [(canonicalize_name(dist), ("",))]
    if not _installed(dist):
        missing.append(todo[0][0])
        todo = []
    while todo:
        name, extras = todo.pop()
        for line in metadata.distribution(name).requires or []:
            req = Requirement(line)
            if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in extras):
                continue
            child, wanted = canonicalize_name(req.name), ("", *sorted(req.extras))
            if child in skip or (child, wanted) in seen:
                continue
            seen.add((child, wanted))
            try:
                found[child] = metadata.version(child)
            except metadata.PackageNotFoundError:
                missing.append(child)
                continue
            todo.append((child, wanted))
    if missing:
        raise SystemExit(f"not installed in {sys.prefix}: {', '.join(sorted(set(missing)))}; install renormpp there "
                         "first (make .venv/.installed-core), then make the wheelhouse")
    return dict(sorted(found.items()))


def _installed(name: str) -> bool:
    try:
        metadata.distribution(name)
        return True
    except metadata.PackageNotFoundError:
        return False


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True)


def build(out: Path, without_jax: bool = False, jax: str | None = None, python_version: str | None = None,
          platforms: tuple[str, ...] = (), wheel: Path | None = None) -> Path:
    """Write the wheelhouse to ``out`` (see the module docstring; ``wheel``: renormpp's wheel, built already, in
    place of one built from the repository); returns ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    pinned = pins(without=JAX if without_jax else ())
    version = metadata.version("renormpp")
    target = [*(["--python-version", python_version] if python_version else []),
              *(a for p in platforms for a in ("--platform", p)),
              *(["--implementation", "cp"] if python_version or platforms else [])]
    reqs = out / "requirements.txt"
    reqs.write_text(f"renormpp=={version}\n" + "".join(f"{n}=={v}\n" for n, v in pinned.items()))
    if wheel is None:
        _pip("wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(REPO))
    else:
        shutil.copy(wheel, out)
    deps = out / ".pins.txt"
    deps.write_text("".join(f"{n}=={v}\n" for n, v in pinned.items()))
    _pip("download", "--quiet", "--no-deps", "--only-binary=:all:", "--dest", str(out), *target, "-r", str(deps))
    if jax:
        with open(reqs, "a") as f:
            f.write(f"jax[{jax}]=={pinned.get('jax') or metadata.version('jax')}\n")
        _pip("download", "--quiet", "--only-binary=:all:", "--dest", str(out), *target, "-c", str(deps),
             f"jax[{jax}]=={pinned.get('jax') or metadata.version('jax')}")
    deps.unlink()
    (out / "INSTALL.txt").write_text(
        f"renormpp {version} and its pinned dependencies ({len(pinned)} packages"
        f"{', without jax and jaxlib' if without_jax else ''}{f', with jax[{jax}]' if jax else ''}).\n"
        "On the offline machine (Python >= 3.12; a venv is best):\n\n"
        "    python -m pip install --no-index --find-links WHEELHOUSE -r WHEELHOUSE/requirements.txt\n\n"
        "with WHEELHOUSE this folder. Then: renormpp demo --size smoke, and on a GPU benchmarks/gpu_check.py "
        "(README, \"On a GPU\").\n")
    return out


def check(out: Path) -> None:
    """Install the wheelhouse into a fresh venv without an index, then ``pip check`` and import renormpp."""
    with tempfile.TemporaryDirectory() as tmp:
        venv.create(tmp, with_pip=True)
        py = str(Path(tmp) / "bin" / "python")
        subprocess.run([py, "-m", "pip", "install", "--quiet", "--no-index", "--find-links", str(out), "-r",
                        str(out / "requirements.txt")], check=True)
        subprocess.run([py, "-m", "pip", "check"], check=True)
        subprocess.run([py, "-c", "import renormpp; print('renormpp', renormpp.__version__, 'installed offline')"],
                       check=True, cwd=tmp)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="wheelhouse", type=Path)
    ap.add_argument("--without-jax", action="store_true", help="leave out jax, jaxlib and what only they need")
    ap.add_argument("--jax", choices=("cuda12", "cuda13"), help="add JAX's CUDA wheels (jax[cuda12])")
    ap.add_argument("--python-version", help="the offline machine's Python (e.g. 3.12); default: this one's")
    ap.add_argument("--platform", nargs="*", default=(),
                    help="pip platform tags of the offline machine (pip matches each exactly: give every tag it "
                         f"accepts; 'manylinux' stands for {' '.join(MANYLINUX)})")
    ap.add_argument("--renormpp-wheel", type=Path, help="renormpp's wheel, built already (scripts/check-wheel)")
    ap.add_argument("--check", action="store_true", help="then install it offline into a fresh venv (this machine)")
    ap.add_argument("--print-pins", action="store_true", help="print the pins and stop")
    a = ap.parse_args(argv)
    if a.jax and a.without_jax:
        ap.error("--jax adds JAX's CUDA wheels and --without-jax leaves JAX out: choose one")
    if a.print_pins:
        print("\n".join(f"{n}=={v}" for n, v in pins(without=JAX if a.without_jax else ()).items()))
        return
    platforms = tuple(t for p in a.platform for t in (MANYLINUX if p == "manylinux" else (p,)))
    out = build(a.out, a.without_jax, a.jax, a.python_version, platforms, a.renormpp_wheel)
    print(f"{out}: {len(list(out.glob('*.whl')))} wheels. Offline: python -m pip install --no-index --find-links "
          f"{out} -r {out / 'requirements.txt'}")
    if a.check:
        check(out)


if __name__ == "__main__":
    main()
