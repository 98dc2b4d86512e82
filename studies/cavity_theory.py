r"""Two mean-field theories beyond the Gaussian equivalence, measured (issue 46, item 2: first measurements).

**(a) The annealed cavity theory.** The neurons are independent draws from the cavity law (S3) of
:mod:`renormpp.theory.single_neuron`, and the cavity inverse B is the deterministic equivalent of the resolvent of
their features,

.. math:: B = \Big(T + N_1\,\mathbb E_\mu\Big[\frac{s s^\top}{c + s^\top B s}\Big]\Big)^{-1},\qquad c = \lambda_1 N_1.  \tag{M1}

For a linear activation it is solved here in closed form (the features are Gaussian, sᵀBs concentrates, the law is
Gaussian with a rank-D tilt along K B Y), and compared with the exact theory, which is exact for linear networks.

**(b) The spike-exact theory.** After the readout is integrated, every neuron sees the field f̄ (P x D) conjugate to
the predictions through :math:`\exp(-\|\bar f^\top s(w)\|^2/(2c))`, and f̄ is **one field shared by all neurons**
(quenched), not an independent Gaussian per neuron as in (S3). Shift the contour to its mean, f̄ = i m + g: the bulk
g is Gaussian-equivalent (the projections gᵀs are Gaussian over w, with :math:`\Omega = \mathbb E\,g^\top K g`), the
D spike projections :math:`z = m^\top s(w)` are kept exact. One neuron's law and the stationarity conditions are

.. math::
    \mu(w) \propto \mathcal N(w; 0, 1/\lambda_0)\,\exp\big(\tfrac12 z^\top (c + \Omega)^{-1} z\big),\qquad
    Q/(\lambda_1 N_1) = (c+\Omega)^{-1} + (c+\Omega)^{-1}\,\mathbb E_\mu[z z^\top]\,(c+\Omega)^{-1},          \tag{M2}

.. math::
    \Omega = \sum_\mu k_\mu\,(T + k_\mu Q/\lambda_1)^{-1},\qquad
    T m + N_1\,\mathbb E_\mu[s z^\top]\,(c+\Omega)^{-1} = Y,                                                 \tag{M3}

with predictions :math:`\Gamma(x_0) = N_1\,\mathbb E_\mu[s(x_0) z^\top](c+\Omega)^{-1}` and the bulk's variance, that
of the Gaussian process with kernel :math:`Q\otimes K/\lambda_1`. For Gaussian z (a linear activation) (M2)-(M3) are
the exact theory's saddle point (its Q and :math:`m = (T + Q\otimes K/\lambda_1)^{-1}Y`); for erf the spike's law is
non-Gaussian. μ is sampled by a tempered sequential Monte Carlo population (MALA moves in the row space of X), the
fixed point is damped.

Run: ``python studies/cavity_theory.py`` (MNIST (0, 1), P = 200; about 20 minutes on 2 cores, half of it the
sampled linear network that arbitrates the linear check, which --no-network skips; --root or RENORMPP_DATA for the
data). Prints the tables of benchmarks/README.md, "cavity_theory.py".
"""
from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np

import renormpp as rp
from renormpp.network import get_activation, x64_context

T = 0.01
SAMPLED = {100: 0.029548, 20: 0.010228}  # the sampled networks' eps_g (studies/single_neuron.py, same data)


def sampled_linear(d, N1, seed=0):
    """The arbiter of the linear check: a linear network sampled by the default sampler (two chains, 500 warmup
    draws, 1000 draws thinned by 2; v integrated out), its Rao-Blackwellized eps_g and the error from 20 batch means."""
    from single_neuron import rb_eps_g, sample_network

    w = sample_network(d, N1, warmup=500, draws=1000, thin=2, seed=seed, activation="linear")
    eps = np.asarray(rb_eps_g(d, w, N1, activation="linear"), dtype=np.float64)  # (chains, draws)
    batches = eps[:, : eps.shape[1] // 10 * 10].reshape(eps.shape[0], 10, -1).mean(-1).ravel()
    return float(eps.mean()), float(batches.std(ddof=1) / np.sqrt(batches.size))


def annealed_linear(d, N1, lambda1=1.0, iters=5000):
    """(a) for a linear activation, in closed form: eps_g, or None where (M1) has no solution."""
    X, Y = d.X, d.Y
    P, N0 = X.shape
    D, c = Y.shape[1], lambda1 * N1
    K, Kx, Kxx = X @ X.T / N0, d.X_test @ X.T / N0, np.sum(d.X_test ** 2, 1) / N0
    B, qb = np.linalg.inv(T * np.eye(P) + K / lambda1), 0.0

    def tilted(B, qb):
        KBY = K @ B @ Y
        for _ in range(200):  # q = tr(B Sigma), Sigma = K + K B Y (c + q - Y^T B K B Y)^{-1} Y^T B K
            Mm = np.linalg.inv((c + qb) * np.eye(D) - Y.T @ B @ KBY)
            qn = np.trace(B @ K) + np.trace(KBY.T @ B @ KBY @ Mm)
            if abs(qn - qb) <= 1e-13 * qn:
                break
            qb = qn
        return Mm, qn

    for _ in range(iters):
        Mm, qb = tilted(B, qb)
        KBY = K @ B @ Y
        Bn = np.linalg.inv(T * np.eye(P) + N1 * (K + KBY @ Mm @ KBY.T) / (c + qb))
        if np.min(np.linalg.eigvalsh(Mm)) <= 0 or not np.all(np.isfinite(Bn)):
            return None
        step = np.linalg.norm(Bn - B) / np.linalg.norm(B)
        B = 0.7 * B + 0.3 * Bn
        if step < 1e-11:
            break
    Mm, qb = tilted(B, qb)
    KxBY, KBY = Kx @ B @ Y, K @ B @ Y
    m = N1 * (Kx + KxBY @ Mm @ KBY.T) / (c + qb)
    var = N1 * (Kxx + np.einsum("id,de,ie->i", KxBY, Mm, KxBY)) / (c + qb) - np.einsum("ip,pq,iq->i", m, B, m)
    return float(np.mean(np.sum((d.Y_test - m @ B @ Y) ** 2, 1)) + D * np.mean(var))


class Population:
    """A tempered SMC population of one neuron's weights in the row space of X, for a tilt exp(ell(z; m, Ci))."""

    def __init__(self, X, act, M, lambda0, seed):
        U, S, Vt = np.linalg.svd(X, full_matrices=False)
        keep = S > S[0] * 1e-10
        self.H, self.Vt, self.N0 = U[:, keep] * S[keep] / np.sqrt(X.shape[1]), Vt[keep], X.shape[1]
        self.act, self.M, self.lambda0, self.h = act, M, lambda0, 0.5 / lambda0
        self.key = jax.random.PRNGKey(seed)
        self.Z = np.asarray(jax.random.normal(self._key(), (M, keep.sum()))) / np.sqrt(lambda0)

        def ell(zc, m, Ci):
            z = m.T @ act(self.H @ zc)
            return 0.5 * z @ (Ci @ z)

        def logpi(zc, a, b, t):
            return -0.5 * lambda0 * zc @ zc + (1 - t) * ell(zc, *a) + t * ell(zc, *b)

        vg = jax.vmap(jax.value_and_grad(logpi), (0, None, None, None))

        def mala(key, Z, a, b, t, h):
            lp, g = vg(Z, a, b, t)
            k1, k2 = jax.random.split(key)
            Zp = Z + 0.5 * h * g + jnp.sqrt(h) * jax.random.normal(k1, Z.shape)
            lpp, gp = vg(Zp, a, b, t)
            log_q = (jnp.sum((Zp - Z - 0.5 * h * g) ** 2, 1) - jnp.sum((Z - Zp - 0.5 * h * gp) ** 2, 1)) / (2 * h)
            ok = jnp.log(jax.random.uniform(k2, (Z.shape[0],))) < lpp - lp + log_q
            return jnp.where(ok[:, None], Zp, Z), jnp.mean(ok)

        self.ell = jax.jit(jax.vmap(ell, (0, None, None)))
        self.mala = jax.jit(mala)

    def _key(self):
        self.key, k = jax.random.split(self.key)
        return k

    def move(self, a, b, t=1.0, steps=5):
        for _ in range(steps):
            self.Z, acc = self.mala(self._key(), self.Z, a, b, t, self.h)
            self.h *= np.exp(float(acc) - 0.57)

    def transport(self, a, b, moves=5):
        """From the tilt a = (m, Ci) to b by adaptive tempering (ESS >= M/2 per stage): the number of stages."""
        M, lw, t, stages = self.M, np.zeros(self.M), 0.0, 0

        def ess(x):
            w = np.exp(x - x.max())
            return w.sum() ** 2 / (w ** 2).sum()

        while t < 1.0:
            d = np.asarray(self.ell(self.Z, *b)) - np.asarray(self.ell(self.Z, *a))
            lo, hi = t, 1.0
            if ess(lw + (1 - t) * d) < 0.5 * M:
                for _ in range(40):
                    mid = 0.5 * (lo + hi)
                    lo, hi = (mid, hi) if ess(lw + (mid - t) * d) >= 0.5 * M else (lo, mid)
                hi = max(lo, t + 1e-6)
            lw, t = lw + (hi - t) * d, hi
            w = np.exp(lw - lw.max())
            u = (np.arange(M) + float(jax.random.uniform(self._key()))) / M
            self.Z, lw = self.Z[np.minimum(np.searchsorted(np.cumsum(w / w.sum()), u), M - 1)], np.zeros(M)
            self.move(a, b, t, moves)
            stages += 1
        return stages

    def features(self, X_test=None):
        s = np.asarray(self.act(self.Z @ self.H.T))
        if X_test is None:
            return s
        inner = X_test @ self.Vt.T
        perp = np.sqrt(np.maximum(np.sum(X_test ** 2, 1) - np.sum(inner ** 2, 1), 0) / (self.lambda0 * self.N0))
        noise = np.asarray(jax.random.normal(self._key(), (self.M, len(X_test))))
        return s, np.asarray(self.act(self.Z @ inner.T / np.sqrt(self.N0) + perp * noise))


def spike_theory(d, N1, activation="erf", lambda1=1.0, M=8000, iters=30, eta=0.15, average=10, seed=0, log=print):
    """(b): eps_g, Q and the history of the fixed point (M2)-(M3), from the exact theory's saddle point."""
    act = get_activation(activation).fn
    X, Y = np.asarray(d.X, float), np.asarray(d.Y, float)
    D, c = Y.shape[1], lambda1 * N1
    K = rp.kernels.nngp(X, activation=activation)
    Kx = rp.kernels.nngp(d.X_test, X, activation=activation)
    Kxx = rp.kernels.nngp_diag(d.X_test, activation=activation)
    k, V = np.linalg.eigh(K)
    k = np.maximum(k, 0.0)
    eye = np.eye(D)

    def Omega(Q):
        return sum(kk * np.linalg.inv(T * eye + kk * Q / lambda1) for kk in k)

    def solve_m(rhs, Ci):  # T m + N1 K m Ci = rhs, in the eigenbases of K and Ci
        ci, W = np.linalg.eigh(Ci)
        return V @ ((V.T @ rhs @ W) / (T + N1 * k[:, None] * ci[None, :])) @ W.T

    Q = Q0 = np.atleast_2d(rp.theory.solve(X, Y, N1=N1, T=T, activation=activation).Q)
    Om = Omega(Q)
    Ci = np.linalg.inv(c * eye + Om)
    m = solve_m(Y, Q / (lambda1 * N1))
    hist, kept = [], []
    with x64_context():
        pop = Population(X, act, M, 1.0, seed)
        pop.transport((m, 0 * Ci), (m, Ci))
        for it in range(iters):
            s = pop.features()
            z = s @ m
            Q = lambda1 * N1 * (Ci + Ci @ (z.T @ z / M) @ Ci)
            Om_n = Omega(Q)
            Ci_n = np.linalg.inv(c * eye + Om_n)
            m_n = solve_m(Y - N1 * (s.T @ z / M - K @ m) @ Ci_n, Ci_n)
            hist.append(dict(res_m=float(np.linalg.norm(m_n - m) / np.linalg.norm(m)),
                             res_Omega=float(np.linalg.norm(Om_n - Om) / np.linalg.norm(Om)), Q=Q.tolist()))
            if not np.all(np.isfinite(Q)) or np.linalg.norm(Q) > 10 * np.linalg.norm(Q0):
                log(f"  it {it}: did not converge: Q ran away from the exact theory's ({np.round(Q, 3).tolist()})")
                return dict(eps_g=None, bias=None, variance=None, Q=Q.tolist(), history=hist, converged=False)
            m, Om = (1 - eta) * m + eta * m_n, (1 - eta) * Om + eta * Om_n
            new = (m, np.linalg.inv(c * eye + Om))
            stages = pop.transport((m, Ci), new)
            Ci = new[1]
            log(f"  it {it}: |dm|/|m| {hist[-1]['res_m']:.3g} |dOmega|/|Omega| {hist[-1]['res_Omega']:.3g} "
                f"stages {stages}")
            if it >= iters - average:
                kept.append((m, Om, Q))
        last = (m, Ci)
        m, Om, Q = (np.mean([x[i] for x in kept], axis=0) for i in range(3))  # the last iterations' average
        Ci = np.linalg.inv(c * eye + Om)
        pop.transport(last, (m, Ci))
        G = np.zeros((len(d.X_test), D))
        for _ in range(average):
            pop.move((m, Ci), (m, Ci))
            s, sx = pop.features(d.X_test)
            G += N1 * (sx.T @ (s @ m) / M) @ Ci / average
    Mu = np.stack([np.linalg.inv(T * eye + kk * Q / lambda1) for kk in k])
    kap = Kx @ V
    var = np.trace(Q) / lambda1 * Kxx - np.einsum("ip,pab,ba->i", kap ** 2, Q @ Mu @ Q, eye) / lambda1 ** 2
    bias = np.mean(np.sum((d.Y_test - G) ** 2, 1))
    return dict(eps_g=float(bias + np.mean(var)), bias=float(bias), variance=float(np.mean(var)), Q=Q.tolist(),
                history=hist, converged=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", help="the data sets' folder (default: the loaders' rules, RENORMPP_DATA)")
    ap.add_argument("--out", default="cavity_theory.json")
    ap.add_argument("--particles", type=int, default=8000)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--no-network", action="store_true", help="skip the sampled linear network (about 10 minutes)")
    args = ap.parse_args()
    d = rp.datasets.mnist(classes=(0, 1), P=200, P_test=1000, root=args.root, seed=0)
    out = {"annealed_linear": {}, "spike": {}}
    if not args.no_network:
        t = time.perf_counter()
        mean, err = sampled_linear(d, 100)
        out["linear_network_N1=100"] = dict(eps_g=mean, err=err, seconds=time.perf_counter() - t)
        print(f"a linear network sampled at N1 = 100: eps_g = {mean:.4f} +- {err:.4f} ({time.perf_counter() - t:.0f} s)")
    print("(a) the annealed cavity theory, linear activation, against the exact theory (exact for linear networks)")
    print("| N1 | annealed cavity | exact theory |\n|---|---|---|")
    for N1 in (400, 200, 100, 50, 20):
        a = annealed_linear(d, N1)
        e = rp.theory.solve(d.X, d.Y, N1=N1, T=T, activation="linear").generalization_error(d.X_test, d.Y_test)
        out["annealed_linear"][N1] = dict(annealed=a, exact=float(e))
        print(f"| {N1} | {'no solution' if a is None else f'{a:.4f}'} | {e:.4f} |")
    print("\n(b) the spike-exact theory against the exact theory and the sampled networks")
    rows = []
    for act, N1 in (("linear", 100), ("erf", 100), ("erf", 20)):
        t = time.perf_counter()
        print(f"{act}, N1 = {N1}:")
        r = spike_theory(d, N1, act, M=args.particles, iters=args.iters)
        r["seconds"] = time.perf_counter() - t
        fit = rp.theory.solve(d.X, d.Y, N1=N1, T=T, activation=act)
        r["exact"] = float(fit.generalization_error(d.X_test, d.Y_test))
        r["exact_Q"] = np.atleast_2d(fit.Q).tolist()
        r["sampled"] = SAMPLED.get(N1) if act == "erf" else None
        out["spike"][f"{act}_N1={N1}"] = r
        rows.append((act, N1, r))
    print("| activation | N1 | spike-exact eps_g (bias + variance) | exact theory | sampled network | Q_11 spike / exact "
          "| seconds |\n|---|---|---|---|---|---|---|")
    for act, N1, r in rows:
        sampled = "" if r["sampled"] is None else f"{r['sampled']:.4f}"
        value = (f"{r['eps_g']:.4f} ({r['bias']:.4f} + {r['variance']:.4f})" if r["converged"]
                 else "did not converge (Q ran away)")
        print(f"| {act} | {N1} | {value} | {r['exact']:.4f} | "
              f"{sampled} | {r['Q'][0][0]:.3f} / {r['exact_Q'][0][0]:.3f} | {r['seconds']:.0f} |")
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
