"""The README's main job runs end to end and reports what a direct solve gives."""
import numpy as np

import renormpp as rp
from renormpp import cli, demo


def test_demo_writes_table_and_plot(tmp_path, capsys):
    assert cli.main(["demo", "--out", str(tmp_path), "--P", "150", "--N0", "20", "--D", "3"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "theory_sweep.png").stat().st_size > 10_000
    table = (tmp_path / "theory_sweep.txt").read_text().splitlines()
    assert len(table) == 2 + 16 and table[2].split()[0] == "50"
    # the first row's exact loss equals a direct solve at N1 = 50
    data = rp.datasets.synthetic(P=150, P_test=150, N0=20, D=3, teacher="linear", seed=0)
    fit = rp.theory.solve(data.X, data.Y, N1=50, T=0.01)
    assert f"{fit.generalization_error(data.X_test, data.Y_test):12.5f}".strip() == table[2].split()[2]
    assert "saved" in out


def test_sweep_rows_match_solve():
    data = rp.datasets.synthetic(P=80, P_test=40, N0=10, D=2, teacher="erf_1hl", seed=3)
    rows = demo.sweep(data, [40.0, 400.0])
    for r in rows:
        fit = rp.theory.solve(data.X, data.Y, N1=r["N1"], T=0.01)
        np.testing.assert_allclose(r["Q"], fit.Q, atol=1e-9)
        one = rp.theory.solve(data.X, data.Y, N1=r["N1"], T=0.01, method="one_loop")
        if one.converged:
            np.testing.assert_allclose(r["one_loop"], one.generalization_error(data.X_test, data.Y_test))


def test_cli_help_and_unknown_command(capsys):
    assert cli.main(["--help"]) == 0
    assert cli.main(["frobnicate"]) == 2
    assert "demo" in capsys.readouterr().out
