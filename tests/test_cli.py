"""``psched simulate`` end to end: output schema, re-checkable files, and bad input."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from psched.cli.main import main
from psched.core.model import RESOURCES
from psched.results.metrics import SUMMARY_KEYS
from psched.results.output import JOBS_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "traces" / "demo_sim.csv"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sim") / "out"
    code = main(["simulate", "--scenario", "oasis-paper", "--jobs", "25", "--slots", "40",
                 "--policies", "all", "--seed", "3", "--out", str(out)])
    assert code == 0
    return out


def test_simulate_writes_every_file_of_the_schema(run_dir: Path) -> None:
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["params"]["horizon"] == 40 and summary["params"]["n_jobs"] == 25
    for name, entry in summary["policies"].items():
        assert set(SUMMARY_KEYS) <= set(entry), name
        assert entry["admitted"] + entry["rejected"] == 25
        assert entry["completed"] + entry["unfinished"] == entry["admitted"]
        with (run_dir / name / "jobs.csv").open() as fh:
            assert tuple(next(csv.reader(fh))) == JOBS_COLUMNS
        assert (run_dir / name / "allocations.csv").exists()
    cluster = json.loads((run_dir / "cluster.json").read_text())
    assert {"slot_seconds", "servers"} <= set(cluster)
    assert (run_dir / "plots" / "utility.png").stat().st_size > 0
    assert (run_dir / "plots" / "jct_cdf.png").stat().st_size > 0


def test_utilities_recomputed_from_jobs_csv_match_the_summary(run_dir: Path) -> None:
    summary = json.loads((run_dir / "summary.json").read_text())
    for name, entry in summary["policies"].items():
        with (run_dir / name / "jobs.csv").open() as fh:
            rows = list(csv.DictReader(fh))
        total = 0.0
        for r in rows:
            if r["duration"]:
                d = int(r["duration"])
                assert d == int(r["completion"]) - int(r["arrival"]) + 1
                g1, g2, g3 = float(r["value"]), float(r["decay"]), float(r["target"])
                assert r["utility_kind"] == "sigmoid"
                f = g1 / (1 + math.exp(min(700.0, g2 * (d - g3))))
                assert float(r["utility"]) == pytest.approx(f, rel=1e-9, abs=1e-12)
                total += f
            else:
                assert float(r["utility"]) == 0.0
        assert total == pytest.approx(entry["total_utility"], rel=1e-9, abs=1e-9)


def test_allocations_csv_respects_every_capacity_when_rechecked(run_dir: Path) -> None:
    cluster = json.loads((run_dir / "cluster.json").read_text())
    cap = {s["id"]: s["capacity"] for s in cluster["servers"]}
    pool = {s["id"]: s["pool"] for s in cluster["servers"]}
    summary = json.loads((run_dir / "summary.json").read_text())
    for name in summary["policies"]:
        with (run_dir / name / "jobs.csv").open() as fh:
            jobs = {r["job_id"]: r for r in csv.DictReader(fh)}
        used: dict[tuple[int, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
        counts: dict[tuple[int, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
        with (run_dir / name / "allocations.csv").open() as fh:
            for a in csv.DictReader(fh):
                t, j, role, n = int(a["slot"]), a["job_id"], a["role"], int(a["count"])
                assert pool[a["server"]] == role
                assert t >= int(jobs[j]["arrival"])
                if jobs[j]["completion"]:
                    assert t <= int(jobs[j]["completion"])
                for r in RESOURCES:
                    used[(t, a["server"])][r] += n * float(jobs[j][f"{role}_{r}"])
                counts[(t, j)][role] += n
        for (_, server), u in used.items():
            for r, v in u.items():
                assert v <= cap[server][r] + 1e-9, (name, server, r)
        for (_, j), c in counts.items():
            w, p = c["worker"], c["ps"]
            assert w <= int(jobs[j]["max_workers"])
            assert math.ceil(float(jobs[j]["ps_ratio"]) * w - 1e-9) <= p <= w


def test_demo_trace_runs_through_every_policy(capsys: pytest.CaptureFixture[str]) -> None:
    """Every registered policy's row in the printed table (the files a run of every policy
    writes: ``run_dir`` above)."""
    from psched.policies import available_policies

    assert main(["simulate", "--trace", str(DEMO), "--jobs", "20"]) == 0
    rows = {line.split()[0] for line in capsys.readouterr().out.splitlines()[2:]}
    assert rows == set(available_policies())


def _bad_trace(tmp_path: Path, mutate: str) -> Path:
    lines = DEMO.read_text().splitlines()
    header = lines[0].split(",")
    row = lines[1].split(",")
    field, value = mutate.split("=")
    row[header.index(field)] = value
    p = tmp_path / "bad.csv"
    p.write_text("\n".join([lines[0], lines[1], ",".join(row)]) + "\n")
    return p


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--scenario", "oasis-paper", "--policies", "nope"], "unknown policy 'nope'"),
        (["--scenario", "no-such"], "unknown scenario"),
        (["--scenario", "oasis-paper", "--jobs", "0"], "--jobs"),
        (["--scenario", "oasis-paper", "--slots", "-3"], "--slots"),
        (["--scenario", "oasis-paper", "--load", "nan"], "--load"),
        (["--trace", "/no/such/file.csv"], "/no/such/file.csv"),
        (["--trace", "DEMO", "--cluster", "/no/such/cluster.toml"], "cluster.toml"),
        (["--trace", "DEMO", "--format", "klingon"], "format"),
        (["--scenario", "oasis-paper", "--scenario-opt", "mix=bogus"], "mix"),
        ([], "required"),
    ],
)
def test_bad_arguments_give_one_line_and_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    args = [str(DEMO) if a == "DEMO" else a for a in args]
    out = tmp_path / "out"
    extra = [] if "--slots" in args else ["--slots", "20"]
    code = _run(["simulate", *args, *extra, "--out", str(out)])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("mutation", "field"),
    [("epochs=x", "epochs"), ("max_workers=0", "max_workers"), ("tau_s=nan", "tau_s"),
     ("worker_gpu=-1", "worker_gpu"), ("utility=cubic", "utility"),
     ("ps_bandwidth_gbps=0.01", "bandwidth")],
)
def test_bad_trace_rows_name_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mutation: str, field: str
) -> None:
    bad = _bad_trace(tmp_path, mutation)
    out = tmp_path / "out"
    assert _run(["simulate", "--trace", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}:3" in err and field in err
    assert not out.exists()


def test_console_script_reports_bad_input_without_traceback(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "psched", "simulate", "--trace", str(tmp_path / "missing.csv")],
        capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_trace_synth_writes_a_loadable_trace(tmp_path: Path) -> None:
    from psched.traces.native import load_trace

    out = tmp_path / "t.csv"
    assert main(["trace", "synth", "--scenario", "oasis-paper", "--jobs", "12", "--seed", "4",
                 "--slots", "60", "--out", str(out)]) == 0
    specs = load_trace(out)
    assert len(specs) == 12 and all(s.arrival < 40 for s in specs)


def _run(argv: list[str]) -> int:
    """``main`` as the console script runs it: argparse's exit becomes a return code."""
    try:
        return main(argv)
    except SystemExit as e:
        return int(e.code or 0)


def test_a_failure_while_writing_leaves_no_partial_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psched.results.plots

    def boom(*_a: object, **_k: object) -> None:
        raise OSError(28, "No space left on device")

    small = ["simulate", "--scenario", "oasis-paper", "--jobs", "5", "--slots", "20",
             "--policies", "fifo"]
    out = tmp_path / "out"
    assert _run([*small, "--no-plots", "--out", str(out)]) == 0  # an earlier output
    before = (out / "summary.json").read_text()
    monkeypatch.setattr(psched.results.plots, "plot_run", boom)
    code = _run([*small, "--seed", "1", "--out", str(out), "--overwrite"])
    assert code == 2
    assert (out / "summary.json").read_text() == before  # stays untouched
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [(["--warm-processes", "-1"], "--warm-processes"), (["--slot-seconds", "0"], "--slot-seconds"),
     (["--horizon", "x"], "--horizon")],
)
def test_bad_service_arguments_give_one_line_and_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    out = tmp_path / "out"
    assert _run(["run", str(DEMO), *args, "--out", str(out)]) == 2  # before Ray starts
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err
    assert not out.exists()
