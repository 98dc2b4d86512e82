import numpy as np
import pytest

import renormpp as rp


def test_linear_teacher_is_reproducible_and_exact():
    a = rp.datasets.synthetic(P=50, P_test=20, N0=9, D=3, teacher="linear", seed=4)
    b = rp.datasets.synthetic(P=50, P_test=20, N0=9, D=3, teacher="linear", seed=4)
    np.testing.assert_array_equal(a.X, b.X)
    assert a.X.shape == (50, 9) and a.Y.shape == (50, 3) and a.X_test.shape == (20, 9) and a.Y_test.shape == (20, 3)
    # labels are linear in the inputs: Y = X W^T / sqrt(N0) for one W on train and test
    X = np.vstack([a.X, a.X_test])
    Y = np.vstack([a.Y, a.Y_test])
    W, *_ = np.linalg.lstsq(X / 3.0, Y, rcond=None)
    np.testing.assert_allclose(X / 3.0 @ W, Y, atol=1e-10)
    assert a.metadata["seed"] == 4 and a.metadata["teacher"] == "linear"
    assert not np.array_equal(a.X, rp.datasets.synthetic(P=50, P_test=20, N0=9, D=3, seed=5).X)


def test_erf_teacher_label_statistics():
    """y_a = v_a . erf(w x / sqrt N0) / sqrt N1 with standard normal v, w: averaged over teachers,
    E[y^2] = E[erf(h)^2] = (2/pi) arcsin(2/3) for h ~ N(0, 1) (the NNGP kernel on the diagonal)."""
    var = [rp.datasets.synthetic(P=500, P_test=1, N0=30, D=2, teacher="erf_1hl", seed=s).Y.var() for s in range(40)]
    se = np.std(var) / np.sqrt(len(var))
    assert abs(np.mean(var) - 2 / np.pi * np.arcsin(2 / 3)) < 4 * se
    assert rp.datasets.synthetic(P=5, P_test=1, teacher="erf_1hl").metadata["teacher_width"] == 1000


@pytest.mark.parametrize("kw, match", [(dict(teacher="cubic"), "unknown teacher"), (dict(P=0), "P must be"),
                                       (dict(D=1.5), "D must be")])
def test_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        rp.datasets.synthetic(**kw)
