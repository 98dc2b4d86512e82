r"""The proportional-limit theory of a one-hidden-layer convolutional network with D outputs: local kernel
renormalization (Aiudi, Pacelli, Baglioni, Vezzani, Burioni, Rotondo, Nat. Commun. 16 (2025), arXiv:2307.11807; their
code, rpacelli/deepbays ``CONV_1HL``, has one output). Entry point: :func:`renormpp.theory.solve` with ``conv=``.

**The network** (``CONV_1HL``'s conventions). Square single-channel images of side s, cut into
non-overlapping :math:`m\times m` patches :math:`x_i`, :math:`n_p = (s/m)^2` (:mod:`renormpp.patches`); :math:`C = N_1`
channels, each a filter :math:`w_c \sim \mathcal N(0, 1/\lambda_0)` of :math:`m^2` weights shared by all patches;
:math:`h_{ci} = w_c\cdot x_i/m`; :math:`f_a(x) = \sum_{c,i} v_{aci}\,\sigma(h_{ci})/\sqrt{C n_p}`,
:math:`v \sim \mathcal N(0, 1/\lambda_1)`; posterior :math:`\propto` prior
:math:`\cdot\, e^{-\|Y - f\|^2/(2T)}`. Under the prior of one filter the pre-activations of all patches of all
images are jointly Gaussian, and

.. math::
    C_{ij}(\mu,\nu) = \frac{x_i^\mu\cdot x_j^\nu}{m^2\lambda_0}, \qquad
    K_{ij}(\mu,\nu) = \mathbb E[\sigma(h_i^\mu)\sigma(h_j^\nu)] = \kappa\big(C_{ii}(\mu,\mu), C_{jj}(\nu,\nu),
    C_{ij}(\mu,\nu)\big) = K_{ji}(\nu,\mu)                                                                   \tag{C1}

with :math:`\kappa` the activation's NNGP map (:mod:`renormpp.network`).

**Derivation** (the fully connected one of the supplement, with an index (a, i) where it had a). Write the likelihood
with auxiliary fields, :math:`e^{-\|y-f\|^2/2T} \propto \int d\bar s\, e^{-T\|\bar s\|^2/2 + i\sum_{a\mu}\bar s_{a\mu}
(y_{a\mu} - f_a(x^\mu))}`. The readout weights are Gaussian and independent per (a, c, i); integrating them leaves

.. math::
    \prod_c \exp\Big(-\frac{1}{2\lambda_1 C n_p}\sum_{ai} q_{c,ai}^2\Big), \qquad
    q_{c,ai} = \sum_\mu \bar s_{a\mu}\,\sigma(h^\mu_{ci}).                                                    \tag{C2}

The channels are i.i.d. under the prior of w. In the proportional limit (C, P → ∞ at fixed α = P/C) the
:math:`D n_p` numbers :math:`q_{c,\cdot}` of one channel are Gaussian (the fully connected theory's Gaussian
equivalence), with covariance :math:`M_{(ai),(bj)} = \bar s_a^\top K_{ij}\bar s_b`: cross terms in outputs and in
patches appear through the shared filter although the readout has none. Hence
:math:`\mathbb E_w \exp(-|q_c|^2/2\lambda_1 C n_p) = \det(\mathbb 1 + M/(\lambda_1 C n_p))^{-1/2}`. Fixing
:math:`R = M/C` with a conjugate field, which sits at :math:`Q/(\lambda_1 n_p)` at the saddle point, makes the
:math:`\bar s` integral Gaussian with the :math:`PD\times PD` precision (y stacked by output, index (a, μ) → aP + μ)

.. math::
    A_{(a\mu),(b\nu)} = T\,\delta_{ab}\delta_{\mu\nu} + \frac{1}{\lambda_1 n_p}\sum_{ij} Q_{(ai),(bj)} K_{ij}(\mu,\nu),
                                                                                                          \tag{C3}

and the R integral's saddle point gives :math:`Q = (\mathbb 1 + R/(\lambda_1 n_p))^{-1}`. Altogether
:math:`Z \simeq \int dQ\, e^{-C\,S(Q)/2}` with Q symmetric positive definite of size :math:`D n_p` (index (a, i) →
a n_p + i) and the action

.. math::
    S(Q) = \operatorname{tr} Q - \log\det Q + \frac{1}{C}\Big[y^\top A^{-1} y + \log\det(A/T)\Big].            \tag{C4}

:math:`\log\det(A/T)` is the fully connected action's :math:`\operatorname{Tr}\log(\mathbb 1 + Q\otimes K/(\lambda_1T))`
(:mod:`renormpp.theory`); deepbays writes :math:`\log\det A`, a constant :math:`PD\log T/C` away (same Q*, the value of
S shifted). With :math:`r = A^{-1}y` and :math:`B = A^{-1} - r r^\top`, the gradient and the Hessian along a symmetric E
(:math:`\delta A = \sum_{ij} E_{(ai),(bj)}K_{ij}/(\lambda_1 n_p)`, :math:`u = A^{-1}\delta A\, r`) are

.. math::
    \frac{\partial S}{\partial Q_{(ai),(bj)}} = \delta - (Q^{-1})_{(ai),(bj)}
        + \frac{1}{C\lambda_1 n_p}\sum_{\mu\nu} K_{ij}(\mu,\nu)\, B_{(a\mu),(b\nu)},                            \tag{C5}

.. math::
    H[E] = Q^{-1}EQ^{-1} + \frac{1}{C\lambda_1 n_p}\sum_{\mu\nu}K_{ij}(\mu,\nu)\,\delta B_{(a\mu),(b\nu)},\quad
    \delta B = -A^{-1}\delta A A^{-1} + u r^\top + r u^\top.                                                  \tag{C6}

Special cases. :math:`n_p = 1` (patch = side): :math:`h = w\cdot x/\sqrt{N_0}`, :math:`K_{11}` is the NNGP kernel and
:math:`A = T + Q\otimes K/\lambda_1`: exactly the fully connected theory with :math:`N_1 = C`. :math:`Q = \mathbb 1`:
:math:`A = T + \mathbb 1_D\otimes K_{\rm CNN}/\lambda_1`, :math:`K_{\rm CNN} = \frac{1}{n_p}\sum_i K_{ii}`, the
infinite-width CNN (only equal patches: the readout weights of different patches are independent). One loop: the
prior's Hessian at Q = 1 is the identity, so expanding (C4) about Q = 1 to second order in Q − 1 and first in α,

.. math::
    Q^{\rm 1-loop} = \mathbb 1 - \partial_Q S|_{Q=\mathbb 1} = \mathbb 1 - \frac{1}{C\lambda_1 n_p}
        \Big[\sum_{\mu\nu} K_{ij}(\mu,\nu) B_{(a\mu),(b\nu)}\Big]_{Q=\mathbb 1},                                \tag{C7}

the fully connected :math:`1 + \alpha Q^{(1)}` at :math:`n_p = 1` (derived here; ``method="one_loop"``).

**Predictions.** A test point x0 enters the :math:`\bar s` integral at zero temperature; its outputs are Gaussian with
(supplement, eq:SM_bias and eq:SM_var, with the renormalized kernel of (C3))

.. math::
    \Gamma_a(x_0) = \sum_{b\nu} k_{(a0),(b\nu)}\, r_{(b\nu)}, \qquad
    \Sigma_{ab}(x_0) = k_{(a0),(b0)} - \sum_{c\mu,d\nu} k_{(a0),(c\mu)} (A^{-1})_{(c\mu),(d\nu)} k_{(b0),(d\nu)},
                                                                                                          \tag{C8}

:math:`k_{(a0),(b\nu)} = \frac{1}{\lambda_1 n_p}\sum_{ij} Q_{(ai),(bj)} K_{ij}(x_0, x^\nu)`,
:math:`k_{(a0),(b0)} = \frac{1}{\lambda_1 n_p}\sum_{ij} Q_{(ai),(bj)} K_{ij}(x_0, x_0)` (the patches of one image),
and :math:`\epsilon_g = \langle\|y_0 - \Gamma(x_0)\|^2 + \operatorname{tr}\Sigma(x_0)\rangle_{x_0}` (C9). **Readout
overlaps**: a source J on :math:`\sum_c v_c v_c^\top` (:math:`v_c` the :math:`D n_p` weights of channel c) turns the
per-channel factor into :math:`\det(\lambda_1 - J + M/(C n_p))^{-1/2}`, so at the saddle point

.. math::
    \frac{1}{C}\Big\langle\sum_c v_{a,c,i}\, v_{b,c,j}\Big\rangle = \big[(\lambda_1 + R/n_p)^{-1}\big]_{(ai),(bj)}
        = \frac{Q_{(ai),(bj)}}{\lambda_1},                                                                     \tag{C10}

:attr:`ConvFit.local_overlap`; its patch average :math:`\frac{1}{n_p}\sum_i Q_{(ai),(bi)}/\lambda_1`,
:attr:`ConvFit.readout_overlap`, is what :math:`\sum_{c,i} v_{aci}v_{bci}/(C n_p)` of a sampled network estimates.

**Cost.** The :math:`n_p(n_p+1)/2` blocks :math:`K_{ij}`, :math:`i\le j` (the others by (C1)'s symmetry), are held in
float64 when they fit ``kernel_memory`` and otherwise recomputed in chunks at every pass. (C3) and (C5) are one pass
over them each (a matrix product with :math:`D^2` columns); an evaluation adds one Cholesky factorization and one
inverse of A. The minimization is Newton's method with the Hessian (C6) applied by conjugate gradients,
preconditioned by the prior's Hessian, from the one-loop Q; L-BFGS on a Cholesky factor of Q where Newton stalls.
The factorizations run on one BLAS thread (on busy cores threaded LAPACK was up to 60x slower; benchmarks/cnn.py).
Odd activations only: a non-odd one (relu) would need the mean feature's second order parameter
(:mod:`renormpp.theory.nonodd` derives it for the fully connected network only).

**The code**, one idea a module: :mod:`.patch_kernels`, the network's geometry (the patch kernels (C1) and the two
passes over them that (C3) and (C5) make); :mod:`.action`, the action (C4) at one Q with its gradient (C5) and
Hessian (C6), and its minimization from the one-loop Q (C7); :mod:`.fit`, :func:`solve` and its result
:class:`ConvFit`, with the predictions (C8)-(C10).
"""
from .action import _PatchData  # noqa: F401 (with _fit: the parts of a solve that benchmarks/cnn.py times apart)
from .fit import CONV_METHODS, ConvFit, _fit, check_method, solve  # noqa: F401
from .patch_kernels import CHUNK_MEMORY, KERNEL_MEMORY, PatchKernels

__all__ = ["CHUNK_MEMORY", "CONV_METHODS", "ConvFit", "KERNEL_MEMORY", "PatchKernels", "check_method", "solve"]
