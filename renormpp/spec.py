r"""One network on one data set, declared once: :class:`Spec`.

A :class:`Spec` holds the data (X, Y and a test set), the architecture and its hyperparameters (the width
:math:`N_1`, the depth, the temperature :math:`T`, the prior precisions :math:`\lambda_0, \lambda_1`, the activation)
and yields everything that needs them, with the same values everywhere:

* :attr:`Spec.model`: the NumPyro model of the finite network with the data and every hyperparameter bound
  (``numpyro.infer.MCMC(...).run(key)`` takes no further argument);
* :meth:`Spec.kernel`: the recommended sampler for plain ``numpyro.infer.MCMC``, with no step size to choose;
* :attr:`Spec.observables`: the per-draw generalization error and readout overlaps of the model's draws;
* :meth:`Spec.theory`: the proportional-limit theory of the same network (:func:`renormpp.theory.solve`);
* :meth:`Spec.compare`: the sampled observables against a theory, as a table like ``arviz.summary``.

A theory fit from other hyperparameters, or a run of another network, is refused with an error that names what
differs (:func:`renormpp.diagnostics.matching.check_match`): a mismatch is never silent. The network is the paper's,

.. math:: f(x) = v\,\sigma(w x/\sqrt{N_0})/\sqrt{N_1},\quad w\sim\mathcal N(0, 1/\lambda_0),\
          v\sim\mathcal N(0, 1/\lambda_1),\quad p(w, v\mid X, Y)\propto \mathrm{prior}\cdot e^{-\mathcal L/T},

with :math:`\mathcal L = \frac12\sum_\mu\|y^\mu - f(x^\mu)\|^2`; the theory's order parameter renormalizes the NNGP
kernel to :math:`Q\otimes K/\lambda_1` (Eq. (1) of the paper).
"""
from __future__ import annotations

import functools
import inspect
import warnings
from typing import Callable

import numpy as np

from . import architectures, observables as _observables, readout
from ._checks import positive, positive_int
from .diagnostics.matching import MATCHED, activation_name, check_match, fit_settings, run_settings
from .network import get_activation

class NotSettledWarning(UserWarning):
    """A compared quantity has not settled (it drifts, or its chains disagree): run longer before reading its z."""


class Spec:
    r"""One finite Bayesian network on one data set: data, architecture and hyperparameters, given once.

    Parameters
    ----------
    data : object, optional
        A data set with attributes ``X``, ``Y``, ``X_test`` and ``Y_test`` (e.g.
        :func:`renormpp.datasets.synthetic`, :func:`renormpp.datasets.mnist`). Or give the arrays below.
    N1 : int
        Width of each hidden layer (:math:`\alpha = P/N_1`); for ``architecture="conv"`` the number of channels.
    T : float, default 0.01
        Temperature of the Gibbs posterior :math:`\propto \mathrm{prior}\cdot e^{-\mathcal L/T}`.
    lambda0 : float, default 1.0
        Prior precision of the hidden weights, :math:`w \sim \mathcal N(0, 1/\lambda_0)`.
    lambda1 : float, default 1.0
        Prior precision of the readout, :math:`v \sim \mathcal N(0, 1/\lambda_1)`.
    activation : str or callable, default "erf"
        ``"erf"``, ``"relu"``, ``"linear"``, ``"tanh"`` or an elementwise callable.
    depth : int, default 1
        Number of equal-width hidden layers (fully connected network only).
    architecture : {"fc", "conv"}, default "fc"
        The fully connected network of the paper, or the one-hidden-layer CNN (options ``image_shape``, ``patch``).
    X, Y, X_test, Y_test : array_like, optional
        The data, where ``data`` is not given: inputs (P, N0), labels (P, D); the test set (P0, N0), (P0, D).
    **options
        The architecture's own options (``image_shape`` and ``patch`` for ``"conv"``).

    Raises
    ------
    ValueError
        Non-positive ``N1``, ``T`` or a prior precision, an unknown activation or architecture, an option the
        architecture does not cover, missing data, or inputs and labels whose shapes disagree.

    Examples
    --------
    >>> data = rp.datasets.synthetic(P=100, P_test=200, N0=20, D=2, seed=0)
    >>> spec = rp.Spec(data, N1=50, T=0.01)
    >>> fit = spec.theory()
    >>> mcmc = MCMC(spec.kernel(), num_warmup=200, num_samples=1000, num_chains=2, chain_method="vectorized")
    >>> mcmc.run(jax.random.PRNGKey(0))
    >>> spec.compare(mcmc, fit)
    """

    def __init__(self, data=None, *, N1: int, T: float = 0.01, lambda0: float = 1.0, lambda1: float = 1.0,
                 activation="erf", depth: int = 1, architecture: str = "fc", X=None, Y=None, X_test=None,
                 Y_test=None, **options):
        if data is not None:
            if any(a is not None for a in (X, Y, X_test, Y_test)):
                raise ValueError("give either data or the arrays X, Y, X_test, Y_test, not both")
            X, Y = getattr(data, "X", None), getattr(data, "Y", None)
            X_test, Y_test = getattr(data, "X_test", None), getattr(data, "Y_test", None)
        if X is None or Y is None:
            raise ValueError("a Spec needs training data: give data=rp.datasets.synthetic(...) (or mnist, cifar10), "
                             "or X and Y")
        self.X, self.Y = self._pair(X, Y, "X", "Y")
        self.X_test = self.Y_test = None
        if (X_test is None) != (Y_test is None):
            raise ValueError("give both X_test and Y_test, or neither")
        if X_test is not None:
            self.X_test, self.Y_test = self._pair(X_test, Y_test, "X_test", "Y_test")
            if self.X_test.shape[1] != self.X.shape[1] or self.Y_test.shape[1] != self.Y.shape[1]:
                raise ValueError(f"the test set has N0={self.X_test.shape[1]}, D={self.Y_test.shape[1]} but the "
                                 f"training set N0={self.X.shape[1]}, D={self.Y.shape[1]}")
        self.N1 = positive_int("N1", N1, "hidden-layer width")
        self.T = positive("T", T, "temperature")
        self.lambda0 = positive("lambda0", lambda0, "prior precision of the hidden weights")
        self.lambda1 = positive("lambda1", lambda1, "prior precision of the readout")
        get_activation(activation)  # an unknown name raises here, naming the known ones
        self.activation = activation
        self.arch = architectures.get_architecture(architecture)
        self.depth = positive_int("depth", depth, "number of hidden layers")
        if self.arch.name == "fc":
            options = dict(options, depth=self.depth)
        elif self.depth != 1:
            raise ValueError(f"depth={depth} is for the fully connected network; architecture={architecture!r} has "
                             "one hidden layer")
        self.arch.check(activation, **options)
        self.arch.check_inputs(self.X.shape[1], **options)
        self.options = options

    @staticmethod
    def _pair(X, Y, xname, yname):
        X = np.asarray(X, dtype=np.float64)
        Y = np.asarray(Y, dtype=np.float64)
        Y = Y[:, None] if Y.ndim == 1 else Y
        if X.ndim != 2 or Y.ndim != 2 or X.shape[0] != Y.shape[0]:
            raise ValueError(f"{xname} must be (P, N0) and {yname} (P, D) with the same P; got {X.shape} and {Y.shape}")
        for name, A in ((xname, X), (yname, Y)):
            if not np.all(np.isfinite(A)):
                raise ValueError(f"{name} contains NaN or inf entries; remove or impute them first")
        return X, Y

    # ---- what the spec is ----------------------------------------------------------------------------------------
    @property
    def P(self) -> int:
        """Number of training examples."""
        return self.X.shape[0]

    @property
    def D(self) -> int:
        """Number of outputs."""
        return self.Y.shape[1]

    @property
    def alpha(self) -> float:
        r""":math:`\alpha = P/N_1`, examples per hidden unit."""
        return self.P / self.N1

    def hyperparameters(self) -> dict:
        """The values a theory fit and a run must share, by name (:data:`MATCHED`)."""
        return dict(N1=self.N1, T=self.T, lambda0=self.lambda0, lambda1=self.lambda1,
                    activation=activation_name(self.activation), depth=self.depth)

    def __repr__(self) -> str:
        h = self.hyperparameters()
        depth = f", depth={self.depth}" if self.depth > 1 else ""
        return (f"Spec({self.arch.name}, P={self.P}, N0={self.X.shape[1]}, D={self.D}, N1={self.N1}, "
                f"alpha={self.alpha:.3g}, T={h['T']:g}, lambda0={h['lambda0']:g}, lambda1={h['lambda1']:g}, "
                f"activation={h['activation']!r}{depth})")

    # ---- the model -----------------------------------------------------------------------------------------------
    def _model_kwargs(self, integrate_v: bool) -> dict:
        return self.arch.model_kwargs(N1=self.N1, T=self.T, lambda0=self.lambda0, lambda1=self.lambda1,
                                      activation=self.activation, integrate_v=integrate_v, **self.options)

    def _float32(self):
        return self.X.astype(np.float32), self.Y.astype(np.float32)

    @functools.cached_property
    def model(self) -> Callable:
        """The NumPyro model of the finite network (sites ``w`` and ``v``, or ``w0 … w{L-1}`` and ``v``) with the
        training data and every hyperparameter bound: ``MCMC(NUTS(spec.model), ...).run(key)``."""
        return functools.partial(self.arch.model, *self._float32(), **self._model_kwargs(False))

    @functools.cached_property
    def marginal_model(self) -> Callable:
        """The same posterior with the readout v integrated out exactly (only the hidden weights are sites): what
        :meth:`kernel` samples. Its draws' observables are recorded as their expectations given the hidden weights."""
        return functools.partial(self.arch.model, *self._float32(), **self._model_kwargs(True))

    def _test_set(self):
        if self.X_test is None:
            raise ValueError("this needs a test set: give the Spec data with X_test and Y_test (or X_test=, Y_test=)")
        return self.X_test.astype(np.float32), self.Y_test.astype(np.float32)

    @functools.cached_property
    def observables(self) -> Callable:
        """Observables of a draw of :attr:`model`: ``fn(params) -> {"eps_g", "overlap"}``, the generalization error
        on the test set and :math:`v v^\\top/N_1` (:func:`renormpp.observables.default`); for any NumPyro kernel,
        ``rp.infer.Observed(NUTS(spec.model), spec.observables)``."""
        return _observables.default(*self._test_set(), self.activation, self.arch.features,
                                    self.arch.patches(**self.options))

    @functools.cached_property
    def marginal_observables(self) -> Callable:
        """Observables of a draw of :attr:`marginal_model` (hidden weights only): the expectations of ``eps_g`` and
        ``overlap`` over v given them (:func:`renormpp.readout.rao_blackwell`)."""
        return readout.rao_blackwell(*self._float32(), *self._test_set(), T=self.T, lambda1=self.lambda1,
                                     activation=self.activation, features=self.arch.features,
                                     patches=self.arch.patches(**self.options))

    def kernel(self, **overrides):
        """The recommended sampler, an ``MCMCKernel`` for plain ``numpyro.infer.MCMC``.

        Metropolis-adjusted kinetic Langevin (:class:`renormpp.infer.KineticLangevin`) on the hidden weights with the
        readout integrated out exactly (:attr:`marginal_model`), recording :attr:`marginal_observables`. Its step
        size and diagonal mass are adapted in MCMC's warmup (the first guess of the step is 1e-4): no step size to
        choose. With ``chain_method="vectorized"`` the chains adapt one step and mass together.

        Parameters
        ----------
        **overrides
            Any keyword of :class:`renormpp.infer.KineticLangevin` (e.g. ``inner_steps``, ``friction``,
            ``target_accept_prob``), replacing this method's defaults.

        Returns
        -------
        renormpp.infer.KineticLangevin
        """
        from .infer import KineticLangevin

        kw = dict(step_size=1e-4, inner_steps=10, adapt_step_size=True, adapt_mass=True, pooled_adaptation=True,
                  observables=self.marginal_observables)
        kw.update(overrides)
        return KineticLangevin(self.marginal_model, **kw)

    # ---- the theory ----------------------------------------------------------------------------------------------
    def theory(self, method: str = "exact", **solver):
        """A theory of this network: :func:`renormpp.theory.solve` with this spec's data and hyperparameters.

        Parameters
        ----------
        method : str, default "exact"
            Any name of :data:`renormpp.theory.THEORIES` (``"exact"``, ``"one_loop"``, ``"infinite_width"``,
            ``"corrected"``, ``"adaptive_kernel"``, ``"shared_field"``, ``"specialists"``, ``"field_specialists"``).
        **solver
            The theory's own options (``renormpp.theory.THEORIES[method].options``: ``gtol`` and ``maxiter`` for
            the kernel methods, ``k`` for the specialists, ...).

        Returns
        -------
        fit
            A fit with the protocol of every theory (:data:`renormpp.theory.PROTOCOL`).
        """
        return self.arch.solve(self.X, self.Y, N1=self.N1, T=self.T, lambda0=self.lambda0, lambda1=self.lambda1,
                               activation=self.activation, method=method, **self.options, **solver)

    # ---- the comparison ------------------------------------------------------------------------------------------
    def compare(self, run, *fits, theories=None, cut="auto", error: str = "gamma"):
        r"""The sampled generalization error and readout overlaps against the theory, one row per quantity.

        Parameters
        ----------
        run : numpyro.infer.MCMC, dict or DataTree
            The run: an MCMC of :meth:`kernel` (or of any kernel on :attr:`model` recording :attr:`observables`),
            or its samples (``eps_g`` and ``overlap`` with leading chain, draw axes).
        *fits : fits of renormpp.theory.solve, optional
            Fits of this spec, of any theory (default: ``self.theory()``): ``spec.compare(mcmc, spec.theory(),
            spec.theory("specialists", k=2))``. A fit of other hyperparameters or data is refused.
        theories : list of str, optional
            The theories to show, names of the comparison's ``theory`` coordinate (default: each fit's own,
            :func:`renormpp.diagnostics.comparison.column_name`).
        cut : "auto" or int
            The thermalization cut, in draws per chain.
        error : {"gamma", "blocking", "ess"}
            The estimator of the Monte Carlo error of the means.

        Returns
        -------
        pandas.DataFrame
            Indexed by quantity (``eps_g``, ``overlap[a,b]`` for a <= b), with the sampled ``mean``, its ``mcse``,
            ``ess`` (draws / tau_int, the integrated autocorrelation time) and ``r_hat``; then, for each theory,
            ``theory``, ``delta`` = (MC - theory)/|theory| (signed) and ``z`` = (MC - theory)/error (the mcse and a
            sampled theory's own error, ``theory_mcse``, in quadrature), under a column
            level named by the theory where several are shown. The ``attrs`` hold the comparison's Dataset
            (``table.attrs["dataset"]``, :func:`renormpp.diagnostics.compare`).

        Raises
        ------
        ValueError
            The fit or the run is of another network or data set than this spec (:func:`renormpp.diagnostics.matching.check_match`).

        Warns
        -----
        NotSettledWarning
            Where a quantity drifts or its chains disagree: its error bar, and so its z, does not hold yet.
        """
        import pandas as pd

        from .diagnostics import compare as _compare

        from .diagnostics.comparison import column_name

        fits = fits or (self.theory(),)
        for fit in fits:
            check_match(self.hyperparameters(), fit_settings(fit), "the spec", f"the {fit.method} fit")
            same = fit.solved_on(self.X) if hasattr(fit, "solved_on") else np.array_equal(np.asarray(fit.X), self.X)
            if fit.P != self.P or not same:
                raise ValueError(f"the {fit.method} fit was solved on other training data (P={fit.P}) than this "
                                 f"spec's (P={self.P}): use spec.theory({fit.method!r})")
        settings = run_settings(run)
        if settings:
            check_match(self.hyperparameters(), settings, "the spec", "the run")
        ds = _compare(run, list(fits), *self._test_set(), error=error, cut=cut)
        names = [column_name(f) for f in fits] if theories is None else list(theories)
        unknown = [t for t in names if t not in ds.theory.values]
        if unknown:
            raise ValueError(f"unknown theories {unknown}; choose among {list(ds.theory.values)}")
        n = int(ds.attrs["draws"])
        base = pd.DataFrame({"mean": ds.mc_mean.values, "mcse": ds.mc_error.values,
                             "ess": np.round(n / ds.tau_int.values), "r_hat": ds.rhat.values},
                            index=pd.Index(ds.quantity.values, name="quantity"))
        unsettled = [str(q) for q, ok in zip(ds.quantity.values, ds.settled.values) if not ok]
        if unsettled:
            warnings.warn(f"not settled: {', '.join(unsettled)} (a drift, or chains that disagree: "
                          "table.attrs['dataset'] has drift_z and chains_p); run longer before reading z",
                          NotSettledWarning, stacklevel=2)
        cols = {}
        for t in names:
            th = ds.sel(theory=t)
            cols[t] = pd.DataFrame({"theory": th.prediction.values, "delta": th.delta.values, "z": th.z.values},
                                   index=base.index)
            if np.any(th.prediction_error.values > 0):
                cols[t].insert(1, "theory_mcse", th.prediction_error.values)
        if len(names) == 1:
            table = pd.concat([base, cols[names[0]]], axis=1)
        else:
            table = pd.concat({"sampled": base, **cols}, axis=1)
        table.attrs["dataset"] = ds
        return table


__all__ = ["Spec", "NotSettledWarning"]
