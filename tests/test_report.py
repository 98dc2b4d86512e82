"""The report of a sweep leads with the answer: the eps_g figure and one table (N1, alpha, MC ± sigma, each theory's
signed Delta and z), then the readout overlaps with the off-diagonal ones (the output-output correlations) called out,
then one verdict per theory; Delta is signed everywhere, with one definition, (MC - theory) / |theory|."""
import copy
import importlib
import re
import shutil

import numpy as np
import pandas as pd
import pytest

import renormpp as rp
from renormpp import diagnostics as dg
from renormpp import experiments as ex
from renormpp import theory

report_mod = importlib.import_module("renormpp.experiments.report")  # renormpp.experiments.report is the function

TINY3 = {
    "data": {"name": "synthetic", "P": 30, "P_test": 20, "N0": 6, "D": 3},
    "model": {"N1": [8, 32], "T": 0.05},
    "sampler": {"kind": "mala", "step_size": 2e-3, "inner_steps": 5, "num_warmup": 20, "num_samples": 120,
                "num_chains": 2},
    "run": {"seeds": [0], "progress": False, "chunk_seconds": 0.5},
}
WIDTHS = (8, 32)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    cfg = copy.deepcopy(TINY3)
    cfg["run"]["out"] = str(tmp_path_factory.mktemp("report") / "sweep")
    return ex.run(cfg)


def first_table(text: str) -> tuple[int, list[str], list[list[str]]]:
    """The position, header and rows of the first markdown table of ``text``."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("|"))
    block = []
    for ln in lines[start:]:
        if not ln.startswith("|"):
            break
        block.append([c.strip() for c in ln.strip("|").split("|")])
    return text.index(lines[start]), block[0], block[2:]


def sentences(text: str) -> list[str]:
    """The sentences of a markdown text: every line (table rows cut into their cells), cut at the ends of sentences."""
    out = []
    for ln in text.splitlines():
        parts = ln.strip("|").split("|") if ln.startswith("|") else [ln]
        for part in parts:
            out += [s.strip(" *") for s in re.split(r"(?<=\.)\s+", part) if s.strip()]
    return out


def applying(pooled_csv: pd.DataFrame) -> list[str]:
    eps = pooled_csv[pooled_csv.quantity == "eps_g"]
    # the kernel methods, then the theories of [theory] methods beyond them, in the comparison's order
    return [t for t in dict.fromkeys(eps.theory) if eps[eps.theory == t].prediction.notna().any()]


def test_the_first_table_is_the_answer_before_any_detail(sweep):
    text = (sweep / "report.md").read_text()
    pooled = pd.read_csv(sweep / "pooled.csv")
    where, head, rows = first_table(text)
    shown = applying(pooled)
    assert head == (["N1", "alpha = P/N1", "MC eps_g ± sigma"] + [f"{t} {c}" for t in shown for c in ("Δ", "z")]
                    + ["closest"])
    assert "adaptive_kernel" in shown  # a theory beyond kernel renormalization, by [theory] methods' default
    assert text.index("generalization_vs_N1.png") < where < text.index("comparison.md")
    assert where < text.index("overlaps.png") < text.index("## Verdicts") < text.index("## Per width")
    assert [r[0] for r in rows] == [f"{n:g}" for n in WIDTHS]
    eps = pooled[pooled.quantity == "eps_g"].set_index(["N1", "theory"])
    for r in rows:
        N1 = float(r[0])
        assert r[1] == f"{30 / N1:.3g}"
        mean, err = (float(v) for v in r[2].rstrip("¹²³").split(" ± "))
        assert abs(mean - eps.loc[(N1, "exact")].mc_mean) <= err / 10 and err == pytest.approx(
            eps.loc[(N1, "exact")].mc_error, rel=0.05)
        for k, t in enumerate(shown):
            delta, z = eps.loc[(N1, t)].delta, eps.loc[(N1, t)].z
            if np.isnan(delta):  # the theory does not apply at this width
                assert r[3 + 2 * k] == r[4 + 2 * k] == "—"
                continue
            assert r[3 + 2 * k] == (f"{delta:+.1%}" if abs(delta) >= 0.01 else f"{delta:+.2%}")
            assert r[4 + 2 * k] == f"{z:+.1f}"
        best = min((t for t in shown if np.isfinite(eps.loc[(N1, t)].delta)), key=lambda t: abs(eps.loc[(N1, t)].delta))
        assert r[-1].startswith(f"{best} (")  # the closest theory at this width
    # the wide points table is a linked CSV, not a table of the report
    assert "## Points" not in text and "[summary.csv](summary.csv)" in text
    assert "max_abs_z_overlap" not in text and "sampling_seconds" not in text
    for N1 in WIDTHS:
        assert f"(points/N1={N1}_seed=0/comparison.md)" in text


def test_no_nan_and_no_sentence_repeated(sweep):
    text = (sweep / "report.md").read_text()
    assert not re.search(r"\bnan\b", text, flags=re.IGNORECASE), text
    long = [s for s in sentences(text) if len(s) > 40]
    repeated = {s for s in long if long.count(s) > 1}
    assert not repeated, repeated
    assert text.count("does not apply") <= len(theory.METHODS)  # once per theory at most, never once per row
    assert text.count("Δ = (MC - theory) / |theory|") == 1  # Delta defined once


def test_the_off_diagonal_overlaps_are_called_out(sweep):
    text = (sweep / "report.md").read_text()
    pooled = pd.read_csv(sweep / "pooled.csv")
    assert "## Readout overlaps and the output-output correlations" in text
    assert "every off-diagonal overlap <v_a v_b>/N1 is 0" in text
    assert "![readout overlaps at N1 = 8 and 32, one row per width" in text  # the caption names every width
    head = "| N1 | outputs (a, b) | sampled <v_a v_b>/N1 | exact Q*_ab/lambda1 | z against exact | z against 0 |"
    section = text[text.index(head):].split("\n\n")[0].splitlines()[2:]
    assert len(section) == len(WIDTHS) * 3  # D = 3: three pairs a < b at each width
    ov = pooled[pooled.theory == "exact"].set_index(["N1", "quantity"])
    for row in section:
        N1, pair, sampled, th, z_th, z0 = [c.strip() for c in row.strip("|").split("|")]
        a, b = (int(s[1:]) for s in pair.strip("()").split(", "))  # class names y0, y1, y2
        entry = ov.loc[(float(N1), f"overlap[{a},{b}]")]
        mean, err = (float(s) for s in sampled.rstrip("¹").split(" ± "))
        assert mean == pytest.approx(entry.mc_mean, abs=err) and th == f"{entry.prediction:.4g}"
        assert z_th == f"{entry.z:+.1f}" and z0 == f"{entry.mc_mean / entry.mc_error:+.1f}"


def test_one_verdict_sentence_per_theory(sweep):
    text = (sweep / "report.md").read_text()
    verdicts = text[text.index("## Verdicts"):text.index("## Per width")]
    for t in applying(pd.read_csv(sweep / "pooled.csv")):
        assert verdicts.count(f"* **{t}** (") == 1


def _below_theory(src, dst, shift=-0.2):
    """A copy of the sweep whose draws are rebuilt: eps_g at (1 + shift) times the exact theory's (below it), the
    overlaps at the exact theory's, small noise; the report rewritten from them."""
    shutil.copytree(src, dst)
    data = rp.datasets.synthetic(P=30, P_test=20, N0=6, D=3)
    rng = np.random.default_rng(1)
    for N1 in WIDTHS:
        fit = rp.theory.solve(data.X, data.Y, N1=N1, T=0.05)
        eps = fit.generalization_error(data.X_test, data.Y_test)
        n = 2000
        ov = fit.readout_overlap + 1e-3 * rng.standard_normal((2, n, 3, 3))
        ov = (ov + np.swapaxes(ov, -1, -2)) / 2
        dt = dg.to_datatree({"eps_g": eps * (1 + shift) + 1e-3 * eps * rng.standard_normal((2, n)), "overlap": ov},
                            sample_stats={"accept_prob": np.full((2, n), 0.8)})
        dt.to_netcdf(dst / "points" / f"N1={N1}_seed=0" / "observables.nc")
    report_mod.report(dst)
    return dst


def test_a_negative_delta_keeps_its_sign(sweep, tmp_path):
    out = _below_theory(sweep, tmp_path / "below")
    pooled = pd.read_csv(out / "pooled.csv")
    eps = pooled[(pooled.quantity == "eps_g") & (pooled.theory == "exact")]
    np.testing.assert_allclose(eps.delta, (eps.mc_mean - eps.prediction) / eps.prediction.abs())
    assert (eps.delta < -0.15).all() and (eps.z < -3).all()
    assert all(v.startswith("deviates by -") for v in eps.verdict), list(eps.verdict)
    text = (out / "report.md").read_text()
    _, head, rows = first_table(text)
    col = head.index("exact Δ")
    assert all(r[col].startswith("-") for r in rows)
    line = next(ln for ln in text.splitlines() if ln.startswith("* **exact** ("))
    assert re.search(r"deviates at 2 of 2 widths, by -\d+\.\d%", line), line
    summary = pd.read_csv(out / "summary.csv")
    assert (summary.delta_exact < 0).all()  # summary.csv: the points' own comparisons, signed the same way


def test_the_verdict_and_compare_are_signed(data_fit):
    assert dg.verdict(-19.9, -0.0879, True) == "deviates by -8.79% at z = -19.9"
    assert dg.verdict(19.9, 0.0879, True) == "deviates by +8.79% at z = +19.9"
    data, fit = data_fit
    rng = np.random.default_rng(0)
    eps_th = fit.generalization_error(data.X_test, data.Y_test)
    ov = fit.readout_overlap + 1e-3 * rng.standard_normal((1, 4000, 2, 2))
    ds = dg.compare({"eps_g": 0.9 * eps_th + 0.001 * eps_th * rng.standard_normal((1, 4000)), "overlap": ov},
                    fit, data.X_test, data.Y_test, cut=0)
    e = ds.sel(quantity="eps_g", theory="exact")
    assert float(e.delta) == pytest.approx(-0.1, rel=0.02) and e.verdict.item().startswith("deviates by -")


@pytest.fixture(scope="module")
def data_fit():
    data = rp.datasets.synthetic(P=40, P_test=100, N0=10, D=2, teacher="linear", seed=0)
    return data, rp.theory.solve(data.X, data.Y, N1=20, T=0.1)


def _pooled(data, fit, widths, D):
    rng = np.random.default_rng(2)
    out = []
    for N1 in widths:
        f = fit.refit("infinite_width", N1=N1)
        eps = f.refit("exact").generalization_error(data.X_test, data.Y_test)
        ov = f.refit("exact").readout_overlap + 1e-3 * rng.standard_normal((2, 3000, D, D))
        out.append(dg.compare({"eps_g": eps + 1e-3 * rng.standard_normal((2, 3000)), "overlap": ov}, f,
                              data.X_test, data.Y_test, cut=0))
    return out


def test_a_theory_that_applies_nowhere_is_a_sentence_not_a_column(data_fit):
    data, fit = data_fit
    pooled = _pooled(data, fit, (20, 80), 2)
    for ds in pooled:  # one_loop made inapplicable everywhere, with a reason
        ds["prediction"].loc[dict(theory="one_loop")] = np.nan
        ds["z"].loc[dict(theory="one_loop")] = np.nan
        ds["verdict"].loc[dict(theory="one_loop")] = "does not apply"
        ds["not_applicable"].loc[dict(theory="one_loop")] = "a reason given once"
    lines = report_mod.answer_table(pooled, data.X.shape[0])
    assert not any("one_loop Δ" in ln for ln in lines) and "exact Δ" in lines[0]
    text = "\n".join(lines)
    assert text.count("a reason given once") == 1 and "does not apply at any width here" in text
    assert "nan" not in text.lower()
    verdicts = "\n".join(report_mod.verdict_sentences(pooled))
    assert "one_loop" not in verdicts and verdicts.count("* **") == len(theory.METHODS) - 1


def test_one_output_has_no_off_diagonal_table_and_two_have_one(data_fit):
    data, fit = data_fit
    two = "\n".join(report_mod.off_diagonal_section(_pooled(data, fit, (20,), 2)))
    assert "| 20 | (0, 1) |" in two and "output-output correlations" in two
    d1 = rp.datasets.synthetic(P=40, P_test=100, N0=10, D=1, teacher="linear", seed=0)
    one = "\n".join(report_mod.off_diagonal_section(_pooled(d1, rp.theory.solve(d1.X, d1.Y, N1=20, T=0.1), (20,), 1)))
    assert "outputs (a, b)" not in one and "overlaps.png" in one
