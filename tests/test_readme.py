"""The README's examples run as written: every ```python block in order, in one namespace, in a temporary folder,
with the ```toml block saved as the sweep.toml that the blocks after it use. (The README promises each runs in
under a minute on 2 cores; benchmarks/README.md has the paper-size timings.)"""
import os
import re
import time
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", README.read_text(), flags=re.S)


def test_the_readme_has_its_examples():
    assert len(blocks("python")) >= 5 and len(blocks("toml")) == 1


@pytest.mark.slow
def test_every_readme_example_runs_as_written(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweep.toml").write_text(blocks("toml")[0])
    namespace, seconds = {}, []
    for i, code in enumerate(blocks("python")):
        t = time.perf_counter()
        try:
            exec(compile(code, f"README.md python block {i + 1}", "exec"), namespace)
        except Exception as err:
            raise AssertionError(f"README python block {i + 1} fails as written:\n{code}") from err
        seconds.append(round(time.perf_counter() - t, 1))
        plt.close("all")
    print("seconds per block:", seconds)
    assert (tmp_path / "runs" / "quick" / "report.md").exists()  # the sweep of the toml block ran
    assert os.path.exists(tmp_path / "sweep.toml")
