r"""The shared-field theory: one Gaussian field shared by all neurons, each neuron's law exact.

Where kernel-shape renormalization fails (MNIST at α ≥ 1, docs/validity.md) the finite network's hidden kernel adapts
in directions the D x D order parameter cannot reach. This theory keeps each neuron's law exact and makes only the
field that couples the neurons Gaussian.

**The field.** With the readout integrated out, :math:`p(Y\mid W) = \int d\bar f\, \exp\big(i\,{\rm tr}\,\bar f^\top Y
- \tfrac T2\|\bar f\|^2\big) \prod_i \exp\big(-\|\bar f^\top s_i\|^2/(2c)\big)` with :math:`c = \lambda_1 N_1`,
:math:`s_i = \sigma(X w_i/\sqrt{N_0})` (P) and :math:`\bar f` (P x D) the field conjugate to the predictions, one
field for all neurons. Take it Gaussian, :math:`\bar f = i\,m + g` with g of covariance :math:`\Sigma`
(:math:`PD\times PD`, output-major). Given w, :math:`g^\top s(w)` is Gaussian with covariance
:math:`q(w)_{ab} = s^\top\Sigma_{ab}\,s` (D x D: the neuron's own bulk) and :math:`z(w) = m^\top s(w)` is its spike,
so one neuron's law is the cavity law (S3) of :mod:`renormpp.theory.single_neuron` with these:

.. math::
    p(w) \propto \mathcal N(w; 0, 1/\lambda_0)\,\det(1 + q/c)^{-1/2}\exp\big(\tfrac12 z^\top (c + q)^{-1} z\big). \tag{F1}

**Stationarity** of the field, with :math:`y = (c+q)^{-1}z` and :math:`E` the average over (F1):

.. math::
    \Sigma^{-1} = T + N_1 E\big[\big((c+q)^{-1} + y y^\top\big)\otimes s s^\top\big],\qquad
    T\,m + N_1 E[s\,y^\top] = Y.                                                                      \tag{F2}

**Predictions** at a test input :math:`x_*` (:math:`s_* = s(w; x_*)`): the mean :math:`\Gamma_a = N_1 E[s_*\,y_a]`
and, from :math:`-\partial_j^2\log Z` with a source j at :math:`x_*` (the response of m to it included),

.. math::
    \Sigma_{*ab} = N_1 E[(c+q)^{-1}_{ab}s_*^2] + N_1 E[s_*^2 y_a y_b] - N_1 E[s_* y_a]E[s_* y_b]
        - N_1^2\, n_a^\top (T + N_1 L)^{-1} n_b,                                                        \tag{F3}

:math:`L = E[((c+q)^{-1} + yy^\top)\otimes ss^\top] - E[y\otimes s]E[y\otimes s]^\top`,
:math:`(n_a)_b = E[((c+q)^{-1}_{ab} + y_a y_b)\,s_*\,s] - E[s_* y_a]E[y_b\,s]`.
For a linear activation (Gaussian s, q at its mean) (F1)-(F3) reproduce the exact theory, which is exact for linear
networks (checked in closed form by ``studies/shared_field_theory.py``: 0.05-1% at MNIST P = 200).

**How it is computed.** The averages over (F1) are taken over M neurons, with the exact NNGP kernel as control
variate (:math:`E[\rho\,W\,ss^\top] \approx \overline{\rho W ss^\top} - \overline{\rho W}\,(\overline{\rho_0 ss^\top}
- K)`, :math:`\rho_0` = prior over proposal), so that at infinite width the theory is the NNGP posterior exactly,
for any M. The neurons start from a Gaussian **proposal**: the prior, except in a few directions of weight space
(:func:`proposal_basis`) where its mean and covariance are fitted to the neurons weighted by (F1)'s tilt, tempered
until the weights are good (:func:`pareto_k` below 0.7: above it their averages do not hold, whatever the effective
sample size says). The prior alone is no proposal where the tilt is strong: a Gaussian tilt :math:`e^{r x^2/2}` of a
unit Gaussian gives weights of infinite variance from r = 1/2 on.

* ``proposal="mcmc"`` (the default): where no Gaussian proposal reaches (F1) (MNIST at α ≥ 2.5), the proposal's
  neurons are moved to (F1) itself by Metropolis-adjusted Langevin steps, and (F2) is solved by stochastic
  approximation: the population persists, moved ``steps`` more steps at each iteration's field, and the moments of
  (F2) are averaged over the iterations before the field is computed from them (the inverse of a noisy average is
  biased: one population of 10 000 neurons puts ε_g 3% low on the linear teacher at α = 2).
* ``fresh=True``: each iteration draws a new population at the field, so that the averaged moments are averages over
  independent populations; ``tempered=True`` takes each of them to (F1) by adaptive tempered sequential Monte Carlo.
  On MNIST (0, 1) at P = 200 neither reaches all of (F1)'s specialists (docs/log/validity.md, "Fresh populations" and
  "Tempered populations").
* ``proposal="fitted"``: the field iterated on fixed, reweighted neurons with Anderson mixing, in rounds that fit the
  proposal again at the new field. Within 1% of the sampled network on MNIST (0, 1), P = 200, at α = 0.5 and 1 (the
  exact theory 3% and 8% off); no convergence from α = 2.5 on (docs/log/validity.md, "A third theory").

**The cavity field** (``solve(..., cavity=True)``, averaged expectation propagation). (F1) takes each neuron in the
field of all N1, its own share included. Averaged EP takes it in the cavity of the other N1 - 1: one Gaussian site
per neuron, fitted by matching the field's moments over one neuron's law (C1), the cavity the prior and N1 - 1 sites,
the mean's equation solved as a linear one (C2) (:func:`.equations._update`); it starts from the shared field's fixed
point (C3) (:func:`.solver._cavity_start`), and its predictions count each neuron's response through the other
N1 - 1 (C4) (:meth:`SharedFieldFit._combined`). Exact at N1 = 1 (tests/test_cavity.py, against quadrature), (F2) at
infinite width. Between, where the network's neurons specialize, it holds the readout overlaps no better than (F2)
(docs/log/validity.md, "The cavity field in the package").

:meth:`SharedFieldFit.verify` tests a solve's field against new, independent populations moved to (F1) at it, with
the jackknife error over them: the solve's own residuals are measured against its own iterations' moments and can be
small where the field is no fixed point of (F1)'s law (docs/log/validity.md, "Is the averaged field a fixed point?").

Cost: :math:`O(M P^2 D^2)` per iteration and :math:`O((PD)^3)` for the inverse of (F2): about 15 minutes a width at
P = 200 on 2 cores with the default 40 000 neurons moved to (F1); 15.5 s an iteration at P = 1000 with 10 000
(``benchmarks/shared_field_speed.py``).

The modules, one idea each:

* :mod:`.solver`: :func:`solve` and :func:`continued` (a series of widths, each from the last converged), the
  fixed-point iteration on reweighted neurons with Anderson mixing.
* :mod:`.fit`: :class:`SharedFieldFit`, its predictions (F3) and readout overlaps; :class:`Verification`, a field
  tested on new populations.
* :mod:`.equations`: (F1)'s bulk, spike and tilt per neuron; the moments of (F2) and the field they give; the
  neurons' importance weights and :func:`pareto_k`.
* :mod:`.proposals`: the Gaussian :class:`Proposal` and its fit to (F1).
* :mod:`.moves`: neurons taken to (F1): the :class:`Tilt`, the core's Metropolis-adjusted Langevin steps, tempered
  sequential Monte Carlo, and the :class:`Population` they give.
* :mod:`.averaged`: the stochastic approximation of (F2), its Monte Carlo error and the solve's checkpoint.

The package exports the public names; the helpers stay in their modules (``shared_field.moves._moved``).
"""
from . import averaged, equations, fit, moves, proposals, solver
from .equations import pareto_k
from .fit import SharedFieldFit, Verification
from .moves import Population, Tilt
from .proposals import Proposal, proposal_basis
from .solver import PROPOSALS, continued, solve

__all__ = ["PROPOSALS", "Population", "Proposal", "SharedFieldFit", "Tilt", "Verification", "continued", "pareto_k",
           "proposal_basis", "solve"]
