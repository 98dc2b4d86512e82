"""The README is a front door: at most 250 lines, the two commands first, no history, links that resolve, and examples
that run as written: every ```python block in order, in one namespace, in a temporary folder, with the ```toml block
saved as the sweep.toml that the blocks after it use. (Machine timings and history live in CHANGELOG.md and
CONTRIBUTING.md; benchmarks/README.md has the paper-size timings.)"""
import contextlib
import io
import os
import re
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 250
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", flags=re.S | re.M)


def blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", README.read_text(), flags=re.S)


def fenced() -> list[tuple[str, str]]:
    """Every fenced code block as (language, body), in order."""
    return FENCE.findall(README.read_text())


def prose() -> str:
    """The README without its fenced code blocks and inline code."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", README.read_text()))


def test_the_readme_has_its_examples():
    assert len(blocks("python")) >= 5 and len(blocks("toml")) == 1


def test_the_readme_is_at_most_250_lines():
    n = len(README.read_text().splitlines())
    assert n <= MAX_LINES, f"README.md has {n} lines, more than {MAX_LINES}: move detail to the docs or CHANGELOG.md"


def test_the_first_two_code_blocks_are_make_demo_and_make_test():
    (kind1, demo), (kind2, test) = fenced()[:2]
    assert (kind1, kind2) == ("bash", "bash"), "the README's first two code blocks must be ```bash blocks"
    assert demo.split("\n")[0].split("#")[0].strip() == "make demo"
    assert test.split("\n")[0].split("#")[0].strip() == "make test"
    head = README.read_text().split("```bash\nmake test", 1)[0]
    assert "make check" in head, "the README must say what `make check` adds to `make test`"


def test_the_commands_state_their_times_as_ranges():
    """`make test` and `make check` each with a range of minutes, in the paragraph before `make test`."""
    head = README.read_text().split("```bash\nmake demo", 1)[1].split("```bash\nmake test", 1)[0]
    ranges = re.findall(r"\d+(?:\.\d+)?\s*[–-]\s*\d+(?:\.\d+)?\s+minutes", head)
    assert len(ranges) >= 2, f"the 'Test it' paragraph states {ranges}: it needs the times of make test and make check"


def test_no_placeholder_is_left():
    left = [p for p in ("TIME_TEST", "TIME_CHECK", "OUTPUT_PLACEHOLDER") if p in README.read_text()]
    assert not left, f"README.md still holds the placeholders {left}"


def test_the_readme_tells_no_history():
    text = README.read_text()
    found = re.findall(r"\bissues? \d+|\bsittings?\b|\bbefore the fix\b|\b20\d\d-\d\d-\d\d\b", text, flags=re.I)
    assert not found, f"README.md tells history ({found}): it belongs in CHANGELOG.md or the research log"


def _example_index() -> int:
    """The index among the fenced blocks of the example: the python block with ``rp.Spec(``."""
    return next(i for i, (kind, body) in enumerate(fenced()) if kind == "python" and "rp.Spec(" in body)


def test_the_theory_comes_first_then_the_example_with_its_output():
    """The first python block is the theory alone (milliseconds, nothing sampled), followed by its printed output;
    the example (one spec, its theory, a sampled network, the table) comes next, its output in a ```text block."""
    kinds = [kind for kind, _ in fenced()]
    first = kinds.index("python")
    theory = fenced()[first][1]
    assert "rp.theory.solve(" in theory and "MCMC" not in theory and kinds[first + 1] == "text"
    i = _example_index()
    assert i > first
    example = fenced()[i][1]
    assert len(example.strip().splitlines()) <= 15, "the README's example should stay about 15 lines"
    for call in ("rp.Spec(", "spec.theory(", "spec.kernel(", "spec.compare(", "print("):
        assert call in example, f"the README's example lost {call}"
    assert kinds[i + 1] == "text", "the example's printed output must follow it in a ```text block"


def _links() -> list[str]:
    return re.findall(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", prose())


def test_every_relative_link_resolves():
    links = [link for link in _links() if not re.match(r"[a-z]+:", link) and not link.startswith("#")]
    assert links, "the README links to no page of the repository"
    missing = [link for link in links if not (ROOT / link.split("#")[0]).exists()]
    assert not missing, f"README.md links to files that are not there: {missing}"


def test_the_readme_links_its_documentation():
    links = set(_links())
    for page in ("docs/theory.md", "docs/validity.md", "docs/figures.md", "docs/api.md", "benchmarks/README.md",
                 "CHANGELOG.md", "CONTRIBUTING.md"):
        assert page in links, f"the README does not link {page}"
    assert any(link.startswith("notebooks/") for link in links), "the README does not link the notebooks"
    assert any(link.endswith(".png") for link in links), "the README shows no figure"


def _table(text: str) -> tuple[list[str], list[str]]:
    """The header words and the row labels of a printed DataFrame."""
    lines = [line for line in text.splitlines() if line.strip() and line.strip() != "OUTPUT_PLACEHOLDER"]
    return lines[0].split(), [line.split()[0] for line in lines[1:]]


@pytest.mark.slow
def test_every_readme_example_runs_as_written(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweep.toml").write_text(blocks("toml")[0])
    namespace, seconds, printed = {}, [], []
    for i, code in enumerate(blocks("python")):
        t = time.perf_counter()
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(code, f"README.md python block {i + 1}", "exec"), namespace)
        except Exception as err:
            raise AssertionError(f"README python block {i + 1} fails as written:\n{code}") from err
        seconds.append(round(time.perf_counter() - t, 1))
        printed.append(out.getvalue())
        plt.close("all")
    print("seconds per block:", seconds)
    assert (tmp_path / "runs" / "quick" / "report.md").exists()  # the sweep of the toml block ran
    assert os.path.exists(tmp_path / "sweep.toml")
    # the theory's output is shown as it prints (float64, the same on any machine); the example's table with the
    # same columns and rows (its numbers are one run's; the claims about them are tested for three keys below)
    texts = blocks("text")
    assert printed[0].strip() == texts[0].strip(), f"the README shows\n{texts[0]}\nbut the theory prints\n{printed[0]}"
    assert _table(printed[1]) == _table(texts[1]), f"the README shows\n{texts[1]}\nbut the example prints\n{printed[1]}"
    example_seconds = seconds[1]
    stated = re.search(r"The example takes about (\d+)[–-](\d+) s", README.read_text())
    assert stated, "the README must state the example's run time as a range of seconds"
    print(f"the example took {example_seconds} s here (README: {stated.group(0)})")


def _example_code() -> str:
    return "\n".join(body for kind, body in fenced()[:_example_index() + 1] if kind == "python")


@pytest.mark.slow
@pytest.mark.parametrize("key", [0, 1, 2])
def test_every_claim_of_the_example_holds_for_any_key(key):
    """The prose under the example, claim by claim, for three keys of the sampler (the theory is deterministic):
    eps_g within 3% of the theory; the diagonal overlaps 1.5-4.5% above Q*/lambda1 and resolved (z > 5); the
    off-diagonal overlap far from infinite width's 0 and 3-7% above the theory's (the 0.653 the prose quotes)."""
    code = _example_code().replace("jax.random.PRNGKey(0)", f"jax.random.PRNGKey({key})")
    assert f"PRNGKey({key})" in code
    namespace = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(code, "README.md example", "exec"), namespace)
    t = namespace["table"]
    text = README.read_text()
    assert abs(t.loc["eps_g", "delta"]) < 0.03, t
    for q in ("overlap[0,0]", "overlap[1,1]"):
        assert 0.015 < t.loc[q, "delta"] < 0.045 and t.loc[q, "z"] > 5, t
    off = t.loc["overlap[0,1]"]
    assert f"the theory {off.theory:.3f}" in text and off["mean"] > 0.5 and off["mean"] / off["mcse"] > 50
    assert 0.03 < off.delta < 0.07 and off.z > 5, t
