"""benchmarks/samplers.py runs as its docstring says (the second tier: a smoke run of the default sampler)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_sampler_benchmark_runs_its_smoke_size():
    """``--quick`` with the default sampler: the benchmark reaches its report line and the exact theory's ε_g beside it
    (it called a module it had not imported until 2026-12-07, and no test ran it)."""
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "samplers.py"), "--quick", "--only",
                          "kinetic on w, v integrated out"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "kinetic on w, v integrated out" in out.stdout and "theory eps_g" in out.stdout, out.stdout[-2000:]
