"""Bounded input: every bad case of issues 16 and 17 is one line naming file, line and field.

One validator (:func:`psched.core.limits.validate_spec`) is shared by trace readers, job spec files
and the service; these tests feed each malformed input through every door it can come in by.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from service_jobs import job_toml
from test_adapters import warnings_in_one_line

from psched.cli.main import main
from psched.core import limits
from psched.core.errors import InputError
from psched.core.limits import Where, check_id, shown, validate_spec
from psched.core.model import JobSpec, Resources, window_length
from psched.core.utility import Utility
from psched.traces.native import NATIVE_COLUMNS, load_trace
from ray_cluster.ps.checkpoint import CheckpointStore, job_folder
from ray_cluster.workloads.builtin import HPARAMS, MLP, SoftmaxRegression
from ray_cluster.workloads.jobspec import (
    ImportRefused,
    check_submission,
    load_jobspec,
    parse_jobspec,
    spec_to_json,
    submission_from_json,
)

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "traces" / "demo_sim.csv"
#: A job spec whose lines the cases below edit (kept here: the examples may change); its first
#: line a comment, so that ``workload`` is on line 3.
SPEC = "# A small softmax-regression job on the digits data set.\n" + job_toml(
    job_id="digits-a", partitions=2, minibatches=120, tau_s=0.01, decay=0.5, target=4)
HYPO = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def _good() -> JobSpec:
    return parse_jobspec(SPEC, path="a.toml", default_id="a")


def _trace(tmp_path: Path, column: str, value: str, name: str = "t.csv") -> Path:
    """The demo trace's first two jobs, ``column`` of the second (line 3) set to ``value``."""
    rows = list(csv.reader(DEMO.open()))[:3]
    rows[2][rows[0].index(column)] = value
    path = tmp_path / name
    with path.open("w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)
    return path


def _one_line(err: InputError | str, *, path: str, line: int | None, field: str) -> None:
    text = str(err)
    assert "\n" not in text and len(text) < 400, text
    where = f"{path}:{line}" if line is not None else path
    assert text.startswith(f"{where}: {field}: "), text


# -- traces: every numeric field bounded, before anything is allocated -----------------------
TRACE_CASES = [
    ("max_workers", "99999999999999999999", "max_workers"),  # issue 16: 23 GB, OOM-killed
    ("epochs", "1e300", "epochs"),  # issue 16: 17 GB and growing
    ("max_workers", "1000000", "max_workers"),  # issue 16: a 250,000 + 250,000 cluster
    ("minibatches", "1000000000000000000", "minibatches"),  # issue 17: 35.5 PiB
    ("epochs", "-5", "epochs"), ("max_workers", "0", "max_workers"),  # issue 17 #7
    ("arrival", "5000000", "arrival"), ("tau_s", "1e30", "tau_s"),
    ("grad_mb", "1e12", "grad_mb"), ("worker_gpu", "1e9", "worker_gpu"),
    ("ps_cpu", "1e300", "ps_cpu"), ("value", "1e300", "value"), ("decay", "1e9", "decay"),
    ("target", "1e20", "target"), ("job_id", "../../../../x/escape", "job_id"),
    ("job_id", "x" * 200, "job_id"), ("job_id", ".hidden", "job_id"),
    ("hparams", json.dumps({"s": "x" * 10_000}), "hparams"),
    ("workload", "w" * 1000, "workload"),
    ("epochs", "1000000", "epochs"),  # in bounds alone, but E*N*M*tau is not
]


@pytest.mark.parametrize(("column", "value", "field"), TRACE_CASES,
                         ids=[f"{c}={v[:12]}" for c, v, _ in TRACE_CASES])
def test_out_of_bounds_trace_cell_is_one_line_naming_file_line_and_field(
        tmp_path: Path, column: str, value: str, field: str) -> None:
    path = _trace(tmp_path, column, value)
    if column == "epochs" and value == "1000000":
        path = _trace(tmp_path, "minibatches", "1000000000")  # both large
        rows = list(csv.reader(path.open()))
        rows[2][rows[0].index("epochs")] = value
        with path.open("w", newline="") as fh:
            csv.writer(fh, lineterminator="\n").writerows(rows)
    with pytest.raises(InputError) as err:
        load_trace(path)
    _one_line(err.value, path=str(path), line=3, field=field)


@pytest.mark.parametrize(("column", "value"), [("max_workers", "99999999999999999999"),
                                               ("epochs", "1e300"),
                                               ("minibatches", "1000000000000000000")])
def test_simulate_refuses_extreme_trace_in_one_line_and_exit_2(
        tmp_path: Path, column: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = _trace(tmp_path, column, value)
    out = tmp_path / "out"
    assert main(["simulate", "--trace", str(path), "--policies", "fifo", "--no-plots",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"psched: error: {path}:3: {column}: ") and "\n" not in err
    assert not out.exists()  # nothing half-written


def test_default_cluster_of_absurd_size_is_refused_before_building(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _trace(tmp_path, "max_workers", str(limits.MAX_WORKERS))
    rows = list(csv.reader(path.open()))
    for column, value in (("worker_gpu", "1024"), ("epochs", "1"), ("minibatches", "1")):
        rows[2][rows[0].index(column)] = value  # a short job, but 8192 x 1024 GPUs wide
    with path.open("w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)
    assert main(["simulate", "--trace", str(path), "--policies", "fifo", "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert "default cluster would have" in err and "give --cluster" in err
    assert err.count("\n") == 1


def test_a_job_needing_too_many_worker_slots_at_this_slot_length_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _trace(tmp_path, "epochs", "100000")
    assert main(["simulate", "--trace", str(path), "--policies", "fifo", "--no-plots",
                 "--slot-seconds", "0.001"]) == 2
    err = capsys.readouterr().err
    assert "worker-slots" in err and "use longer slots" in err and err.count("\n") == 1


FLAG_CASES = [
    ["--slots", "100000000000"],  # issue 16: ran silently for minutes
    ["--slots", "0"], ["--jobs", "10000000"], ["--seed", "-1"], ["--seed", "9" * 30],
    ["--slot-seconds", "1e-9"], ["--slot-seconds", "1e30"], ["--slot-seconds", "nan"],
    ["--load", "0"], ["--load", "1e9"], ["--max-window", "99999999999"],
    ["--price-estimate-factor", "inf"], ["--jobs", "9" * 5000],
]


@pytest.mark.parametrize("flag", FLAG_CASES, ids=lambda f: f"{f[0]}={f[1][:12]}")
def test_out_of_bounds_flag_is_one_line_and_exit_2(
        flag: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["simulate", "--trace", str(DEMO), *flag])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"argument {flag[0]}" in err and len(err) < 300


@pytest.mark.parametrize("flag", [["--seeds", "0,-1"], ["--loads", "1,0"],
                                  ["--slot-seconds", "0"], ["--max-window", "0"]])
def test_sweep_flags_are_bounded_too(flag: list[str],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["sweep", "--trace", str(DEMO), "--out", "x", *flag])
    assert stop.value.code == 2 and capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("argv", [
    ["serve", "--warm-processes", "1000000"], ["serve", "--slot-seconds", "0"],
    ["serve", "--horizon", "99999999999"], ["run", "t.csv", "--worker-cpus", "1e300"],
    ["ratio", "--slots", "0"], ["ratio", "--seed", "-3"],
    ["trace", "inspect", "t.csv", "--seed", "-1"], ["sweep", "--trace", "t", "--out", "o",
                                                    "--num-cpus", "100000"],
], ids=lambda a: " ".join(a)[:30])
def test_every_commands_numeric_flags_are_bounded(argv: list[str],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2 and capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize(("argv", "field"), [
    (["ratio", "--servers", "3,99999999"], "servers"),
    (["ratio", "--jobs", "100000", "--slots", "1000"], "jobs"),
])
def test_ratio_study_too_large_for_the_milp_is_refused(
        argv: list[str], field: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f": {field}: " in err


def test_mapped_public_trace_with_absurd_gpu_count_names_its_row(tmp_path: Path) -> None:
    path = tmp_path / "tiresias.csv"
    path.write_text("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
                    "0,1,0,606,vgg19,164,30\n1,900000,30,133,vgg11,147,23\n")
    from psched.traces import load_any

    with pytest.raises(InputError) as err:
        load_any(path)
    _one_line(err.value, path=str(path), line=3, field="max_workers")


def test_window_length_never_allocates_from_a_huge_cap() -> None:
    spec = dataclasses.replace(_good(), utility=Utility(kind="deadline", value=1, target=7))
    assert window_length(spec, 1, 10**15) == 8  # one 64k block, not 8 PB of durations
    flat = dataclasses.replace(spec, utility=Utility(kind="constant", value=1))
    assert window_length(flat, 1, 200_000) == 200_000  # several blocks: same answer


# -- job spec files and the service: the same validator, plus the workload's schema ---------
SPEC_CASES = [
    ("epochs = 1", "epochs = 1000000000", "epochs"),  # issue 17 #5: 50 s, 20.5 GB
    ("minibatches = 120", "minibatches = 1000000000000000000", "minibatches"),
    ("epochs = 1", "epochs = -5", "epochs"), ("partitions = 2", "partitions = 0", "partitions"),
    ("partitions = 2", "partitions = 99999999999999999999", "partitions"),
    ("partitions = 2", "partitions = " + "9" * 5000, "toml"),  # beyond Python's int parsing
    ('id = "digits-a"', 'id = "../../../../tmp/escape"', "id"),
    ('id = "digits-a"', 'id = "a/b"', "id"), ('id = "digits-a"', 'id = ""', "id"),
    ('dataset = "digits"', 'dataset = "imagenet"', "hparams.dataset"),
    ('dataset = "digits"', 'dataset = "digits"\nbogus = 1', "hparams.bogus"),
    ('dataset = "digits"', 'dataset = "digits"\ncopies = 1000000000', "hparams.copies"),
    ('dataset = "digits"', 'dataset = "digits"\nhidden = 3', "hparams.hidden"),  # softmax
    ('dataset = "digits"', 'dataset = "digits"\nnoise = "loud"', "hparams.noise"),
    ("tau_s = 0.01", "tau_s = 1e300", "tau_s"), ("grad_mb = 0.003", "grad_mb = 1e300", "grad_mb"),
    ("cpu = 1\nmemory_gb = 1\nbandwidth_gbps = 1\n\n[ps]",
     "cpu = 1e300\nmemory_gb = 1\nbandwidth_gbps = 1\n\n[ps]", "worker.cpu"),
    ("value = 10", "value = 1e300", "utility.value"),
    ('kind = "sigmoid"\nvalue = 10\ndecay = 0.5\ntarget = 4',
     "value = 10\ndeadline = 10000000000000000", "utility.deadline"),
    ('workload = "softmax"', 'workload = "softmax"\n[[jobs]]\nx = 1', "jobs"),
]


@pytest.mark.parametrize(("old", "new", "field"), SPEC_CASES,
                         ids=[f"{f}={n.split('=')[-1].strip()[:12]}" for _, n, f in SPEC_CASES])
def test_bad_job_spec_is_one_line_naming_file_line_and_field(old: str, new: str,
                                                             field: str) -> None:
    text = SPEC.replace(old, new, 1)
    assert text != SPEC
    with pytest.raises(InputError) as err:
        parse_jobspec(text, path="j.toml", default_id="j")
    assert err.value.field == field and err.value.path == "j.toml"
    if field == "toml":  # Python's parser says no line
        assert str(err.value).startswith("j.toml: toml: not valid TOML")
        return
    assert err.value.line is not None
    key = field.rsplit(".", 1)[-1] + " ="
    first = "[[jobs]]" if field == "jobs" else next(
        (ln for ln in new.splitlines() if ln.startswith(key)), new.splitlines()[0])
    target = next(i for i, ln in enumerate(text.splitlines(), 1) if ln.startswith(first))
    assert err.value.line == target
    _one_line(err.value, path="j.toml", line=target, field=field)


def test_a_50_mb_string_is_refused_by_size_and_echoed_shortened(tmp_path: Path) -> None:
    big = "x" * 50_000_000
    path = tmp_path / "big.toml"
    path.write_text(SPEC.replace('dataset = "digits"', f'dataset = "{big}"'))
    with pytest.raises(InputError) as err:
        load_jobspec(path)
    assert len(str(err.value)) < 200 and str(err.value).startswith(str(path))
    spec = dataclasses.replace(_good(), job_id=big)  # straight to the service: no file
    with pytest.raises(InputError) as err:
        check_submission(spec)
    assert len(str(err.value)) < 300 and "50000000 characters" in str(err.value)
    with pytest.raises(InputError) as err:
        check_submission(dataclasses.replace(_good(), hparams=json.dumps({"dataset": big})))
    assert len(str(err.value)) < 300


def test_a_million_array_tables_are_refused_by_size_with_the_file_named(tmp_path: Path) -> None:
    path = tmp_path / "many.toml"
    path.write_text(SPEC + "[[jobs]]\nx = 1\n" * 1_000_000)
    with pytest.raises(InputError, match=r"many\.toml: a job spec is at most"):
        load_jobspec(path)


SERVICE_CASES = [
    ("job_id", "../../../../tmp/escape", "job_id"), ("epochs", -5, "epochs"),
    ("max_workers", 0, "max_workers"), ("epochs", 1_000_000_000, "epochs"),
    ("minibatches", 10**18, "minibatches"), ("epochs", "5", "epochs"),
    ("epochs", True, "epochs"), ("tau_s", float("nan"), "tau_s"),
    ("hparams", '{"bogus": 1}', "hparams.bogus"), ("hparams", '{"dataset": "imagenet"}',
                                                   "hparams.dataset"),
    ("hparams", "[1]", "hparams"), ("workload", "os:system", "workload"),
    ("workload", "nope", "workload"),
    ("worker_demand", Resources(cpu=1, bandwidth_gbps=5), "worker_demand.bandwidth_gbps"),
    ("utility", Utility(kind="sigmoid", value=1e300), "utility.value"),
]


@pytest.mark.parametrize(("name", "value", "field"), SERVICE_CASES,
                         ids=[f"{n}={str(v)[:12]}" for n, v, _ in SERVICE_CASES])
def test_the_service_rechecks_a_job_that_bypassed_the_cli(name: str, value: object,
                                                          field: str) -> None:
    """A Ray client calls the service with any JobSpec, or any JSON: the same checks."""
    bad = dataclasses.replace(_good(), **{name: value})
    with pytest.raises(InputError) as err:
        check_submission(bad, slot_seconds=1.0)
    assert err.value.field == field and "\n" not in str(err.value)
    with pytest.raises(InputError) as err:
        submission_from_json(spec_to_json(bad), where=Where(path="a.toml", lines={field: 4}))
    assert str(err.value).startswith(f"a.toml:4: {field}: ")


@pytest.mark.parametrize("text", ["", "[]", "{}", '{"job_id": 1}', "x" * 2_000_000,
                                  json.dumps({"job_id": "a", "extra": 1}), "1e999", "null"])
def test_malformed_json_sent_to_the_service_is_an_input_error(text: str) -> None:
    with pytest.raises(InputError):
        submission_from_json(text)


def test_service_submit_rechecks_and_names_the_clients_file_and_line(tmp_path: Path) -> None:
    from psched.core.executor import SimulatedExecutor
    from psched.core.model import Cluster, Pool, Server
    from ray_cluster.service import SchedulerService, ServiceConfig

    cap = Resources(cpu=4, memory_gb=8, bandwidth_gbps=10)
    cluster = Cluster(servers=(Server(server_id="w", pool=Pool.WORKER, capacity=cap),
                               Server(server_id="p", pool=Pool.PS, capacity=cap)),
                      slot_seconds=1.0)
    svc = SchedulerService(tmp_path, config=ServiceConfig(
        slot_seconds=1.0, horizon=20, prices=(1.0, 0.1, 1.0, 0.1)), cluster=cluster,
        executor=SimulatedExecutor())
    try:
        escape = dataclasses.replace(_good(), job_id="../../escape")
        with pytest.raises(InputError, match="job_id"):
            svc.submit(escape)
        with pytest.raises(InputError, match="epochs"):
            svc.submit(dataclasses.replace(_good(), epochs=-5))
        with pytest.raises(InputError, match=r"hparams\.bogus"):
            svc.submit(dataclasses.replace(_good(), hparams='{"bogus": 1}'))
        assert not svc.journal.submissions()  # nothing journaled
        where = Where(path="jobs/a.toml", lines={"id": 2, "workload": 3},
                      names={"job_id": "id"})
        assert svc.submit(_good())["decided"]
        with pytest.raises(InputError) as err:
            svc.submit(_good())
        assert str(where.locate(err.value)).startswith("jobs/a.toml:2: id: ")
    finally:
        svc.close()
    assert not (tmp_path.parent / "escape").exists()


def test_checkpoint_folder_is_refused_outside_the_service_folder(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    root.mkdir()
    for bad in ("../../../../x/escape", "..", ".", "a/b", "/abs", "", "x" * 500):
        with pytest.raises(InputError):
            job_folder(root, bad)
        with pytest.raises(InputError):
            CheckpointStore(root, bad)
    assert CheckpointStore(root, "ok-1.a").folder == root / "ok-1.a"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


# -- psched submit: parsed with imports refused, one command all-or-nothing -----------------
def _submit_args(tmp_path: Path, texts: dict[str, str]) -> SimpleNamespace:
    files = []
    for name, text in texts.items():
        (tmp_path / name).write_text(text)
        files.append(str(tmp_path / name))
    return SimpleNamespace(jobs=files)


class _FakeClient:
    """``psched submit``'s client of a service that allows imports or not (no Ray, no door)."""

    door = None

    def __init__(self, allow_import: bool) -> None:
        self.allow_import = allow_import

    def actor(self) -> _FakeClient:
        return self

    def call(self, method: str, _http: Any, *_args: Any, **_kwargs: Any) -> dict[str, Any]:
        assert method == "status"
        return {"allow_import": self.allow_import}


def test_submit_refuses_a_duplicate_id_in_one_command_before_sending_any(
        tmp_path: Path) -> None:
    from psched.cli.jobs import _submissions

    args = _submit_args(tmp_path, {"a.toml": SPEC, "b.toml": SPEC})
    with pytest.raises(InputError) as err:
        _submissions(args, _FakeClient(False))
    assert str(err.value).startswith(f"{tmp_path / 'b.toml'}:2: id: ")
    assert "nothing submitted" in str(err.value)


@pytest.mark.parametrize("allow", [False, True])
def test_submit_parses_import_paths_only_if_the_service_allows_them(
        tmp_path: Path, allow: bool) -> None:
    from psched.cli.jobs import _submissions

    text = SPEC.replace('workload = "softmax"', 'workload = "mypkg.mod:Net"').replace(
        '[hparams]\ndataset = "digits"\n', "")
    args = _submit_args(tmp_path, {"imp.toml": text})
    if not allow:
        with pytest.raises(ImportRefused) as err:
            _submissions(args, _FakeClient(allow))
        assert str(err.value).startswith(f"{tmp_path / 'imp.toml'}:3: workload: ")
    else:
        parsed = _submissions(args, _FakeClient(allow))
        assert parsed[0][0].workload == "mypkg.mod:Net"


# -- the workloads' declared hyper-parameters --------------------------------------------------
@pytest.mark.parametrize(("name", "cls"), [("mlp", MLP), ("softmax", SoftmaxRegression)])
def test_hparams_schema_names_every_field_of_the_workload(name: str, cls: type) -> None:
    assert set(HPARAMS[name]) == {f.name for f in dataclasses.fields(cls)}


def test_ids_are_limited_to_a_safe_character_set() -> None:
    for ok in ("a", "A-1.b_c", "_x", "9" * 128):
        assert check_id(ok, Where()) == ok
    for bad in ("", ".x", "-x", "a/b", "a\\b", "a b", "é", "9" * 129, "..", "a\x00", 5):
        with pytest.raises(InputError):
            check_id(bad, Where())


def test_shown_values_are_short() -> None:
    assert len(shown("x" * 10**6)) < 100 and "1000000 characters" in shown("x" * 10**6)
    assert len(shown(10**300)) < 40 and len(shown(10**5000)) < 40


# -- never anything but InputError -------------------------------------------------------------
_CELLS = st.one_of(
    st.sampled_from(["1e400", "-1e400", "nan", "-0", "9" * 30, "9" * 5000, "1e18", "0.5", "",
                     "-5", "1e-320", "0x10", "1_000", " 3 ", "∞", "٣"]),
    st.integers(-(10**25), 10**25).map(str), st.floats().map(repr), st.text(max_size=8))


@HYPO
@given(data=st.data())
def test_malformed_trace_rows_never_crash(tmp_path: Path, data: st.DataObject) -> None:
    """Random cells in random columns: the load gives specs within bounds or an InputError."""
    rows = list(csv.reader(DEMO.open()))[:4]
    for _ in range(data.draw(st.integers(1, 4))):
        row = data.draw(st.integers(1, 3))
        col = data.draw(st.sampled_from(NATIVE_COLUMNS))
        rows[row][rows[0].index(col)] = data.draw(_CELLS)
    path = tmp_path / "h.csv"
    with path.open("w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)
    try:
        specs = load_trace(path)
    except InputError as err:
        assert "\n" not in str(err) and len(str(err)) < 600
        return
    for s in specs:
        assert validate_spec(s) == s
        assert s.max_workers <= limits.MAX_WORKERS and s.epochs <= limits.MAX_EPOCHS


_ANY = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                              st.text(max_size=5)),
                    lambda inner: st.one_of(st.lists(inner, max_size=3),
                                            st.dictionaries(st.text(max_size=6), inner,
                                                            max_size=3)), max_leaves=6)


@HYPO
@given(data=st.data())
def test_any_json_a_client_sends_gives_a_job_or_an_input_error(data: st.DataObject) -> None:
    fields = json.loads(spec_to_json(_good()))
    for _ in range(data.draw(st.integers(1, 3))):
        key = data.draw(st.sampled_from([*fields, "utility", "worker_demand", "other"]))
        fields[key] = data.draw(_ANY)
    try:
        text = json.dumps(fields)
    except ValueError:
        return
    try:
        spec = submission_from_json(text).spec
    except InputError as err:
        assert "\n" not in str(err)
        return
    assert check_submission(spec) == spec


@pytest.mark.parametrize("section", ["utility", "worker_demand", "ps_demand", "other"])
def test_a_key_with_a_line_break_gives_a_one_line_error(section: str) -> None:
    """An unknown key is echoed with its control characters escaped."""
    fields = json.loads(spec_to_json(_good()))
    fields[section] = {"a\nb\r": 1}
    with pytest.raises(InputError) as err:
        submission_from_json(json.dumps(fields))
    assert "\n" not in str(err.value) and "\r" not in str(err.value)
    if section != "other":
        assert "a\\nb\\r" in str(err.value)


# -- memory: refused before allocating, under a 2 GB address-space limit ------------------------
_UNDER_2GB = textwrap.dedent("""
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))
    sys.argv = ["psched", *sys.argv[1:]]
    from psched.cli.main import main
    sys.exit(main())
""")


@pytest.mark.parametrize("rows", [1, 100_000])
def test_extreme_trace_is_refused_before_allocating_under_2_gb(tmp_path: Path,
                                                               rows: int) -> None:
    """100k rows, the last with the values that took 23 GB: one line, exit 2, within 2 GB."""
    header, first = list(csv.reader(DEMO.open()))[:2]
    path = tmp_path / "big.csv"
    with path.open("w", newline="") as fh:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow(header)
        for i in range(rows):
            first[0] = f"j{i}"
            if i == rows - 1:
                first[header.index("max_workers")] = "99999999999999999999"
                first[header.index("epochs")] = "1e300"
            out.writerow(first)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", _UNDER_2GB, "simulate", "--trace", str(path),
                           "--policies", "fifo", "--no-plots"],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"psched: error: {path}:{rows + 1}: ")


# -- cluster files and psched run traces --------------------------------------------------------
CLUSTER = 'slot_seconds = 3600\n[[servers]]\npool = "worker"\ngpu = 8\ncpu = 64\n' \
          '[[servers]]\npool = "ps"\ncpu = 36\n'


@pytest.mark.parametrize(("old", "new", "field", "line"), [
    ("gpu = 8", "gpu = 1e300", "servers[0].gpu", 4),
    ("gpu = 8", "count = " + "9" * 100, "servers[0].count", 4),
    ("gpu = 8", "count = " + "9" * 5000, None, None),  # beyond Python's int parsing
    ("slot_seconds = 3600", "slot_seconds = 1e-9", "slot_seconds", 1),
    ('pool = "worker"', 'pool = "worker"\nid = "' + "w" * 300 + '"', "servers[0].id", 4),
])
def test_bad_cluster_file_is_one_line_naming_file_line_and_field(
        tmp_path: Path, old: str, new: str, field: str, line: int) -> None:
    from psched.traces.clusters import load_cluster

    path = tmp_path / "c.toml"
    path.write_text(CLUSTER.replace(old, new))
    with pytest.raises(InputError) as err:
        load_cluster(path)
    if field is None:
        assert str(err.value).startswith(f"{path}: bad TOML: ") and "\n" not in str(err.value)
    else:
        _one_line(err.value, path=str(path), line=line, field=field)


def test_psched_run_checks_every_jobs_hparams_before_ray_starts(tmp_path: Path) -> None:
    from psched.cli.service import _check_trace_jobs

    good = dataclasses.replace(_good(), tau_s=0.01)
    args = SimpleNamespace(trace="run.csv", allow_import=False, slot_seconds=2.0)
    _check_trace_jobs([good], args)
    bad = dataclasses.replace(good, job_id="b", hparams='{"dataset": "imagenet"}')
    with pytest.raises(InputError) as err:
        _check_trace_jobs([good, bad], args)
    assert str(err.value).startswith("run.csv: hparams.dataset: job 'b': expected one of")


@pytest.mark.ray
def test_a_ray_client_calling_the_service_directly_gets_one_line_errors(ray_session,
                                                                        tmp_path: Path) -> None:
    """Issue 17 #7 and #10 through the real actor: no ``<input>``, no folder outside --dir,
    the service still up."""
    import ray

    from psched.core.model import Cluster, Pool, Server
    from ray_cluster.service import (
        SERVICE_NAME,
        SERVICE_NAMESPACE,
        ServiceConfig,
        service_actor,
    )

    cap = Resources(cpu=2, memory_gb=8, bandwidth_gbps=10)
    cluster = Cluster(servers=(Server(server_id="m/w", pool=Pool.WORKER, capacity=cap),
                               Server(server_id="m/ps", pool=Pool.PS, capacity=cap)),
                      slot_seconds=5.0)
    head = ray_session.node_ids["head"]
    cfg = ServiceConfig(slot_seconds=5.0, horizon=10, prices=(1.0, 0.1, 1.0, 0.1))
    work = tmp_path / "svc"
    actor = service_actor().options(name=SERVICE_NAME, namespace=SERVICE_NAMESPACE,
                                    lifetime="detached").remote(
        str(work), cfg.to_json(), cluster.to_dict(), {"0": head, "1": head})
    where = {"path": "jobs/x.toml", "line": None, "lines": {"id": 2, "epochs": 4},
             "names": {"job_id": "id"}}
    try:
        good = spec_to_json(_good())
        cases = {
            json.dumps({**json.loads(good), "job_id": "../../../../escape"}): "jobs/x.toml:2: id:",
            json.dumps({**json.loads(good), "epochs": -5}): "jobs/x.toml:4: epochs:",
            json.dumps({**json.loads(good), "max_workers": 0}): "jobs/x.toml: max_workers:",
            json.dumps({**json.loads(good), "hparams": '{"bogus": 1}'}): "hparams.bogus",
            "not json": "jobs/x.toml: job: not JSON",
        }
        for text, start in cases.items():
            out = ray.get(actor.submit.remote(text, where=where))
            assert start in out["error"] and "\n" not in out["error"], out
        for arrival in (-1, 10**30, "3", 2.5):
            out = ray.get(actor.submit.remote(good, arrival=arrival, where=where))
            assert out["error"].startswith("jobs/x.toml: arrival: "), out
        assert ray.get(actor.submit.remote(good, where=where))["decided"]
        again = ray.get(actor.submit.remote(good, where=where))
        assert again["error"].startswith("jobs/x.toml:2: id: ")  # resubmitted: file and line
        assert ray.get(actor.ping.remote())
    finally:
        ray.get(actor.stop.remote())
        ray.kill(actor, no_restart=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["svc"]


@HYPO
@given(data=st.data())
def test_malformed_public_trace_rows_never_crash(tmp_path: Path, data: st.DataObject) -> None:
    """Tiresias rows with random cells, mapped to jobs: specs within bounds or an InputError."""
    from psched.traces import load_any

    cols = ("job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration",
            "interval")
    rows = [list(cols), ["0", "1", "0", "606", "vgg19", "164", "30"],
            ["1", "8", "30", "133", "vgg11", "147", "23"]]
    for _ in range(data.draw(st.integers(1, 3))):
        rows[data.draw(st.integers(1, 2))][data.draw(st.integers(0, 6))] = data.draw(_CELLS)
    path = tmp_path / "tiresias.csv"
    with path.open("w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)
    slot = data.draw(st.sampled_from([0.001, 1.0, 3600.0]))
    with warnings_in_one_line([path]):
        try:
            specs = load_any(path, "tiresias", slot_seconds=slot)
        except InputError as err:
            assert "\n" not in str(err) and len(str(err)) < 600
            return
    for s in specs:
        assert validate_spec(s, slot_seconds=slot) == s


CLUSTER04 = ROOT / "traces" / "elasticflow" / "augmented" / "cluster04.csv"


@pytest.mark.parametrize("slot_seconds", [3600.0, 60.0])
def test_the_bounds_admit_the_largest_public_trace_even_at_one_minute_slots(
        slot_seconds: float) -> None:
    """ElasticFlow cluster04 (15,802 jobs; up to 585,000 worker-slots at 60 s): nothing refused."""
    from psched.traces import load_any

    specs = load_any(CLUSTER04, slot_seconds=slot_seconds)
    assert len(specs) == 15_802
    for s in specs:
        limits.check_work(s, slot_seconds)
