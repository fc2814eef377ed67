"""The suite's memory guard ends a process that grows past its limit and names the test."""

import subprocess
import sys
import textwrap
from pathlib import Path

import _memory_guard


def test_a_process_over_its_limit_is_ended_with_the_test_named_and_its_stacks_written():
    script = textwrap.dedent(
        f"""
        import os, sys, time
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        os.environ["ARROW_DLPACK_TEST_RSS_LIMIT_GIB"] = "0.25"
        os.environ["PYTEST_CURRENT_TEST"] = "test_x.py::test_that_grows (call)"
        import _memory_guard
        _memory_guard.start(interval=0.01)
        held = []
        for _ in range(64):
            held.append(bytearray(16 << 20))  # written, so resident
            time.sleep(0.02)
        print("not ended")
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == _memory_guard.EXIT_STATUS, run
    assert "not ended" not in run.stdout
    assert "memory guard" in run.stderr
    assert "over its limit of 0.25 GiB, in test_x.py::test_that_grows (call)" in run.stderr
    # faulthandler's dump of the main thread, stopped in the loop that allocates.
    assert "<string>" in run.stderr and "Thread" in run.stderr


def test_the_limit_is_read_from_the_environment_and_otherwise_bounded(monkeypatch):
    monkeypatch.setenv("ARROW_DLPACK_TEST_RSS_LIMIT_GIB", "1.5")
    assert _memory_guard.limit_bytes() == 3 << 29
    monkeypatch.delenv("ARROW_DLPACK_TEST_RSS_LIMIT_GIB")
    assert 0 < _memory_guard.limit_bytes() <= 8 << 30
    assert 0 < _memory_guard.resident_bytes() < _memory_guard.limit_bytes()
