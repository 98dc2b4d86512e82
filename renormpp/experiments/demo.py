"""The built-in demo sweep (``renormpp demo``): theory and sampling over N1 on a synthetic linear teacher.

A reduced Fig. 1a and Fig. 2: P=200 Gaussian inputs in N0=50 dimensions with D=3 outputs from a linear
teacher, erf networks at T=0.01 for five widths from N1=50 (alpha = P/N1 = 4) to N1=800 (alpha = 0.25), each
sampled with the recommended sampler, Metropolis-adjusted kinetic Langevin on w with the readout v integrated
out exactly (two chains; the observables are their expectations given w). 4.5-5.5 minutes on a 2-core machine
(4.9 on an AMD EPYC, 5.1 on an Intel Xeon). ``renormpp demo --print-config`` prints it as TOML, a starting point
for your own sweeps. ``renormpp demo --size smoke`` runs :data:`SMOKE`, the same sweep at two widths and a tenth of
the draws: a check that an installation works (under a minute), not a result.

At this small size the finite networks' generalization loss sits below the proportional-limit theory, by
about 9% at N1=50 and 1.3% at N1=800 (NUTS and kinetic Langevin, with and without Gibbs steps on v, agree
on it): corrections beyond the proportional limit, which shrink as P grows at fixed alpha (about 5% at
alpha=2 for P=200, 2.6% for P=500; benchmarks/README.md). The exact theory is still far closer than the infinite-width limit at every N1.
"""
CONFIG = {
    "data": {"name": "synthetic", "P": 200, "P_test": 500, "N0": 50, "D": 3, "teacher": "linear", "seed": 0},
    "model": {"N1": [50, 100, 200, 400, 800], "T": 0.01, "lambda0": 1.0, "lambda1": 1.0, "activation": "erf"},
    "sampler": {"kind": "kinetic", "inner_steps": 10, "num_warmup": 200, "num_samples": 2000, "num_chains": 2},
    "run": {"out": "renormpp-demo", "seeds": [0]},
}

SMOKE = {**CONFIG, "model": {**CONFIG["model"], "N1": [50, 400]},
         "sampler": {**CONFIG["sampler"], "num_warmup": 50, "num_samples": 200},
         "run": {**CONFIG["run"], "out": "renormpp-demo-smoke"}}
SIZES = {"full": CONFIG, "smoke": SMOKE}
