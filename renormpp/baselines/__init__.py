"""Baselines to place the Bayesian network among (paper, "Bayesian training of FC networks is comparable to SOTA
optimization", Figs. 3 and 4; supplement, "Numerical experiments with Adam optimizer").

* :func:`train_adam`: the one-hidden-layer network trained with Adam (optax) and early stopping;
* :func:`search_adam`: learning rate, L2 strength and batch size searched for the lowest validation MSE, with
  Optuna (default) or Ray Tune, over one :class:`SearchSpace`; :func:`adam_baseline`: the search, then the best
  configuration retrained from independent initializations (mean and std);
* :func:`best_gp`: the best infinite-width GP from a grid over T, lambda0, lambda1;
* :func:`split`, :func:`scores`: the validation split and the MSE / accuracy that both use.
"""
from ._common import Split, scores, split
from .adam import AdamResult, train_adam
from .gp import GPResult, best_gp
from .search import AdamBaseline, SearchResult, SearchSpace, adam_baseline, search_adam

__all__ = ["Split", "scores", "split", "AdamResult", "train_adam", "SearchSpace", "SearchResult", "search_adam",
           "AdamBaseline", "adam_baseline", "GPResult", "best_gp"]
