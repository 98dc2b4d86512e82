"""The built-in demo sweep (``renormpp demo``): theory and sampling over N1 on a synthetic linear teacher.

A reduced Fig. 1a and Fig. 2: P=200 Gaussian inputs in N0=50 dimensions with D=3 outputs from a linear
teacher, erf networks at T=0.01 for five widths from N1=50 (alpha = P/N1 = 4) to N1=800 (alpha = 0.25), each
sampled with MALA (two chains). About three minutes on a 2-core CPU. ``renormpp demo --print-config`` prints
it as TOML, a starting point for your own sweeps.
"""
CONFIG = {
    "data": {"name": "synthetic", "P": 200, "P_test": 500, "N0": 50, "D": 3, "teacher": "linear", "seed": 0},
    "model": {"N1": [50, 100, 200, 400, 800], "T": 0.01, "lambda0": 1.0, "lambda1": 1.0, "activation": "erf"},
    "sampler": {"kind": "mala", "step_size": 6e-4, "inner_steps": 10, "num_warmup": 300, "num_samples": 2000,
                "num_chains": 2},
    "run": {"out": "renormpp-demo", "seeds": [0]},
}
