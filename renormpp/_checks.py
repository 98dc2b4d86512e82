"""Input checks shared by the modules: one wording for one kind of bad input."""
import numpy as np


def positive(name: str, value, meaning: str = "") -> float:
    """``float(value)`` if it is a positive finite number; otherwise a ValueError naming ``name``."""
    what = f" ({meaning})" if meaning else ""
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number{what}; got {value!r}") from None
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number{what}; got {value}")
    return value
