r"""Proportional-limit theory of networks with D outputs, one hidden layer or L (kernel shape renormalization).

The partition function concentrates, for :math:`N_1, P \to \infty` at fixed :math:`\alpha = P/N_1`,
on the minimum :math:`Q^*` of the effective action (paper, Eq. (1); odd activations)

.. math::
    S(Q) = \operatorname{Tr} Q - \log\det Q + \frac{1}{N_1}\Big[ y^\top (T\,\mathbb 1 + Q\otimes K/\lambda_1)^{-1} y
           + \operatorname{Tr}\log(\mathbb 1 + Q\otimes K/(\lambda_1 T)) \Big],

with :math:`K` the NNGP kernel on the training inputs (:mod:`renormpp.kernels`). The :math:`PD \times PD` matrix is
never formed: with :math:`K = V\,\mathrm{diag}(k)\,V^\top` and :math:`\tilde y_\mu = Y^\top V_{:\mu}` the system is block
diagonal, :math:`M_\mu(Q) = (T\,\mathbb 1_D + k_\mu Q/\lambda_1)^{-1}`, and one evaluation of :math:`S` and of

.. math::
    \frac{\partial S}{\partial Q} = \mathbb 1 - Q^{-1} + \frac{1}{N_1}\sum_\mu \frac{k_\mu}{\lambda_1}
    \big[M_\mu - M_\mu \tilde y_\mu \tilde y_\mu^\top M_\mu\big]        \qquad\text{(supplement, eq:supp:full_deriv)}

costs :math:`O(D^3 + P D^2)` after one :math:`O(P^3)` eigendecomposition (:mod:`.action`).

Predictions at the saddle point (supplement, eq:SM_bias and eq:SM_var), with :math:`\kappa_\mu = V_{:\mu}\cdot K(X, x_0)`:

.. math::
    \Gamma(x_0) = \frac{1}{\lambda_1} Q \sum_\mu \kappa_\mu M_\mu \tilde y_\mu, \qquad
    \Sigma(x_0) = \frac{K(x_0,x_0)}{\lambda_1} Q - \frac{1}{\lambda_1^2}\sum_\mu \kappa_\mu^2\, Q M_\mu Q,

the generalization loss :math:`\epsilon_g = \|y_0 - \Gamma\|^2 + \operatorname{Tr}\Sigma` (paper Eq. (3)) and the
readout overlaps :math:`\langle v v^\top\rangle/N_1 = Q^*/\lambda_1` (paper Eq. (4)).

**Deep networks** (L hidden layers of width :math:`N_1`, odd activations; the central Equivalent Wishart Ansatz of
Baglioni, Keup, …, Rotondo, arXiv:2605.29684, which is the paper's action at L = 1): the renormalized kernel is
:math:`Q\otimes K^{(L)}`, with :math:`K^{(L)}` the NNGP kernel composed L times (:func:`renormpp.kernels.nngp`,
``depth=L``), :math:`\lambda_1` the readout's prior precision, and

.. math::
    S_L(Q) = L\,\operatorname{Tr} Q^{1/L} - \log\det Q + \frac{1}{N_1}\Big[ y^\top (T\,\mathbb 1 + Q\otimes K^{(L)}/\lambda_1)^{-1} y
           + \operatorname{Tr}\log(\mathbb 1 + Q\otimes K^{(L)}/(\lambda_1 T)) \Big],                        \tag{D1}

so only the prior term changes: its gradient is :math:`Q^{1/L-1} - Q^{-1}` and its Hessian at Q = 1 is 1/L, hence
the one-loop order parameter :math:`Q = 1 - L\,\partial_Q S_{\rm data}|_{Q=1} = 1 + L\alpha Q^{(1)}`       (D2).
The predictions are those above with :math:`K^{(L)}` in place of K, at the same cost (one eigendecomposition). The
ansatz gives every layer the same share :math:`Q_\ell = Q^{1/L}` of :math:`Q = \prod_\ell Q_\ell`
(:math:`L\operatorname{Tr}Q^{1/L} - \log\det Q = \sum_\ell[\operatorname{Tr}Q_\ell - \log\det Q_\ell]`), and so
predicts the readout overlaps :math:`\langle v v^\top\rangle/N_1 = (Q^*)^{1/L}/\lambda_1`               (D3);
(D3) is this package's reading of the ansatz, checked against sampling in ``studies/deep.py``.

Beyond leading order and beyond odd activations: :mod:`.corrected` (the leading 1/N1 correction of the predictions,
``method="corrected"``), :mod:`.nonodd` (activations with a mean feature, ReLU: two order parameters), both as a
block-diagonal system plus a low-rank term (:mod:`.lowrank`).

**Convolutional networks** (one hidden layer of C channels of shared m x m filters on non-overlapping patches, D
outputs; Aiudi et al., Nat. Commun. 16 (2025)): ``solve(..., conv=dict(image_shape=(s, s), patch=m))``. The order
parameter couples (output, patch) pairs, a :math:`D n_p \times D n_p` matrix, and renormalizes the patch kernels
:math:`K_{ij}` locally, :math:`A = T + \sum_{ij} Q_{(ai),(bj)} K_{ij}/(\lambda_1 n_p)`; n_p = 1 is the theory above.
The derivation, equations (C1)-(C10), and the fit, :class:`~.conv.ConvFit`, are in :mod:`.conv`.

Every theory is a record of one table, :data:`THEORIES` (:mod:`.registry`): where it applies, what it costs
(from the kernel's spectrum, from the data, or sampled), how it solves and how figures name it; :func:`solve`
(``method=name``) and ``spec.theory(name)`` reach each one, and every fit keeps one protocol (:data:`PROTOCOL`:
``method``, ``converged``, ``reason``, ``Q``, ``readout_overlap``, ``predict`` -> :class:`Prediction`,
``generalization_error``, and a sampled theory's own ``monte_carlo_error``), so ``spec.compare`` and
:func:`renormpp.diagnostics.compare` take fits of any theory. The kernel-renormalization methods are, besides, the
table :data:`METHODS` (:mod:`.methods`): a :class:`Method` record per method says how it finds Q, when its result
holds and its predictions; :func:`fit_or_reason` gives a method at a fit, or why it does not apply there.

The hidden layer's kernel (:mod:`.hidden`): the posterior's hidden kernel that the theory predicts,
:math:`K_{\rm post} = K - KGK` (Eq. (H1)), and the theory with a given kernel in place of K (the oracle test).
The theories beyond kernel renormalization, records of :data:`THEORIES`:
:mod:`.adaptive_kernel` (``method="adaptive_kernel"``): a kernel that adapts beyond the D x D rescaling (a saturating
single-neuron tilt on Gaussian first-layer weights, moment-matched); it does not converge at large alpha
(studies/adaptive.py).
:mod:`.shared_field` (``method="shared_field"``): one Gaussian field shared by all neurons, each neuron's law exact,
averaged by reweighting prior neurons; the sampled network within its error bar on MNIST at alpha <= 1, breaks down
at alpha >= 2.5 there (docs/validity.md). It needs the data, not only the kernel's spectrum: seconds to minutes.
:mod:`.specialists` (``method="specialists"``, option ``k``): k neurons kept exact in the field of a renormalized
bulk of N1 - k, equations (SP1)-(SP4); within 7% of the sampled network on MNIST (0, 1) at alpha = 4 and 10 (P = 200
and 1000), where the exact theory is 47-69% off; the exact theory where no neuron specializes (docs/validity.md,
"Specialists"). It samples its specialists: minutes.
:mod:`.field_specialists` (``method="field_specialists"``, option ``k``): k neurons kept exact in the field of a bulk
that follows the shared field, equations (FS1)-(FS4); k = 0 is the shared field, k = N1 the exact posterior.
:mod:`.evidence`: such a fit's evidence log Z_k, Eqs. (E1)-(E2), by tempered SMC with its error
(``evidence.log_evidence(fit)``); exact at k = N1 and at infinite width, tens of nats high where neurons specialize.
:mod:`.replicates`: any theory that samples, solved with R seeds as one fit (``replicates=R``), its own error measured
from their spread (Eq. (R1)), the noise of its fixed point included.
"""
from . import (action, adaptive_kernel, conv, corrected, evidence, field_specialists, hidden, lowrank, measured,
               methods, nonodd, registry, shared_field, specialists)
from .action import ConvergenceWarning, Spectrum, moments
from .conv import ConvFit
from .fit import Prediction, TheoryFit
from .recorded import RecordedFit
from .registry import COSTS, PROTOCOL, THEORIES, Problem, Theory, get_theory, noun_of, solve
from .methods import (BASELINE, METHODS, REFERENCE, Method, applies, fit_or_reason, get_method, refit_or_none,
                      why_not)

__all__ = ["BASELINE", "COSTS", "ConvFit", "ConvergenceWarning", "METHODS", "Method", "PROTOCOL", "Prediction",
           "Problem", "REFERENCE", "RecordedFit", "Spectrum", "THEORIES", "Theory", "TheoryFit", "action", "adaptive_kernel", "applies",
           "conv", "corrected", "evidence", "field_specialists", "fit_or_reason", "get_method", "get_theory", "hidden", "lowrank", "measured", "methods", "moments",
           "nonodd", "noun_of", "refit_or_none", "shared_field", "solve", "specialists", "why_not"]
