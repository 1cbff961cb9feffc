"""``--out`` never loses data: every bad case of issue 16 is a named test here."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import psched.runs.runner
from psched.cli.main import main
from psched.results.output import MANIFEST, is_psched_output

SMALL = ["simulate", "--scenario", "oasis-paper", "--jobs", "5", "--slots", "20",
         "--policies", "fifo", "--no-plots"]


def _run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as e:
        return int(e.code or 0)


def _one_line_naming(err: str, needle: str) -> None:
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err, err


@pytest.fixture
def no_simulation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any simulation work fails the test: the refusal must come before it."""

    def boom(*_a: object, **_k: object) -> None:
        raise AssertionError("the simulation ran before --out was checked")

    monkeypatch.setattr(psched.runs.runner, "simulate", boom)
    monkeypatch.setattr(psched.runs.runner, "prepare", boom)


def test_users_file_in_the_out_folder_is_kept_and_the_run_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], no_simulation: None) -> None:
    out = tmp_path / "results"
    out.mkdir()
    (out / "mine.txt").write_text("my notes")
    assert _run([*SMALL, "--out", str(out)]) == 2
    _one_line_naming(capsys.readouterr().err, str(out))
    assert [p.name for p in out.iterdir()] == ["mine.txt"]
    assert (out / "mine.txt").read_text() == "my notes"
    assert [p.name for p in tmp_path.iterdir()] == ["results"]


def test_users_file_is_kept_even_with_overwrite(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], no_simulation: None) -> None:
    out = tmp_path / "results"
    out.mkdir()
    (out / "mine.txt").write_text("my notes")
    assert _run([*SMALL, "--out", str(out), "--overwrite"]) == 2
    assert "not a psched output" in capsys.readouterr().err
    assert (out / "mine.txt").read_text() == "my notes"


def test_an_existing_file_at_out_is_never_touched(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], no_simulation: None) -> None:
    target = tmp_path / "results"
    target.write_text("a file, not a folder")
    for extra in ([], ["--overwrite"]):
        assert _run([*SMALL, "--out", str(target), *extra]) == 2
        _one_line_naming(capsys.readouterr().err, str(target))
    assert target.read_text() == "a file, not a folder"
    assert [p.name for p in tmp_path.iterdir()] == ["results"]  # no hidden .old copy


def test_rerun_into_an_earlier_output_is_refused_without_overwrite(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    assert _run([*SMALL, "--out", str(out)]) == 0
    assert is_psched_output(out) and (out / MANIFEST).is_file()
    before = (out / "summary.json").read_text()
    capsys.readouterr()
    assert _run([*SMALL, "--seed", "1", "--out", str(out)]) == 2
    _one_line_naming(capsys.readouterr().err, "--overwrite")
    assert (out / "summary.json").read_text() == before


def test_overwrite_replaces_an_earlier_output_whole(tmp_path: Path) -> None:
    out = tmp_path / "results"
    assert _run([*SMALL, "--out", str(out)]) == 0
    assert _run([*SMALL, "--seed", "1", "--policies", "srtf", "--out", str(out),
                 "--overwrite"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["params"]["seed"] == 1 and list(summary["policies"]) == ["srtf"]
    assert not (out / "fifo").exists()  # nothing of the old output is left behind
    assert [p.name for p in tmp_path.iterdir()] == ["results"]


def test_an_empty_folder_is_used(tmp_path: Path) -> None:
    out = tmp_path / "results"
    out.mkdir()
    assert _run([*SMALL, "--out", str(out)]) == 0
    assert (out / "summary.json").is_file() and (out / "report.html").is_file()


def test_out_under_a_file_is_reported_before_any_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], no_simulation: None) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("x")
    out = blocker / "results"
    assert _run([*SMALL, "--out", str(out)]) == 2
    _one_line_naming(capsys.readouterr().err, str(out))
    assert blocker.read_text() == "x"


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="root writes into read-only folders")
def test_unwritable_out_is_reported_before_any_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], no_simulation: None) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert _run([*SMALL, "--out", str(locked / "results")]) == 2
        _one_line_naming(capsys.readouterr().err, str(locked / "results"))
    finally:
        locked.chmod(0o700)


def test_unwritable_parent_probe_names_the_out_path_not_a_temporary_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], no_simulation: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe's failure (here a read-only file system, as root sees one) names --out."""
    import tempfile

    def read_only(*_a: object, **_k: object) -> str:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkdtemp", read_only)
    out = tmp_path / "results"
    assert _run([*SMALL, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    _one_line_naming(err, str(out))
    assert "Read-only file system" in err and ".tmp-" not in err


def test_interrupt_exits_130_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*_a: object, **_k: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(psched.runs.runner, "simulate", interrupted)
    out = tmp_path / "results"
    assert _run([*SMALL, "--out", str(out)]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_ratio_out_is_checked_before_the_study_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import psched.runs.ratio

    def boom(*_a: object, **_k: object) -> None:
        raise AssertionError("the study ran before --out was checked")

    monkeypatch.setattr(psched.runs.ratio, "ratio_study", boom)
    out = tmp_path / "results"
    out.mkdir()
    (out / "mine.txt").write_text("my notes")
    assert _run(["ratio", "--instances", "1", "--out", str(out)]) == 2
    _one_line_naming(capsys.readouterr().err, str(out))
    assert (out / "mine.txt").read_text() == "my notes"


def test_a_file_added_to_an_earlier_output_makes_it_no_longer_replaceable(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    assert _run([*SMALL, "--out", str(out)]) == 0
    (out / "analysis.ipynb").write_text("{}")  # the user's work, beside psched's files
    capsys.readouterr()
    assert _run([*SMALL, "--out", str(out), "--overwrite"]) == 2
    assert "not a psched output" in capsys.readouterr().err
    assert (out / "analysis.ipynb").read_text() == "{}"


def test_a_real_sigint_during_the_simulation_exits_130_and_writes_nothing(
        tmp_path: Path) -> None:
    """Ctrl-C as a terminal sends it: once the first progress line shows the run is going."""
    import signal
    import subprocess
    import sys

    out = tmp_path / "results"
    proc = subprocess.Popen(
        [sys.executable, "-m", "psched", "simulate", "--scenario", "oasis-paper", "--jobs",
         "600", "--slots", "300", "--policies", "all", "--out", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parents[1])
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # a progress line, printed after 5 s of work
        assert first.startswith("psched: ") and "slots" in first, first
        proc.send_signal(signal.SIGINT)
        rest = proc.stderr.read()
        assert proc.wait(timeout=120) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "interrupted; nothing written" in rest and "Traceback" not in rest
    assert list(tmp_path.iterdir()) == []
