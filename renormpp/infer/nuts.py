r"""NumPyro's NUTS as a sampler of :mod:`renormpp.mcmc.sampling`'s signature, for a theory that samples
(``sampler=rp.infer.nuts_sampler()``): the cross-check of the core's default, on a potential U of any shape."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..mcmc.sampling import Samples


def nuts_sampler(*, max_tree_depth: int = 7, target_accept_prob: float = 0.8) -> Callable:
    """``sampler(rng_key, potential_fn, init, num_warmup, num_samples, thinning=1) -> Samples``: NumPyro's NUTS
    with ``max_tree_depth`` and ``target_accept_prob``, the chains vectorized and started at ``init`` (chains, ...)."""
    def sample(rng_key, potential_fn: Callable, init, num_warmup: int, num_samples: int, thinning: int = 1):
        from numpyro.infer import MCMC, NUTS

        init = np.asarray(init)
        kernel = NUTS(potential_fn=potential_fn, max_tree_depth=max_tree_depth, target_accept_prob=target_accept_prob)
        mcmc = MCMC(kernel, num_warmup=int(num_warmup), num_samples=int(num_samples), num_chains=len(init),
                    chain_method="vectorized", thinning=int(thinning), progress_bar=False)
        mcmc.run(rng_key, init_params=init, extra_fields=("accept_prob", "diverging"))
        draws = np.asarray(mcmc.get_samples(group_by_chain=True))
        extra = mcmc.get_extra_fields(group_by_chain=True)
        return Samples(draws, draws[:, -1], np.asarray(extra["accept_prob"]).mean(axis=1),
                       np.asarray(extra["diverging"]).sum(axis=1))

    return sample
