r"""One-hidden-layer networks trained with Adam: the practitioners' baseline of the paper's Figs. 3 and 4.

The network is the Bayesian model's, :math:`f(x) = v\,\sigma(w x/\sqrt{N_0})/\sqrt{N_1}` without biases
(:func:`renormpp.network.forward`), initialized from its prior at :math:`\lambda_0 = \lambda_1 = 1` (standard
normal w and v). It is trained with Adam (optax) on minibatches of the MSE with an :math:`L_2` penalty,

.. math::
    \mathcal L_{\rm train}(\theta) = \frac1B\sum_{\mu\in\rm batch}\|y^\mu - f(x^\mu)\|^2
    + \frac{l_2}{2}\big(\|w\|^2 + \|v\|^2\big),

the penalty being added to the gradient (``optax.add_decayed_weights`` before ``optax.adam``: coupled
:math:`L_2`, PyTorch's ``Adam(weight_decay=l2)``, not AdamW), with early stopping on a validation split of
about 20% of the training data (supplement, "Numerical experiments with Adam optimizer"). With full
batches, the minimum of this objective is the MAP of the Gibbs posterior at temperature T with
:math:`\lambda_0 = \lambda_1 = \lambda` when :math:`l_2 = 2T\lambda/P`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .._checks import positive
from ..datasets._common import check_positive_ints
from ..network import forward, get_activation
from ._common import Split, check_data, scores, split


def _optimizer(learning_rate, l2):
    return optax.chain(optax.add_decayed_weights(l2), optax.adam(learning_rate))


def _mse(params, X, Y, activation):
    return scores(Y, forward(params, X, activation))[0]


@partial(jax.jit, static_argnames=("activation", "batch_size"))
def _epoch(params, opt_state, key, X, Y, X_val, Y_val, learning_rate, l2, *, activation, batch_size):
    """One pass over the data in random minibatches (``lax.scan``), then the MSE on the fitted and the
    validation part. The last ``P mod batch_size`` examples of each shuffle sit the epoch out."""
    opt = _optimizer(learning_rate, l2)
    n = X.shape[0] // batch_size
    batches = jax.random.permutation(key, X.shape[0])[: n * batch_size].reshape(n, batch_size)

    def step(carry, idx):
        params, opt_state = carry
        grads = jax.grad(_mse)(params, X[idx], Y[idx], activation)
        updates, opt_state = opt.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), None

    (params, opt_state), _ = jax.lax.scan(step, (params, opt_state), batches)
    return params, opt_state, _mse(params, X, Y, activation), _mse(params, X_val, Y_val, activation)


_scores = jax.jit(lambda params, X, Y, activation: scores(Y, forward(params, X, activation)), static_argnums=3)


class Training:
    """One Adam run on a :class:`~renormpp.baselines.Split`, advanced a few epochs at a time, so that a
    hyperparameter search can look at it (and prune it) between chunks. It keeps the parameters of the
    epoch with the lowest validation MSE (index 0 of the curves is the initialization)."""

    def __init__(self, data: Split, N1: int, *, activation="relu", learning_rate=1e-3, l2=0.0, batch_size=64,
                 max_epochs=500, patience=20, seed=0):
        check_positive_ints(N1=N1, batch_size=batch_size, max_epochs=max_epochs, patience=patience)
        positive("learning_rate", learning_rate)
        if not (isinstance(l2, (int, float, np.number)) and np.isfinite(l2) and l2 >= 0):
            raise ValueError(f"l2 must be a non-negative finite number; got {l2!r}")
        get_activation(activation)  # unknown names raise here
        self.data = tuple(jnp.asarray(a, jnp.float32) for a in (data.X, data.Y, data.X_val, data.Y_val))
        self.config = dict(N1=int(N1), activation=activation, learning_rate=float(learning_rate), l2=float(l2),
                           batch_size=min(int(batch_size), data.X.shape[0]), seed=seed)
        self.max_epochs, self.patience = int(max_epochs), int(patience)
        key_w, key_v, self.key = jax.random.split(jax.random.PRNGKey(seed), 3)
        (N0, D), N1 = (data.X.shape[1], data.Y.shape[1]), int(N1)
        self.params = {"w": jax.random.normal(key_w, (N1, N0)), "v": jax.random.normal(key_v, (D, N1))}
        self.opt_state = _optimizer(learning_rate, l2).init(self.params)
        self.curves = ([float(_mse(self.params, *self.data[:2], activation))],
                       [float(_mse(self.params, *self.data[2:], activation))])
        self.best_epoch, self.best_params = 0, self.params

    @property
    def epoch(self) -> int:
        return len(self.curves[1]) - 1

    @property
    def best_val(self) -> float:
        return self.curves[1][self.best_epoch]

    @property
    def done(self) -> bool:
        return self.epoch >= self.max_epochs or self.epoch - self.best_epoch >= self.patience

    def run(self, epochs: int | None = None) -> "Training":
        """Train ``epochs`` more epochs (all that are left if None), or until early stopping."""
        c = self.config
        hyper = (jnp.float32(c["learning_rate"]), jnp.float32(c["l2"]))
        for _ in range(self.max_epochs if epochs is None else epochs):
            if self.done:
                break
            self.key, key = jax.random.split(self.key)
            self.params, self.opt_state, tr, val = _epoch(self.params, self.opt_state, key, *self.data, *hyper,
                                                          activation=c["activation"], batch_size=c["batch_size"])
            self.curves[0].append(float(tr))
            self.curves[1].append(float(val))
            if self.curves[1][-1] < self.best_val:  # NaN (a diverged run) never improves
                self.best_epoch, self.best_params = self.epoch, self.params
        return self

    def result(self, X_test=None, Y_test=None) -> "AdamResult":
        act = self.config["activation"]
        X, Y, X_val, Y_val = self.data
        sets = dict(train=(X, Y), val=(X_val, Y_val))
        if X_test is not None:
            sets["test"] = (jnp.asarray(X_test, jnp.float32), jnp.asarray(Y_test, jnp.float32))
        metrics = {}
        for name, (A, B) in sets.items():
            mse, acc = _scores(self.best_params, A, B, act)
            metrics.update({f"{name}_mse": float(mse), f"{name}_accuracy": float(acc)})
        return AdamResult(config=dict(self.config), params=jax.tree.map(np.asarray, self.best_params),
                          train_curve=np.array(self.curves[0]), val_curve=np.array(self.curves[1]),
                          best_epoch=self.best_epoch, epochs=self.epoch, max_epochs=self.max_epochs, **metrics)


@dataclass(frozen=True)
class AdamResult:
    """An early-stopped Adam run. MSEs and accuracies as in :func:`~renormpp.baselines.scores`, evaluated at
    ``params``, the parameters of epoch ``best_epoch`` (lowest validation MSE); ``test_*`` are NaN without a
    test set. ``train_curve`` and ``val_curve`` (epochs + 1,) are the MSE on the fitted and the validation
    part after each epoch, index 0 at initialization."""

    config: dict
    params: dict = field(repr=False)
    train_curve: np.ndarray = field(repr=False)
    val_curve: np.ndarray = field(repr=False)
    best_epoch: int
    epochs: int
    max_epochs: int
    train_mse: float
    train_accuracy: float
    val_mse: float
    val_accuracy: float
    test_mse: float = np.nan
    test_accuracy: float = np.nan

    @property
    def early_stopped(self) -> bool:
        """True if training stopped before ``max_epochs`` because the validation MSE stopped improving."""
        return self.epochs < self.max_epochs

    def predict(self, X) -> np.ndarray:
        """Network outputs f(X), shape (P0, D), at the returned (best) parameters."""
        return np.asarray(forward(self.params, jnp.asarray(X, jnp.float32), self.config["activation"]))


def train_adam(X, Y, N1: int, *, activation="relu", learning_rate: float = 1e-3, l2: float = 0.0,
               batch_size: int = 64, max_epochs: int = 500, patience: int = 20, val_fraction: float = 0.2,
               split_seed: int = 0, X_test=None, Y_test=None, seed: int = 0) -> AdamResult:
    """Train the one-hidden-layer network with N1 hidden units by Adam, with early stopping.

    ``val_fraction`` of the rows of (X, Y) (drawn by ``split_seed``) are held out for validation; the rest
    is fitted in minibatches of ``batch_size`` (at most the fitted part), reshuffled each epoch. Training
    stops after ``max_epochs`` epochs, or ``patience`` epochs after the best validation MSE so far, and
    returns the parameters of the best epoch. ``seed`` draws the initialization and the minibatches.
    ``l2``: the strength of the L2 penalty (module docstring). Adam runs in float32.

    Parameters
    ----------
    X : array_like, shape (P, N0)
        Training inputs.
    Y : array_like, shape (P, D)
        Training labels.
    N1 : int
        Hidden units.
    activation : str or callable, default "relu"
        The network's activation.
    learning_rate : float, default 1e-3
        Adam's learning rate.
    l2 : float, default 0.0
        The strength of the L2 penalty.
    batch_size : int, default 64
        Minibatch size (at most the fitted part).
    max_epochs : int, default 500
        The most epochs of a training.
    patience : int, default 20
        Epochs without a better validation MSE before a training stops.
    val_fraction : float, default 0.2
        The fraction of the rows held out for validation.
    split_seed : int, default 0
        The seed of the validation split (:func:`~renormpp.baselines.split`).
    X_test : array_like, shape (P0, N0), optional
        Test inputs, for the reported test scores.
    Y_test : array_like, shape (P0, D), optional
        Test labels.
    seed : int, default 0
        The seed of the initialization and the minibatches.

    Returns
    -------
    AdamResult
        The best epoch's parameters and scores, and the training curve.
    """
    X, Y, X_test, Y_test = check_data(X, Y, X_test, Y_test)
    training = Training(split(X, Y, val_fraction, split_seed), N1, activation=activation, learning_rate=learning_rate,
                        l2=l2, batch_size=batch_size, max_epochs=max_epochs, patience=patience, seed=seed)
    return training.run().result(X_test, Y_test)
