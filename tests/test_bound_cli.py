"""``psched simulate --bound lp``: the pooled LP bound lands in summary.json, above every policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from psched.cli.main import main


def test_bound_lp_puts_a_guarded_bound_above_every_policy_in_the_summary(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code = main(["simulate", "--scenario", "oasis-paper", "--jobs", "20", "--slots", "40",
                 "--policies", "oasis,srtf,drf", "--seed", "2", "--bound", "lp", "--no-plots",
                 "--out", str(out)])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["params"]["bound"] == "lp"
    bound = summary["params"]["upper_bound"]
    assert bound["kind"] == "lp_pooled" and bound["status"] == "lp"
    best = max(p["total_utility"] for p in summary["policies"].values())
    assert bound["bound"] >= best - 1e-6
    assert bound["best_policy"] in summary["policies"]
    assert "upper bound (lp_pooled, lp)" in capsys.readouterr().out


def test_no_bound_unless_asked(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(["simulate", "--scenario", "oasis-paper", "--jobs", "8", "--slots", "20",
                 "--policies", "fifo", "--no-plots", "--out", str(out)]) == 0
    assert "upper_bound" not in json.loads((out / "summary.json").read_text())["params"]


def test_unknown_bound_is_a_usage_error(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--scenario", "oasis-paper", "--jobs", "8", "--bound", "milp",
              "--out", str(tmp_path / "o")])
    assert exc.value.code == 2
    assert "--bound" in capsys.readouterr().err
