"""Input checks shared by the modules: one wording for one kind of bad input."""
import numpy as np


def positive(name: str, value, meaning: str = "") -> float:
    """``float(value)`` if it is a positive finite number; otherwise a ValueError naming ``name``."""
    what = f" ({meaning})" if meaning else ""
    if isinstance(value, (str, bytes)):
        raise ValueError(f"{name} must be a positive number{what}; got the string {value!r}: write it without quotes")
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a positive number{what}; got {value!r}")
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number{what}; got {value!r}") from None
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number{what}; got {value}")
    return value


def positive_int(name: str, value, meaning: str = "") -> int:
    """``int(value)`` if it is an integer >= 1 (a whole float such as ``1e4`` too; not a bool or a string);
    otherwise a ValueError naming ``name`` and the bad value."""
    what = f" ({meaning})" if meaning else ""
    ok = isinstance(value, (int, np.integer, float, np.floating)) and not isinstance(value, (bool, np.bool_))
    if not ok or not np.isfinite(value) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be a positive integer{what}; got {value!r}")
    return int(value)


def positive_ints(**values) -> None:
    """:func:`positive_int` of every ``name=value``, e.g. ``positive_ints(P=P, P_test=P_test)``."""
    for name, value in values.items():
        positive_int(name, value)


def matrix(A, name: str, rows: str = "rows", columns: str = "columns", *, vector_is_column: bool = False) -> np.ndarray:
    """``A`` as a finite float64 array of shape (rows, columns), at least one of each; otherwise a ValueError that
    names ``name``, the problem and the fix. ``vector_is_column``: a 1-d array is one column (labels with D = 1)."""
    if np.iscomplexobj(A):
        raise ValueError(f"{name} is complex; renormpp works with real numbers (pass {name}.real if the imaginary "
                         "part is zero)")
    try:
        A = np.asarray(A, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an array of numbers ({rows}, {columns}); got {type(A).__name__}") from None
    if A.ndim == 1 and vector_is_column:
        A = A[:, None]
    if A.ndim != 2:
        raise ValueError(f"{name} must be a 2-d array ({rows}, {columns}); got shape {A.shape}")
    if A.shape[0] == 0:
        raise ValueError(f"{name} is empty (shape {A.shape}); it needs at least one row ({rows})")
    if A.shape[1] == 0:
        raise ValueError(f"{name} has no columns (shape {A.shape}); it needs at least one ({columns})")
    if not np.all(np.isfinite(A)):
        bad = int(np.size(A) - np.count_nonzero(np.isfinite(A)))
        raise ValueError(f"{name} contains {bad} NaN or inf entries; remove or impute them first")
    return A


def data_pair(X, Y, x_name: str = "X", y_name: str = "Y", rows: str = "P"):
    """Inputs (rows, N0) and labels (rows, D) as finite float64 matrices with the same rows (a 1-d ``Y`` is D = 1)."""
    X = matrix(X, x_name, rows, "N0 features")
    Y = matrix(Y, y_name, rows, "D outputs", vector_is_column=True)
    if X.shape[0] != Y.shape[0]:
        raise ValueError(f"{x_name} has {X.shape[0]} rows but {y_name} has {Y.shape[0]}; they must have one row per "
                         "example")
    return X, Y
