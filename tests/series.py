"""Series with known answers, for the tests of the statistics (test_mcstats.py) and of the comparison
(test_diagnostics.py)."""
import numpy as np
import scipy.signal


def ar1(phi, n, seed=0):
    """Stationary AR(1) with unit variance: tau_int = (1 + phi) / (1 - phi)."""
    rng = np.random.default_rng(seed)
    e = rng.standard_normal(n) * np.sqrt(1 - phi**2)
    e[0] = rng.standard_normal()
    return scipy.signal.lfilter([1.0], [1.0, -phi], e)
