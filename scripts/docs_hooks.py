"""mkdocs hooks: pages that live elsewhere in the repository become pages of the site, read at build time, so that
there is one copy of each: the README (home), benchmarks/README.md, notebooks/README.md and the notebooks, the
changelog and the contributing guide where they exist, and the licence and citation files. The relative links of
those files are rewritten to the pages they became (docs/X.md becomes X.md, README.md the home page, and so on)."""
from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
# site page -> repository file
PAGES = {"index.md": "README.md", "benchmarks.md": "benchmarks/README.md", "notebooks/index.md": "notebooks/README.md",
         "changelog.md": "CHANGELOG.md", "contributing.md": "CONTRIBUTING.md"}
STATIC = ("LICENSE", "CITATION.cff")  # copied as they are, so that links to them hold
# docs pages that moved: old path under docs/ -> where it is now
MOVED = {"benchmark-history.md": "log/benchmark-history.md"}
LINK = re.compile(r"(\]\(|\]: )([^)\s#]+)(#[^)\s]*)?")


def _target(source: str, page: str, target: str) -> str | None:
    """Where ``target``, a relative link in the repository file ``source``, lands on the site, relative to ``page``;
    None where it is not a file the site has."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
        return None  # a URL
    path = posixpath.normpath(posixpath.join(posixpath.dirname(source), target))
    pages = {src: dst for dst, src in PAGES.items()}
    if path in pages:
        dest = pages[path]
    elif path in STATIC or re.fullmatch(r"notebooks/[\w-]+\.ipynb", path):
        dest = path
    elif path.startswith("docs/"):
        dest = MOVED.get(path[5:], path[5:])
    else:
        return None
    return posixpath.relpath(dest, posixpath.dirname(page) or ".")


def _text(source: str, page: str) -> str:
    def fix(m: re.Match) -> str:
        dest = _target(source, page, m.group(2))
        return m.group(0) if dest is None else m.group(1) + dest + (m.group(3) or "")

    return LINK.sub(fix, (ROOT / source).read_text())


@event_priority(100)  # before mkdocs-jupyter's, which turns the notebooks into pages
def on_files(files, config):
    for page, source in PAGES.items():
        if (ROOT / source).is_file():
            files.append(File.generated(config, page, content=_text(source, page)))
    for name in STATIC:
        if (ROOT / name).is_file():
            files.append(File.generated(config, name, abs_src_path=str(ROOT / name)))
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        files.append(File.generated(config, f"notebooks/{nb.name}", abs_src_path=str(nb)))
    return files
