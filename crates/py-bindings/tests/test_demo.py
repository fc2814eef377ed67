"""`cargo xtask demo` runs examples/demo.py; this runs the same script, so that the README's demo
command keeps working: every step runs (torch and jax are installed here, so none is skipped) and
its own checks pass."""

import pathlib
import subprocess
import sys

DEMO = pathlib.Path(__file__).resolve().parents[1] / "examples" / "demo.py"


def test_the_demo_runs_every_step():
    done = subprocess.run([sys.executable, str(DEMO)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "(skipped" not in done.stdout
    steps = [line for line in done.stdout.splitlines() if line.startswith("== ")]
    assert len(steps) >= 10, steps
    assert ">>> resumed == uninterrupted[5:]\nTrue" in done.stdout
