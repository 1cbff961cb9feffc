"""Adapters of public traces: real rows (ElasticFlow, Tiresias), spec-written samples (Philly,
Helios, Alibaba PAI), the mapping rules, detection, and malformed input under Hypothesis."""

from __future__ import annotations

import contextlib
import csv
import io
import math
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from psched.core.errors import InputError
from psched.core.model import ceil_eps
from psched.traces import detect_format, load_any, load_with_report
from psched.traces.mapping import MODEL_CATALOG, MappingOptions

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT / "traces"  # the public samples shipped with the repository, licences beside them
EF_AUG = TRACES / "elasticflow" / "augmented" / "cluster10.csv"
EF_RAW = TRACES / "elasticflow" / "raw" / "cluster10.csv"
TIRESIAS = TRACES / "tiresias" / "tiresias_60_job.csv"
DATA = ROOT / "tests" / "data"
PHILLY = DATA / "philly_pollux_sample.csv"
HELIOS = DATA / "helios_cluster_log_sample.csv"
PHILLY_JSON = DATA / "philly_job_log_sample.json"
PAI = [DATA / "pai_job_table.csv", DATA / "pai_task_table.csv"]


def _rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


def test_elasticflow_augmented_first_jobs_follow_the_documented_rules() -> None:
    specs = {s.job_id: s for s in load_any(EF_AUG)}
    assert len(specs) == 260
    first = specs["5dc7d9cd-c300-9a4f-c3cd-dc2cc0935548"]  # 604 s on 16 GPUs, deadline +454 s
    assert first.arrival == 0 and first.work(3600) == 3 and first.max_workers == 3
    assert first.utility.kind == "deadline" and first.utility.target == 1
    assert first.grad_mb == MODEL_CATALOG["bert"].grad_mb and first.tau_includes_comm
    third = specs["4feb9f90-7722-d636-5cec-0cd5dcf8732c"]  # 68,253 s on 2 GPUs
    assert third.arrival == (2709847 - 2266647) // 3600 == 123
    assert third.work(3600) == math.ceil(68253 * 2 / 3600) == 38
    assert third.max_workers == 4  # elastic: 2 x 2 GPUs
    assert third.utility.target == (2791437 - 2266647) // 3600 - 123 + 1
    # E N M tau = duration x GPUs exactly: the iteration time of the trace is kept
    assert math.isclose(third.epochs * third.max_workers * third.minibatches * third.tau_s,
                        68253 * 2, rel_tol=1e-12)


@pytest.mark.parametrize("path", [EF_AUG, EF_RAW, TIRESIAS], ids=["ef-aug", "ef-raw", "tiresias"])
def test_real_rows_work_is_duration_times_gpus(path: Path) -> None:
    rows = {r["job_id"]: r for r in _rows(path)}
    specs = load_any(path)
    assert len(specs) == len(rows)
    assert [s.arrival for s in specs] == sorted(s.arrival for s in specs)
    for s in specs:
        r = rows[s.job_id]
        gpus = int(r["num_gpu"])
        want = max(1, ceil_eps(float(r["duration"]) * gpus / 3600))
        assert s.work(3600) == want
        assert s.max_workers == max(1, min(2 * gpus, want))
        assert s.worker_demand.bandwidth_gbps <= s.ps_demand.bandwidth_gbps


def test_half_of_cluster04_deadlines_need_more_gpus_than_the_trace_used() -> None:
    """The FORMATS.md fact the elastic rule answers: 7,942 of 15,802 jobs."""
    rows = _rows(TRACES / "elasticflow" / "augmented" / "cluster04.csv")
    tight = sum(float(r["deadline"]) < float(r["submission_time"]) + float(r["duration"])
                for r in rows)
    assert (len(rows), tight) == (15802, 7942)


def test_mapping_is_deterministic_for_a_seed() -> None:
    a, b = load_any(TIRESIAS, seed=3), load_any(TIRESIAS, seed=3)
    c = load_any(TIRESIAS, seed=4)
    assert a == b
    assert [s.utility for s in a] != [s.utility for s in c]
    assert [s.work(3600) for s in a] == [s.work(3600) for s in c]  # work never drawn


def test_paper_type_mix_where_the_trace_has_no_deadline() -> None:
    specs = load_any(EF_RAW)
    decays = [s.utility.decay for s in specs]
    n = len(specs)
    insensitive = sum(d == 0 for d in decays)
    critical = sum(d >= 4 for d in decays)
    assert abs(insensitive - 0.10 * n) < 1 and abs(critical - 0.35 * n) < 1
    for s in specs:
        fastest = ceil_eps(s.work(3600) / s.max_workers)
        assert s.utility.kind == "sigmoid" and s.utility.target >= fastest


def test_philly_pollux_rows_are_sorted_stably_by_time() -> None:
    specs, report, fmt = load_with_report(PHILLY)
    assert fmt == "philly" and report.jobs == 8
    assert [s.job_id for s in specs[:5]] == ["L5", "L3", "L2", "L4", "L7"]
    # the two jobs submitted at 07:15:40 keep their file order (lines 4 then 7)
    assert specs.index(next(s for s in specs if s.job_id == "L4")) < specs.index(
        next(s for s in specs if s.job_id == "L7"))
    big = next(s for s in specs if s.job_id == "L6")  # 128 GPUs for 5 days
    assert big.work(3600) == 128 * 120 and big.max_workers == 256
    assert load_any(PHILLY, vc="6214e9") and len(load_any(PHILLY, vc="6214e9")) == 3


def test_helios_filters_are_counted() -> None:
    specs, report, _ = load_with_report(HELIOS)
    assert {s.job_id for s in specs} == {"1", "5", "7"}
    assert report.skipped == {"no GPU": 1, "status failed": 3, "status killed": 1}
    everything, report, _ = load_with_report(HELIOS, statuses="all")
    assert len(everything) == 7 and report.skipped == {"no GPU": 1}
    window, report, _ = load_with_report(HELIOS, window_end_s=3600.0)
    assert {s.job_id for s in window} == {"1"} and report.skipped["after window"] == 2


def test_alibaba_ps_and_worker_roles_become_the_jobs_demands() -> None:
    specs, report, fmt = load_with_report(PAI)
    assert fmt == "alibaba"
    jobs = {s.job_id[:2]: s for s in specs}
    assert set(jobs) == {"a1", "b1", "e1", "a2"}
    a1 = jobs["a1"]  # 8 workers (1 GPU, 6 CPU, 29.3 GB) + 2 PS, 7,200 s
    assert a1.worker_demand.gpu == 1.0 and a1.worker_demand.cpu == 6.0
    assert math.isclose(a1.worker_demand.memory_gb, 29.296875)
    assert a1.ps_demand.cpu == 6.0 and a1.ps_demand.gpu == 0.0
    assert a1.ps_ratio == 2 / 8 and a1.work(3600) == 16
    assert jobs["e1"].ps_ratio == 1 / 2 and jobs["e1"].worker_demand.gpu == 2.0
    assert jobs["b1"].worker_demand.gpu == 0.5  # a single 'tensorflow' role, half a GPU
    assert report.skipped == {"no GPU": 1, "status failed": 1, "unfinished": 1}


def test_alibaba_folder_is_detected_and_read(tmp_path: Path) -> None:
    shutil.copy(PAI[0], tmp_path / "jobs.csv")  # told apart by layout, not by name
    shutil.copy(PAI[1], tmp_path / "tasks.csv")
    assert detect_format(tmp_path) == "alibaba"
    assert [s.job_id for s in load_any(tmp_path)] == [s.job_id for s in load_any(PAI)]


def test_philly_raw_json_uses_the_last_attempt() -> None:
    specs, report, fmt = load_with_report(PHILLY_JSON)
    assert fmt == "philly-json"
    by = {s.job_id[-5:]: s for s in specs}
    assert by["10240"].work(3600) == 6  # last attempt: 3 h on 2 GPUs
    assert by["10238"].work(3600) == math.ceil((90 * 60 + 21) * 8 / 3600)
    assert report.skipped == {"status killed": 1, "unfinished": 1}


@pytest.mark.parametrize(("path", "fmt"), [
    (EF_AUG, "elasticflow"), (EF_RAW, "elasticflow-raw"), (TIRESIAS, "tiresias"),
    (PHILLY, "philly"), (HELIOS, "helios"), (PHILLY_JSON, "philly-json"),
    (ROOT / "traces" / "demo_sim.csv", "native"),
])
def test_format_is_detected_from_the_header(path: Path, fmt: str) -> None:
    assert detect_format(path) == fmt


def test_bad_options_and_unknown_format_are_one_line_errors() -> None:
    with pytest.raises(InputError, match="elastic"):
        MappingOptions(elastic=0.5)
    with pytest.raises(InputError, match="unknown trace format"):
        load_any(PHILLY, "nosuch")
    with pytest.raises(InputError, match="cannot tell the trace format"):
        detect_format(ROOT / "pyproject.toml")


# --- malformed input ------------------------------------------------------------------------

SOURCES = {
    "elasticflow": EF_AUG, "tiresias": TIRESIAS, "philly": PHILLY, "helios": HELIOS,
}
_BAD_CELLS = ["", "abc", "-5", "1e400", "nan", "inf", "9" * 30, "2017-13-45 99:99:99",
              "3.5", "0", "12:00", "1e12"]


def _mutate(text: str, data: st.DataObject) -> str:
    lines = text.strip("\n").split("\n")[:8]
    kind = data.draw(st.sampled_from(["cell", "truncate", "shuffle", "no-header", "dup",
                                      "empty", "extra"]))
    header, body = lines[0].split(","), lines[1:]
    if kind == "empty":
        return ""
    if kind == "no-header":
        return "\n".join(body)
    if kind == "truncate":
        i = data.draw(st.integers(0, len(body) - 1))
        body[i] = body[i][: data.draw(st.integers(0, max(0, len(body[i]) - 1)))]
    elif kind == "dup":
        body.append(body[0])
    elif kind == "extra":
        i = data.draw(st.integers(0, len(body) - 1))
        body[i] += ",x"
    elif kind == "shuffle":
        order = data.draw(st.permutations(range(len(header))))
        header = [header[j] for j in order]
        body = [",".join(row.split(",")[j] for j in order) for row in body]
    else:
        i = data.draw(st.integers(0, len(body) - 1))
        cells = body[i].split(",")
        j = data.draw(st.integers(0, len(cells) - 1))
        cells[j] = data.draw(st.sampled_from(_BAD_CELLS))
        body[i] = ",".join(cells)
    return "\n".join([",".join(header), *body])


@contextlib.contextmanager
def warnings_in_one_line(paths: Sequence[Path]) -> Iterator[None]:
    """What a damaged file may warn of (a model the catalog lacks) is one line naming it,
    as the CLI prints it."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        yield
    for w in said:
        message = str(w.message)
        assert "\n" not in message and message.startswith(tuple(f"{p}: " for p in paths))


@settings(max_examples=int(os.environ.get("PSCHED_FUZZ_EXAMPLES", "60")), deadline=None)
@given(name=st.sampled_from(sorted(SOURCES)), data=st.data())
def test_malformed_files_give_one_line_errors_or_counted_skips(name: str,
                                                               data: st.DataObject) -> None:
    src = SOURCES[name]
    if not src.exists():
        return
    text = _mutate(src.read_text(), data)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"bad_{name}.csv"
        path.write_text(text)
        with warnings_in_one_line([path]):
            try:
                specs, report, _ = load_with_report(path, name)
            except InputError as err:
                message = str(err)
                assert "\n" not in message and message.startswith(str(path))
                assert re.match(re.escape(str(path)) + r"(:\d+)?: ", message)
                return
    assert report.jobs == len(specs) == report.rows - sum(report.skipped.values())
    ids = [s.job_id for s in specs]
    assert len(set(ids)) == len(ids)
    for s in specs:
        assert s.arrival >= 0 and s.max_workers >= 1 and s.work(3600) >= 1
        assert math.isfinite(s.tau_s) and s.tau_s > 0
    if name in ("elasticflow", "tiresias"):  # an independent reading of the kept rows
        rows = {r["job_id"]: r for r in csv.DictReader(io.StringIO(text))}
        for s in specs:
            r = rows[s.job_id]
            assert s.work(3600) == max(1, ceil_eps(float(r["duration"]) * int(float(
                r["num_gpu"])) / 3600))


@pytest.mark.parametrize("text", [
    "[", "[{]", "{}", '[{"jobid": "a"}]', "[1, 2]",
    '[{"jobid":"a","status":"Pass","submitted_time":"2017-10-03 03:41:09","attempts":'
    '[{"start_time":"2017-10-03 03:41:09","end_time":"bad","detail":[]}]}]',
    '[{"jobid":"a","status":"Pass","submitted_time":"x","attempts":[]}]',
])
def test_malformed_philly_json_is_one_line_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "log.json"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_any(path, "philly-json")
    assert "\n" not in str(err.value) and str(err.value).startswith(str(path))


@pytest.mark.parametrize(("table", "line", "field"), [
    ("task", "a1,ps,two,Terminated,1,2,600,29,,", "inst_num"),
    ("task", "a1,worker,1,Done,1,2,600,29,100,V100", "status"),
    ("task", "a1,worker,1,Terminated,5,2,600,29,100,V100", "end_time"),
    ("job", "a1,i,u,Terminated,abc,2", "start_time"),
    ("job", "a1,i,u,Terminated,1", None),
])
def test_malformed_alibaba_rows_name_file_line_field(tmp_path: Path, table: str, line: str,
                                                     field: str | None) -> None:
    job = tmp_path / "pai_job_table.csv"
    task = tmp_path / "pai_task_table.csv"
    job.write_text("a0,i,u,Terminated,1,9\n" + (line if table == "job" else "a1,i,u,Terminated,"
                                                 "1,9") + "\n")
    task.write_text("a0,worker,1,Terminated,1,9,600,29,100,V100\n"
                    + (line if table == "task" else "") + "\n")
    with pytest.raises(InputError) as err:
        load_any(tmp_path)
    where = f"{job if table == 'job' else task}:2: "
    assert str(err.value).startswith(where)
    if field:
        assert str(err.value).startswith(where + field)


_ALL = {"elasticflow": [EF_AUG], "elasticflow-raw": [EF_RAW], "tiresias": [TIRESIAS],
        "philly": [PHILLY], "helios": [HELIOS], "philly-json": [PHILLY_JSON], "alibaba": PAI}


@settings(max_examples=int(os.environ.get("PSCHED_FUZZ_EXAMPLES", "60")), deadline=None)
@given(name=st.sampled_from(sorted(_ALL)), which=st.integers(0, 1), data=st.data())
def test_any_corrupted_text_gives_jobs_or_a_one_line_error(name: str, which: int,
                                                           data: st.DataObject) -> None:
    """Byte-level damage (a cut, a span replaced) in any adapter's file, Alibaba included."""
    files = _ALL[name]
    if not files[0].exists():
        return
    victim = which % len(files)
    text = files[victim].read_text()[:3000]
    start = data.draw(st.integers(0, len(text)))
    stop = data.draw(st.integers(start, min(len(text), start + 40)))
    junk = data.draw(st.sampled_from(["", ",", "\n", '"', "-1", "x", "1e999", "{", "]", "\x00",
                                      "2017-02-30 25:00:00", "é"]))
    damaged = text[:start] + junk + text[stop:]
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, f in enumerate(files):
            p = Path(tmp) / f.name
            p.write_text(damaged if i == victim else f.read_text())
            paths.append(p)
        with warnings_in_one_line(paths):
            try:
                specs = load_any(paths[0] if len(paths) == 1 else paths, name)
            except InputError as err:
                assert "\n" not in str(err) and str(err).startswith(tuple(map(str, paths)))
                return
    for s in specs:
        assert s.arrival >= 0 and s.max_workers >= 1 and s.work(3600) >= 1
