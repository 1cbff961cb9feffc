"""``psched trace inspect|convert|fetch`` and the sweep's bookkeeping (serial, no Ray)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from psched.cli.main import main
from psched.core.errors import InputError
from psched.runs.sweep import run_cell, run_sweep
from psched.runs.sweep_spec import SweepSpec, cells_of
from psched.traces import load_any, load_trace
from psched.traces.fetch import SOURCES, fetch
from psched.traces.inspect import format_stats, inspect_trace

DATA = Path(__file__).resolve().parent / "data"
HELIOS = DATA / "helios_cluster_log_sample.csv"
PHILLY = DATA / "philly_pollux_sample.csv"


def test_inspect_reports_jobs_span_and_distributions(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "h.png"
    assert main(["trace", "inspect", str(HELIOS), "--png", str(png)]) == 0
    out = capsys.readouterr().out
    assert "8 rows, 3 jobs" in out and "status failed 3" in out
    assert "GPUs per job (count): 1: 1, 2: 1, 8: 1" in out
    assert png.stat().st_size > 1000
    st = inspect_trace(PHILLY)
    assert st.jobs == 8 and sorted(st.gpus.tolist())[-1] == 128
    assert "max workers N" in format_stats(st)


def test_convert_writes_a_native_trace_equal_to_the_mapping(tmp_path: Path) -> None:
    out = tmp_path / "philly.csv"
    assert main(["trace", "convert", str(PHILLY), "--to", "native", "--out", str(out),
                 "--seed", "2", "--slot-seconds", "600"]) == 0
    assert load_trace(out) == load_any(PHILLY, seed=2, slot_seconds=600)


@pytest.mark.parametrize("argv", [
    ["trace", "inspect", "nosuch.csv"],
    ["trace", "convert", str(PHILLY), "--out", "x.csv", "--format", "helios"],
    ["trace", "fetch", "helios"],
    ["trace", "fetch", "nosuch"],
])
def test_bad_input_is_one_line_exit_2(argv: list[str], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("psched: error: ")


def _tarball(tmp_path: Path, members: dict[str, bytes]) -> tuple[str, str]:
    path = tmp_path / "t.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path.as_uri(), hashlib.sha256(path.read_bytes()).hexdigest()


def test_fetch_verifies_sha256_and_unpacks(tmp_path: Path) -> None:
    data = (DATA.parent.parent / "traces" / "elasticflow" / "augmented"
            / "cluster10.csv").read_bytes()
    url, sha = _tarball(tmp_path, {"data/cluster10.csv": data})
    files = fetch("elasticflow", tmp_path / "dest", urls=[url], sha256s=[sha])
    assert [f.relative_to(tmp_path / "dest") for f in files] == [
        Path("elasticflow/data/cluster10.csv")]
    assert files[0].read_bytes() == data


def test_fetch_refuses_a_wrong_checksum_and_keeps_nothing(tmp_path: Path) -> None:
    url, _ = _tarball(tmp_path, {"a.csv": b"x"})
    with pytest.raises(InputError, match="sha256 mismatch"):
        fetch("elasticflow", tmp_path / "dest", urls=[url])  # the published checksum
    assert list((tmp_path / "dest").iterdir()) == []


def test_fetch_refuses_members_outside_the_folder(tmp_path: Path) -> None:
    url, sha = _tarball(tmp_path, {"../evil.csv": b"x"})
    with pytest.raises(InputError, match="unsafe archive member"):
        fetch("elasticflow-raw", tmp_path / "dest", urls=[url], sha256s=[sha])
    assert not (tmp_path / "evil.csv").exists()


def test_fetch_copies_a_plain_file_and_names_every_manual_source(tmp_path: Path) -> None:
    sha = hashlib.sha256(PHILLY.read_bytes()).hexdigest()
    files = fetch("philly-pollux", tmp_path, urls=[PHILLY.as_uri()], sha256s=[sha])
    assert load_any(files[0]) == load_any(PHILLY)
    for source in SOURCES.values():
        if not source.parts:
            with pytest.raises(InputError, match="no stable direct address"):
                fetch(source.name, tmp_path)


def _spec(**kw: object) -> SweepSpec:
    base = {"trace": (str(PHILLY),), "policies": ("fifo",), "seeds": (0, 1),
            "loads": (1.0, 2.0), "scales": (1.0,)}
    base.update(kw)
    return SweepSpec(**base)  # type: ignore[arg-type]


def test_sweep_is_resumable_and_refuses_another_sweep_in_the_same_folder(
        tmp_path: Path) -> None:
    spec = _spec()
    ran: list[dict[str, object]] = []
    rows = run_sweep(spec, tmp_path, parallel=False, on_cell=ran.append)
    assert len(rows) == len(cells_of(spec)) == len(ran) == 4
    (tmp_path / "cells" / f"{cells_of(spec)[0].key}.json").unlink()
    again: list[dict[str, object]] = []
    rows2 = run_sweep(spec, tmp_path, parallel=False, on_cell=again.append)
    assert len(again) == 1  # only the missing cell
    timing = ("wall_s", "cpu_s")
    strip = [{k: v for k, v in r.items() if k not in timing} for r in rows]
    assert strip == [{k: v for k, v in r.items() if k not in timing} for r in rows2]
    header = (tmp_path / "results.csv").read_text().splitlines()[0]
    assert header.startswith("policy,seed,load,scale")
    assert (tmp_path / "sweep_utility.png").exists()
    with pytest.raises(InputError, match="different sweep"):
        run_sweep(_spec(seeds=(5,)), tmp_path, parallel=False)
    assert json.loads((tmp_path / "sweep.json").read_text())["digest"] == spec.digest()


def test_higher_load_compresses_arrivals_on_the_same_cluster() -> None:
    spec = _spec()
    low, high = (run_cell(spec, c) for c in cells_of(spec)[:3:2])
    assert low["load"] == 1.0 and high["load"] == 2.0
    assert low["worker_servers"] == high["worker_servers"]
    assert high["horizon"] <= low["horizon"]


def test_simulate_reads_a_public_trace(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--trace", str(HELIOS), "--format", "auto", "--policies",
                 "fifo", "--no-plots"]) == 0
    assert "# 3 jobs" in capsys.readouterr().out


def test_sweep_command_serial_writes_the_table(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sw"
    argv = ["sweep", "--trace", str(HELIOS), "--policies", "fifo", "--loads", "1,2",
            "--out", str(out), "--serial"]
    assert main(argv) == 0
    assert "2 cells (2 run now)" in capsys.readouterr().out
    assert len((out / "results.csv").read_text().splitlines()) == 3
    assert main(argv) == 0
    assert "2 cells (0 run now)" in capsys.readouterr().out
    assert main([*argv[:-1], "--policies", "nosuch", "--serial"]) == 2
