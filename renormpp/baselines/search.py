r"""Hyperparameter search for the Adam baseline, and its retraining over independent initializations.

Supplement, "Hyperparameter Optimization": learning rate, :math:`L_2` strength and batch size are searched to
minimize the validation MSE (Ray Tune, ``AsyncHyperBandScheduler`` + ``HyperOptSearch``); the best
configuration is retrained with early stopping for 20 independent initializations, and the mean and spread
of the test loss are reported. Here the search space is one :class:`SearchSpace`, read by both backends:

* ``backend="optuna"`` (default, in-process, no cluster): Optuna's seeded TPE sampler with a
  ``SuccessiveHalvingPruner`` fed the best validation MSE every ``report_every`` epochs;
* ``backend="ray"``: Ray Tune with ``AsyncHyperBandScheduler`` and ``HyperOptSearch`` as in the paper
  (``OptunaSearch`` where hyperopt is missing); ``pip install 'renormpp[ray]'``.

Every trial is trained on the same split and from the same initialization (``seed``), so that trials
differ by their hyperparameters only.
"""
from __future__ import annotations

import math
import tempfile
import warnings
from dataclasses import dataclass, field, replace

import numpy as np

from ..datasets._common import check_positive_ints
from ._common import check_data, split
from .adam import Training

BACKENDS = ("optuna", "ray")
METRICS = ("train_mse", "train_accuracy", "val_mse", "val_accuracy", "test_mse", "test_accuracy")


@dataclass(frozen=True)
class SearchSpace:
    """Where the search looks: ``learning_rate`` and ``l2`` log-uniform in (low, high), ``batch_size`` one of
    the given sizes (a size above the fitted part means full batches). The lowest ``l2`` stands in for no
    penalty (a log-uniform range cannot hold 0): at 1e-8 it moves the weights by less than float32 resolves."""

    learning_rate: tuple = (1e-4, 1e-1)
    l2: tuple = (1e-8, 1e-1)
    batch_size: tuple = (16, 32, 64, 128, 256)

    def __post_init__(self):
        for name in ("learning_rate", "l2"):
            lo, hi = getattr(self, name)
            if not 0 < lo < hi < np.inf:
                raise ValueError(f"SearchSpace.{name} must be a range (low, high) with 0 < low < high; got {(lo, hi)}")
        if not self.batch_size:
            raise ValueError("SearchSpace.batch_size needs at least one batch size")
        check_positive_ints(**{f"batch_size[{i}]": b for i, b in enumerate(self.batch_size)})

    def suggest(self, trial) -> dict:
        """A configuration drawn by an Optuna trial."""
        return dict(learning_rate=trial.suggest_float("learning_rate", *self.learning_rate, log=True),
                    l2=trial.suggest_float("l2", *self.l2, log=True),
                    batch_size=trial.suggest_categorical("batch_size", list(self.batch_size)))

    def ray(self) -> dict:
        """The same space as a Ray Tune ``param_space``."""
        from ray import tune

        return dict(learning_rate=tune.loguniform(*self.learning_rate), l2=tune.loguniform(*self.l2),
                    batch_size=tune.choice(list(self.batch_size)))


@dataclass(frozen=True)
class SearchResult:
    """``best_config`` (learning_rate, l2, batch_size) with its validation MSE ``best_val_mse``; ``trials``: one
    dict per trial (its configuration, ``val_mse`` and ``state``: complete or pruned), in the order run."""

    best_config: dict
    best_val_mse: float
    trials: list = field(repr=False)
    backend: str = "optuna"


def search_adam(X, Y, N1: int, *, n_trials: int = 30, backend: str = "optuna", space: SearchSpace | None = None,
                seed: int = 0, activation="relu", max_epochs: int = 500, patience: int = 20,
                val_fraction: float = 0.2, report_every: int = 10, max_concurrent_trials: int | None = None,
                ray_run_config: dict | None = None) -> SearchResult:
    """Search learning rate, L2 strength and batch size of :func:`~renormpp.baselines.train_adam` for the lowest
    validation MSE (the early-stopped minimum) with N1 hidden units.

    Trials report their best validation MSE every ``report_every`` epochs, and the pruner (Optuna's successive
    halving, Ray's asynchronous HyperBand) stops the unpromising ones. With ``backend="optuna"`` the trials run
    one after the other and the result is reproducible from ``seed``. ``backend="ray"`` runs them in parallel on
    the Ray cluster (local if none is running; reproducible only with ``max_concurrent_trials=1``);
    ``ray_run_config``: keyword arguments of ``ray.tune.RunConfig`` (default: Ray's results go to a new temporary
    folder, ``renormpp-tune-*``).

    Parameters
    ----------
    X : array_like, shape (P, N0)
        Training inputs.
    Y : array_like, shape (P, D)
        Training labels.
    N1 : int
        Hidden units.
    n_trials : int, default 30
        Trials of the search.
    backend : {"optuna", "ray"}
        Where the trials run (above).
    space : SearchSpace, optional
        The ranges searched (default: :class:`~renormpp.baselines.SearchSpace`'s).
    seed : int, default 0
        The seed of the search, the split and the trainings.
    activation : str or callable, default "relu"
        The network's activation.
    max_epochs : int, default 500
        The most epochs of a training.
    patience : int, default 20
        Epochs without a better validation MSE before a training stops.
    val_fraction : float, default 0.2
        The fraction of the rows held out for validation.
    report_every : int, default 10
        Epochs between a trial's reports to the pruner.
    max_concurrent_trials : int, optional
        With Ray: the most trials at once.
    ray_run_config : dict, optional
        Keyword arguments of ``ray.tune.RunConfig``.

    Returns
    -------
    SearchResult
        The best configuration, its validation MSE and the trials.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(map(repr, BACKENDS))}")
    X, Y, _, _ = check_data(X, Y)
    check_positive_ints(n_trials=n_trials, report_every=report_every)
    space = SearchSpace() if space is None else space
    data = split(X, Y, val_fraction, seed)
    options = dict(activation=activation, max_epochs=max_epochs, patience=patience, seed=seed)
    Training(data, N1, **options)  # bad options raise here, before any backend starts
    if backend == "optuna":
        return _search_optuna(data, N1, options, space, n_trials, report_every, seed)
    return _search_ray(data, N1, options, space, n_trials, report_every, seed, max_concurrent_trials, ray_run_config)


def _chunks(training: Training, report_every: int):
    """Advance a training run ``report_every`` epochs at a time; yield (epoch, best val MSE) after each chunk."""
    while not training.done:
        training.run(report_every)
        yield training.epoch, training.best_val


def _search_optuna(data, N1, options, space, n_trials, report_every, seed) -> SearchResult:
    import optuna

    def objective(trial):
        training = Training(data, N1, **options, **space.suggest(trial))
        for epoch, val in _chunks(training, report_every):
            trial.report(val, epoch)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return training.best_val

    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=seed),
                                    pruner=optuna.pruners.SuccessiveHalvingPruner(min_resource=report_every))
        study.optimize(objective, n_trials=n_trials)
    finally:
        optuna.logging.set_verbosity(verbosity)

    def value(t):  # a pruned trial: its last report
        return t.value if t.value is not None else t.intermediate_values[max(t.intermediate_values)]

    trials = [dict(t.params, val_mse=value(t), state=t.state.name.lower()) for t in study.trials]
    return SearchResult(best_config=dict(study.best_params), best_val_mse=float(study.best_value), trials=trials,
                        backend="optuna")


def _ray_trial(config, data, N1, options, report_every):
    from ray import tune

    for epoch, val in _chunks(Training(data, N1, **options, **config), report_every):
        tune.report({"val_mse": val, "epoch": epoch})


def _search_ray(data, N1, options, space, n_trials, report_every, seed, max_concurrent, run_config) -> SearchResult:
    try:
        import ray
        from ray import tune
        from ray.tune.schedulers import AsyncHyperBandScheduler
    except ImportError:
        raise ImportError("backend='ray' needs Ray Tune: pip install 'renormpp[ray]' "
                          "(or use the default backend='optuna')") from None
    try:
        from ray.tune.search.hyperopt import HyperOptSearch

        search = HyperOptSearch(random_state_seed=seed)
    except ImportError:  # hyperopt is missing: Optuna's TPE, the same family of sampler
        from ray.tune.search.optuna import OptunaSearch

        search = OptunaSearch(seed=seed)
    run_config = {"verbose": 0, **(run_config or {})}
    if "storage_path" not in run_config:
        run_config["storage_path"] = tempfile.mkdtemp(prefix="renormpp-tune-")
    started = not ray.is_initialized()
    if started:
        with warnings.catch_warnings():  # Ray starts its processes by fork + exec, which is safe with JAX
            warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
            ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        rungs = max(1, math.ceil(options["max_epochs"] / report_every))
        tuner = tune.Tuner(
            tune.with_parameters(_ray_trial, data=data, N1=N1, options=options, report_every=report_every),
            param_space=space.ray(),
            tune_config=tune.TuneConfig(metric="val_mse", mode="min", num_samples=n_trials, search_alg=search,
                                        scheduler=AsyncHyperBandScheduler(max_t=rungs, grace_period=1),
                                        max_concurrent_trials=max_concurrent),
            run_config=tune.RunConfig(**run_config),
        )
        grid = tuner.fit()
        trials = [dict({k: r.config[k] for k in ("learning_rate", "l2", "batch_size")},
                       val_mse=r.metrics.get("val_mse", np.nan), state="error" if r.error else "complete")
                  for r in grid]
        best = grid.get_best_result()
    finally:
        if started:
            ray.shutdown()
    config = {k: best.config[k] for k in ("learning_rate", "l2", "batch_size")}
    return SearchResult(best_config=config, best_val_mse=float(best.metrics["val_mse"]), trials=trials, backend="ray")


@dataclass(frozen=True)
class AdamBaseline:
    """The best configuration retrained from ``len(runs)`` independent initializations. ``values[m]`` holds metric
    m (``train_mse``, ``val_mse``, ``test_mse`` and the accuracies) per run; ``mean`` and ``std`` (ddof = 1) over
    runs. ``search`` is the :class:`SearchResult` that chose ``config`` (None if the configuration was given)."""

    config: dict
    runs: list = field(repr=False)
    search: SearchResult | None = field(repr=False)

    @property
    def values(self) -> dict:
        return {m: np.array([getattr(r, m) for r in self.runs]) for m in METRICS}

    @property
    def mean(self) -> dict:
        return {m: float(np.mean(v)) for m, v in self.values.items()}

    @property
    def std(self) -> dict:
        return {m: float(np.std(v, ddof=1)) if len(v) > 1 else 0.0 for m, v in self.values.items()}


def adam_baseline(X, Y, N1: int, *, X_test=None, Y_test=None, config: dict | None = None, n_init: int = 20,
                  n_trials: int = 30, backend: str = "optuna", space: SearchSpace | None = None, seed: int = 0,
                  activation="relu", max_epochs: int = 500, patience: int = 20, val_fraction: float = 0.2,
                  report_every: int = 10, keep_params: bool = False) -> AdamBaseline:
    """The paper's Adam baseline at width N1: :func:`search_adam` (skipped when ``config`` gives learning_rate,
    l2 and batch_size), then ``n_init`` early-stopped trainings of the best configuration from independent
    initializations (on the search's split), with their mean and standard deviation.

    The runs' parameters are dropped unless ``keep_params`` (at N1 = 1000, N0 = 784 a run holds 3 MB).

    Parameters
    ----------
    X : array_like, shape (P, N0)
        Training inputs.
    Y : array_like, shape (P, D)
        Training labels.
    N1 : int
        Hidden units.
    X_test : array_like, shape (P0, N0), optional
        Test inputs, for the reported test scores.
    Y_test : array_like, shape (P0, D), optional
        Test labels.
    config : dict, optional
        ``learning_rate``, ``l2`` and ``batch_size``: then no search is made.
    n_init : int, default 20
        Trainings of the best configuration from independent initializations.
    n_trials : int, default 30
        Trials of the search.
    backend : {"optuna", "ray"}
        Where the trials run (above).
    space : SearchSpace, optional
        The ranges searched (default: :class:`~renormpp.baselines.SearchSpace`'s).
    seed : int, default 0
        The seed of the search, the split and the trainings.
    activation : str or callable, default "relu"
        The network's activation.
    max_epochs : int, default 500
        The most epochs of a training.
    patience : int, default 20
        Epochs without a better validation MSE before a training stops.
    val_fraction : float, default 0.2
        The fraction of the rows held out for validation.
    report_every : int, default 10
        Epochs between a trial's reports to the pruner.
    keep_params : bool, default False
        Keep every run's parameters.

    Returns
    -------
    AdamBaseline
        The configuration, the runs from independent initializations, and the search (where one was made).
    """
    X, Y, X_test, Y_test = check_data(X, Y, X_test, Y_test)
    check_positive_ints(n_init=n_init)
    search = None
    if config is None:
        search = search_adam(X, Y, N1, n_trials=n_trials, backend=backend, space=space, seed=seed,
                             activation=activation, max_epochs=max_epochs, patience=patience,
                             val_fraction=val_fraction, report_every=report_every)
        config = search.best_config
    missing = {"learning_rate", "l2", "batch_size"} - set(config)
    if missing:
        raise ValueError(f"config needs learning_rate, l2 and batch_size; {', '.join(sorted(missing))} missing")
    config = {k: config[k] for k in ("learning_rate", "l2", "batch_size")}
    data = split(X, Y, val_fraction, seed)
    runs = []
    for s in np.random.default_rng(seed).integers(2**31, size=n_init):
        run = Training(data, N1, activation=activation, max_epochs=max_epochs, patience=patience, seed=int(s),
                       **config).run().result(X_test, Y_test)
        runs.append(run if keep_params else replace(run, params=None))
    return AdamBaseline(config=config, runs=runs, search=search)
