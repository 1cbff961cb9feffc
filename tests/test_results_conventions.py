"""What a result carries and how the CLI behaves: provenance, units of the field, warnings
for silent pitfalls, the column legend, --version, progress without a terminal, fetch --list.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import psched
from psched.cli.main import main
from psched.results.summary import COLUMN_LEGEND, PROVENANCE_KEYS
from psched.runs.progress import Progress
from psched.runs.runner import PschedWarning, SimulateRequest, print_table, run_simulation

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "traces" / "demo_sim.csv"
EF10 = ROOT / "traces" / "elasticflow" / "augmented" / "cluster10.csv"


def _run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as e:
        return int(e.code or 0)


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("conv") / "out"
    assert main(["simulate", "--trace", str(DEMO), "--jobs", "20", "--slots", "60",
                 "--policies", "fifo,oasis", "--seed", "4", "--no-plots", "--out",
                 str(out)]) == 0
    return out


def test_summary_json_records_provenance(demo_out: Path) -> None:
    prov = json.loads((demo_out / "summary.json").read_text())["provenance"]
    assert set(PROVENANCE_KEYS) <= set(prov)
    assert prov["psched_version"] == psched.__version__
    assert prov["seed"] == 4
    assert "simulate" in prov["command"] and "--seed 4" in prov["command"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", prov["started_utc"])
    import numpy
    import scipy

    assert prov["numpy"] == numpy.__version__ and prov["scipy"] == scipy.__version__
    assert prov["python"] == ".".join(map(str, sys.version_info[:3]))
    assert prov["git_commit"] is None or re.fullmatch(r"[0-9a-f]{40}(\+dirty)?",
                                                      prov["git_commit"])


def test_times_in_hours_and_makespan_agree_with_jobs_csv(demo_out: Path) -> None:
    summary = json.loads((demo_out / "summary.json").read_text())
    hours = summary["params"]["slot_seconds"] / 3600.0
    for name, s in summary["policies"].items():
        jobs = pd.read_csv(demo_out / name / "jobs.csv")
        done = jobs.dropna(subset=["completion"])
        assert s["jct_mean_h"] == pytest.approx(done["duration"].mean() * hours)
        assert s["jct_mean_h"] == pytest.approx(s["jct_mean"] * hours)
        span = done["completion"].max() + 1 - jobs["arrival"].min()
        assert s["makespan_slots"] == span and s["makespan_h"] == pytest.approx(span * hours)
        assert s["deadline_met_fraction"] is None  # the demo trace has no deadline jobs


def test_deadline_met_fraction_on_a_deadline_trace(tmp_path: Path) -> None:
    req = SimulateRequest(trace=str(EF10), jobs=40, policies="fifo,srtf", slots=300,
                          progress=False)
    with pytest.warns(PschedWarning):  # the default cluster of 40 jobs: one worker server
        summary, results = run_simulation(req)
    for name, res in results.items():
        recs = [r for r in res.records.values() if r.job.spec.utility.kind == "deadline"]
        assert recs, "ElasticFlow jobs carry deadlines"
        met = sum(r.duration is not None and r.duration <= r.job.spec.utility.target
                  for r in recs)
        assert summary["policies"][name]["deadline_met_fraction"] == met / len(recs)
        assert summary["policies"][name]["deadline_jobs"] == len(recs)
    buf = io.StringIO()
    print_table(summary, file=buf)
    assert "dl_met" in buf.getvalue()


def test_policies_that_coincide_on_a_one_server_cluster_are_warned_about(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["simulate", "--trace", str(EF10), "--jobs", "40", "--slots", "300",
                 "--policies", "drf,greedy-fill"]) == 0
    err = capsys.readouterr().err
    assert "psched: warning: policies drf, greedy-fill executed exactly the same schedule" in err
    assert "one worker server" in err


def test_a_trace_squashed_into_slot_0_by_a_long_slot_is_warned_about() -> None:
    req = SimulateRequest(trace=str(EF10), jobs=40, policies="fifo", slot_seconds=1e7,
                          progress=False)
    with pytest.warns(PschedWarning) as caught:
        summary, _ = run_simulation(req)
    assert any("arrive in slot 0" in str(w.message) for w in caught)
    assert any("slot 0" in w for w in summary["warnings"])


def test_every_printed_column_is_in_the_legend_and_in_help(
        demo_out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = json.loads((demo_out / "summary.json").read_text())
    buf = io.StringIO()
    print_table(summary, file=buf)
    header = buf.getvalue().splitlines()[1].split()
    legend = dict(COLUMN_LEGEND)
    assert set(header) - {"policy"} <= set(legend)
    assert "ratio" not in header and "OPT/ALG itself" in legend["dual/util"]
    assert _run(["simulate", "--help"]) == 0
    text = capsys.readouterr().out
    for column in legend:
        assert f"  {column} " in text
    guide = (ROOT / "docs" / "simulate.md").read_text()
    for column in legend:
        assert f"`{column}`" in guide, column


def test_help_lists_the_choices_of_policies_and_format(
        capsys: pytest.CaptureFixture[str]) -> None:
    from psched.policies import available_policies
    from psched.traces.detect import FORMATS

    assert _run(["simulate", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for name in [*available_policies(), *FORMATS]:
        assert name in text
    assert _run(["--help"]) == 0  # the console script's front door: --version below
    assert "--version" in capsys.readouterr().out


def test_version_flag_prints_the_version() -> None:
    done = subprocess.run([sys.executable, "-m", "psched", "--version"], capture_output=True,
                          text=True, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip() == f"psched {psched.__version__}"


class _Recorder(Progress):
    def __init__(self) -> None:
        super().__init__(1, io.StringIO(), tty=False, interval_s=3600.0)
        self.phases: list[str] = []

    def phase(self, text: str) -> None:
        super().phase(text)
        self.phases.append(text)


def test_progress_names_the_certificate_phase_after_the_slots() -> None:
    rec = _Recorder()
    req = SimulateRequest(scenario="oasis-paper", jobs=6, slots=15, policies="fifo,oasis")
    try:
        run_simulation(req, progress=rec)
    finally:
        rec.close()
    assert rec.phases[:2] == ["fifo: start-up", "fifo: slots"] and rec.done == 30
    assert rec.phases.index("oasis: slots") < len(rec.phases) - 1
    assert "certificate" in rec.phases[-1] and rec.phases[-1].startswith("oasis")


def test_progress_prints_lines_without_a_terminal() -> None:
    stream = io.StringIO()
    got = threading.Event()

    class Stream(io.StringIO):
        def write(self, s: str) -> int:
            got.set()
            return stream.write(s)

    p = Progress(10, Stream(), tty=False, interval_s=0.01)
    p.phase("oasis: dual certificate")
    p.advance(10)
    assert got.wait(30.0)
    p.close()
    first = stream.getvalue().splitlines()[0]
    assert first.startswith("psched: oasis: dual certificate [10/10 slots, 100%")


def test_progress_repeats_no_line_while_nothing_moves() -> None:
    """A phase that counts nothing for many intervals prints its line once, not every
    interval; the next change prints the next line."""
    lines: list[str] = []
    wrote = threading.Semaphore(0)

    class Stream(io.StringIO):
        def write(self, s: str) -> int:
            if s.strip():
                lines.append(s.strip())
                wrote.release()
            return len(s)

    p = Progress(10, Stream(), tty=False, interval_s=0.01, quiet_s=3600.0)
    p.phase("oasis-rp: start-up")
    assert wrote.acquire(timeout=30.0)
    time.sleep(0.3)  # some thirty intervals with nothing new
    p.announce("oasis-rp: compiling kernels")
    p.advance(1)
    assert wrote.acquire(timeout=30.0) and wrote.acquire(timeout=30.0)
    p.close()
    assert len(lines) == 3 and lines[1] == "psched: oasis-rp: compiling kernels", lines
    assert lines[0].startswith("psched: oasis-rp: start-up [0/10 slots")
    assert lines[2].startswith("psched: oasis-rp: start-up [1/10 slots")


def test_trace_fetch_list_shows_addresses_and_checksums(
        capsys: pytest.CaptureFixture[str]) -> None:
    from psched.traces.fetch import SOURCES

    assert _run(["trace", "fetch", "--list"]) == 0
    text = capsys.readouterr().out
    for source in SOURCES.values():
        assert source.name in text
        for part in source.parts:
            assert part.url in text and part.sha256 in text


def test_every_argument_of_every_command_has_help_text() -> None:
    import argparse

    from psched.cli.main import build_parser

    missing: list[str] = []

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*prefix, name])
            elif not action.help and action.dest != "help":
                missing.append(" ".join([*prefix, *(action.option_strings or [action.dest])]))

    walk(build_parser(), ["psched"])
    assert missing == []


def test_dual_per_utility_has_one_meaning_for_every_policy_with_a_dual_bound() -> None:
    """``dual/util`` = dual_bound / utility earned, whatever the policy commits or promises."""
    req = SimulateRequest(trace=str(DEMO), policies="oasis,oasis-rp", progress=False)
    summary, _ = run_simulation(req)
    buf = io.StringIO()
    print_table(summary, file=buf)
    lines = buf.getvalue().splitlines()
    header = lines[1].split()
    for name, s in summary["policies"].items():
        assert s["dual_bound"] >= s["total_utility"] > 0, name
        assert s["dual_per_utility"] == s["dual_bound"] / s["total_utility"], name
        row = next(line.split() for line in lines[2:] if line.split()[0] == name)
        assert row[header.index("dual/util")] == f"{s['dual_per_utility']:.3f}", name
