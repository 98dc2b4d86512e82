"""mkdocs hooks: pages that live elsewhere in the repository become pages of the site, read at build time, so that
there is one copy of each: the README (home), benchmarks/README.md, notebooks/README.md and the notebooks, and the
paper figures kept in docs/figures/. Links between those files are rewritten to the pages they became."""
from __future__ import annotations

from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
PAGES = {"index.md": "README.md", "benchmarks.md": "benchmarks/README.md", "notebooks/index.md": "notebooks/README.md"}
LINKS = {"](docs/architecture.md)": "](architecture.md)", "](docs/validity.md)": "](validity.md)",
         "](benchmarks/README.md)": "](benchmarks.md)",
         "]: ../docs/benchmark-history.md": "]: benchmark-history.md"}  # benchmarks/README's reference links


def _text(path: Path) -> str:
    text = path.read_text()
    for old, new in LINKS.items():
        text = text.replace(old, new)
    return text


@event_priority(100)  # before mkdocs-jupyter's, which turns the notebooks into pages
def on_files(files, config):
    for page, source in PAGES.items():
        files.append(File.generated(config, page, content=_text(ROOT / source)))
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        files.append(File.generated(config, f"notebooks/{nb.name}", abs_src_path=str(nb)))
    return files
