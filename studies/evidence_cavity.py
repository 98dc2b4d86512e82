r"""Does a cavity field fix the shared field's evidence at small width? The shared field's free energy (E1) at its
fixed point (F2), against averaged expectation propagation (Dehaene & Barthelmé, JRSS B 80, 199 (2018); Li,
Hernández-Lobato & Turner, NeurIPS 2015): one Gaussian site per neuron, each neuron's law (F1) taken in the cavity
field of the other N1 - 1 (the shared field puts each neuron in the field its own site is part of), the site fitted
by matching the moments of the field. Both on a tiny problem (P = 5, N0 = 2, D = 2, erf, T = 0.1), their averages
over (F1) by importance weights of prior neurons, against the finite network's exact evidence (tempered SMC over all
weights, `rp.theory.evidence` at k = N1, checked against quadrature in tests/test_evidence.py).

Averaged EP: the field's law is :math:`\propto G(\bar f)\,t(\bar f)^{N_1}`, with the site
:math:`t = e^{-\bar f^\top\Lambda\bar f/2 + i\bar f^\top b}`; its cavity :math:`G\,t^{N_1-1}` has precision
:math:`T + (N_1-1)\Lambda` and mean :math:`m_\backslash`. Given a neuron w the field is Gaussian with mean
:math:`m_\backslash - \Sigma_\backslash(y_w\otimes s)` and covariance
:math:`\Sigma_\backslash - \Sigma_\backslash(C_w\otimes ss^\top)\Sigma_\backslash` (C, y of (F1) at the cavity
field). The field's new moments are their mixture over (F1): the mean of the means, and
:math:`\Sigma_\backslash - \Sigma_\backslash(E[C\otimes ss^\top] + {\rm Cov}[y\otimes s])\Sigma_\backslash` (the
field is :math:`i m + g`: the spread of the means enters with a minus). The evidence is
:math:`\log\int G t^{N_1} + N_1(\log Z_1(m_\backslash, \Sigma_\backslash) - \log E_\backslash[t])`.

The readout overlaps of both, against NUTS on the same network (v integrated out, 2 chains of 1000 after 500).

The first prototype, kept as the record of docs/log/validity.md ("The theory's evidence"); the package's solver is
``shared_field.solve(..., cavity=True)``, measured by studies/cavity_field.py. This prototype's shared field (F2)
iterated on importance weights of prior neurons lands on another fixed point at N1 = 4 (overlap 5.03 against the
package's 2.56 and NUTS's 2.29).

Run:  .venv/bin/python studies/evidence_cavity.py     (~10 min; --widths 2,4,8)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from renormpp.network import get_activation
from renormpp.theory import field_specialists as fs
from renormpp.theory.evidence import log_evidence
from renormpp.theory.shared_field.equations import _moment, _per_neuron
from renormpp.theory.specialists import _problem

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
from hyperplane import nuts_posterior  # noqa: E402

T = 0.1


def _weights(log_tilt):
    """Importance weights of mean 1, the log of their mean (log Z1) and their effective sample size."""
    w = np.exp(log_tilt - log_tilt.max())
    return w / w.mean(), float(np.log(w.mean()) + log_tilt.max()), float(w.sum() ** 2 / np.sum(w**2))


def _big(s, rho, W):
    """E[W_ab s s^T] over the weights, as a PD x PD matrix."""
    D, P = W.shape[1], s.shape[1]
    return _moment(s, s, rho, W, np.zeros((P, P))).reshape(P * D, P * D)


def _overlap(rho, C, y, N1):
    """The readout overlap <v v^T>/N1 = N1 E[(c+q)^-1 + y y^T] over (F1) (SharedFieldFit.readout_overlap), at the field
    each neuron's law is taken in."""
    return N1 * np.einsum("m,mab->ab", rho, C + np.einsum("ma,mb->mab", y, y)) / len(rho)


def shared_field(s, Y, N1, iters=300, damping=0.5):
    """(F2) by damped iteration, and (E1) at its fixed point."""
    P, D = Y.shape
    y, eye, c = Y.T.reshape(-1), np.eye(P * D), float(N1)
    m, S = y / (T + 1), eye / (T + 1)
    for _ in range(iters):
        C, yy, lt = _per_neuron(s, m.reshape(D, P).T, S, c)
        rho = _weights(lt)[0]
        L_W = N1 * _big(s, rho, C + np.einsum("ma,mb->mab", yy, yy))
        L_C = N1 * _big(s, rho, C)
        m = m + damping * (np.linalg.solve(T * eye + L_C, y) - m)
        S = S + damping * (np.linalg.inv(T * eye + L_W) - S)
        S = 0.5 * (S + S.T)
    C, yy, lt = _per_neuron(s, m.reshape(D, P).T, S, c)
    rho, log_z1, ess = _weights(lt)
    PD = P * D
    return (0.5 * T * m @ m - m @ y + 0.5 * np.linalg.slogdet(S)[1] - 0.5 * T * np.trace(S)
            + 0.5 * PD * (1 - np.log(2 * np.pi)) + N1 * log_z1), ess, _overlap(rho, C, yy, N1)


def cavity(s, Y, N1, iters=300, damping=0.3):
    """Averaged EP (the module's equations) and its evidence."""
    P, D = Y.shape
    y, eye, c, PD = Y.T.reshape(-1), np.eye(P * D), float(N1), P * D
    Lam, b = eye / N1, np.zeros(PD)

    def at_cavity(Lam, b):
        Pc = T * eye + (N1 - 1) * Lam
        Sc = np.linalg.inv(Pc)
        return Pc, Sc, Sc @ (y + (N1 - 1) * b)

    for _ in range(iters):
        Pc, Sc, mc = at_cavity(Lam, b)
        C, yy, lt = _per_neuron(s, mc.reshape(D, P).T, Sc, c)
        rho = _weights(lt)[0]
        ys = np.einsum("ma,mp->map", yy, s).reshape(len(s), PD)
        Eys = rho @ ys / len(rho)
        cov = (ys * rho[:, None]).T @ ys / len(rho) - np.outer(Eys, Eys)
        S_new = Sc - Sc @ (_big(s, rho, C) + cov) @ Sc
        P_new = np.linalg.inv(0.5 * (S_new + S_new.T))
        Lam_new, b_new = P_new - Pc, P_new @ (mc - Sc @ Eys) - (y + (N1 - 1) * b)
        Lam, b = Lam + damping * (0.5 * (Lam_new + Lam_new.T) - Lam), b + damping * (b_new - b)
    Pc, Sc, mc = at_cavity(Lam, b)
    C, yy, lt = _per_neuron(s, mc.reshape(D, P).T, Sc, c)
    rho, log_z1, ess = _weights(lt)
    Pg = T * eye + N1 * Lam
    h = y + N1 * b
    log_global = -0.5 * PD * np.log(2 * np.pi) - 0.5 * np.linalg.slogdet(Pg)[1] - 0.5 * h @ np.linalg.solve(Pg, h)
    r = Lam @ mc - b
    log_site = (0.5 * mc @ Lam @ mc - mc @ b - 0.5 * np.linalg.slogdet(eye + Sc @ Lam)[1]
                - 0.5 * r @ np.linalg.solve(Pc + Lam, r))
    return log_global + N1 * (log_z1 - log_site), ess, _overlap(rho, C, yy, N1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", default="2,4,8")
    ap.add_argument("--neurons", type=int, default=200_000)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((5, 2)), rng.standard_normal((5, 2))
    P, D = Y.shape
    s = get_activation("erf").numpy(rng.standard_normal((args.neurons, X.shape[1])) @ X.T / np.sqrt(X.shape[1]))
    print("| N1 | exact log Z | shared field (E1) | Δ | averaged EP (cavity) | Δ | overlap (o00, o01, o11): NUTS "
          "| shared field | averaged EP | ESS of (F1)'s weights (shared, EP) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for N1 in (int(w) for w in args.widths.split(",")):
        zero = np.zeros((P * D, P * D))
        fit = fs.FieldSpecialistFit(W=np.zeros((1, N1, 2)), k=N1, m=None, Sigma=None, L_W=zero, L_C=zero, history=[],
                                    bulk=None, _pb=_problem(X, Y, N1, N1, T, 1.0, 1.0, "erf"))
        exact = log_evidence(fit, replicates=4)
        _, _, overlap = nuts_posterior(X, Y, X, Y, N1=N1, T=T, key=N1)
        sf, ess_sf, o_sf = shared_field(s, Y, N1)
        ep, ess_ep, o_ep = cavity(s, Y, N1)
        o = overlap.mean(axis=0)
        print(f"| {N1} | {exact.log_z:.3f} ± {exact.error:.3f} | {sf:.3f} | {sf - exact.log_z:+.3f} | {ep:.3f} | "
              f"{ep - exact.log_z:+.3f} | {_three(o)} | {_three(o_sf)} | {_three(o_ep)} | {ess_sf:.0f}, {ess_ep:.0f} |",
              flush=True)


def _three(o):
    return f"{o[0, 0]:.2f}, {o[0, 1]:.2f}, {o[1, 1]:.2f}"


if __name__ == "__main__":
    main()
