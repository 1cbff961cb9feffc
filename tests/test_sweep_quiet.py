"""``psched sweep`` on its embedded Ray, from a shell with no Ray variables: only psched's own
lines (no Ray log line, no token warning), and Ray's token kept private to the sweep (token
authentication on, nothing written to ``~/.ray``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


def test_a_sweep_prints_only_its_own_lines_and_writes_nothing_to_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["HOME"] = str(home)
    out = subprocess.run(
        [sys.executable, "-m", "psched", "sweep", "--trace", str(ROOT / "traces/demo_sim.csv"),
         "--policies", "fifo", "--seeds", "0,1", "--loads", "1", "--cluster-scales", "1",
         "--num-cpus", "1", "--out", str(tmp_path / "sw")],
        capture_output=True, text=True, env=env, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    assert [line[:1] for line in out.stderr.splitlines()] == ["[", "["], out.stderr
    assert out.stdout.startswith("2 cells (2 run now)"), out.stdout
    assert not (home / ".ray").exists()  # Ray's default token file was not made
