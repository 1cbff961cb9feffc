"""The native trace format (load/write) and the trace horizon rule."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from psched.core.errors import InputError
from psched.core.horizon import MAX_HORIZON_SLOTS, trace_horizon
from psched.core.limits import ID_PATTERN
from psched.core.model import (
    RESOURCES,
    WINDOW_UTILITY_FLOOR,
    JobSpec,
    Resources,
    ceil_eps,
    resolve_job,
)
from psched.core.utility import UTILITY_KINDS, Utility
from psched.traces.native import NATIVE_COLUMNS, load_trace, write_trace

ROOT = Path(__file__).resolve().parents[1]
HYPO = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])

finite = st.floats(0.0, 1e6, allow_nan=False, allow_infinity=False)
positive = st.floats(1e-3, 1e3, allow_nan=False, allow_infinity=False)
demand = st.floats(0.0, 1000.0, allow_nan=False, allow_infinity=False)  # within MAX_DEMAND


@st.composite
def specs_strategy(draw: st.DrawFn, job_id: str) -> JobSpec:
    worker_bw = draw(positive)
    ps_bw = worker_bw + draw(demand)
    worker = Resources(**{r: draw(demand) for r in RESOURCES[:-1]}, bandwidth_gbps=worker_bw)
    ps = Resources(**{r: draw(demand) for r in RESOURCES[:-1]}, bandwidth_gbps=ps_bw)
    hparams = draw(st.one_of(st.just(""), st.dictionaries(
        st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=5)), max_size=3,
    ).map(json.dumps)))
    return JobSpec(
        job_id=job_id, arrival=draw(st.integers(0, 500)), epochs=draw(st.integers(1, 300)),
        max_workers=draw(st.integers(1, 100)), minibatches=draw(st.integers(1, 100)),
        tau_s=draw(positive), grad_mb=draw(finite), worker_demand=worker, ps_demand=ps,
        utility=Utility(kind=draw(st.sampled_from(UTILITY_KINDS)), value=draw(finite),
                        decay=draw(finite), target=draw(finite)),
        tau_includes_comm=draw(st.booleans()),
        workload=draw(st.sampled_from(["", "mlp", "pkg.mod:Model", 'odd, "quoted" name'])),
        hparams=hparams,
    )


ids = st.from_regex(ID_PATTERN, fullmatch=True).filter(lambda s: len(s) <= 12)


@st.composite
def traces(draw: st.DrawFn) -> list[JobSpec]:
    names = draw(st.lists(ids, min_size=0, max_size=6, unique=True))
    names = [n for n in names if n == n.strip()]
    return [draw(specs_strategy(n)) for n in names]


@HYPO
@given(specs=traces())
def test_load_of_write_gives_back_equal_specs_sorted_by_arrival(
    tmp_path: Path, specs: list[JobSpec]
) -> None:
    path = tmp_path / "t.csv"
    write_trace(path, specs)
    assert load_trace(path) == sorted(specs, key=lambda s: s.arrival)


def test_sorting_by_arrival_is_stable(tmp_path: Path) -> None:
    base = load_trace(ROOT / "traces" / "demo_sim.csv")[0]
    from dataclasses import replace
    specs = [replace(base, job_id=f"x{i}", arrival=a) for i, a in enumerate([5, 1, 5, 0, 1])]
    write_trace(tmp_path / "t.csv", specs)
    assert [s.job_id for s in load_trace(tmp_path / "t.csv")] == ["x3", "x1", "x4", "x0", "x2"]


def test_write_is_atomic_and_leaves_no_temp_file(tmp_path: Path) -> None:
    good = load_trace(ROOT / "traces" / "demo_sim.csv")
    path = tmp_path / "t.csv"
    write_trace(path, good)
    before = path.read_bytes()
    from dataclasses import replace
    with pytest.raises(ValueError, match="read back"):
        write_trace(path, [good[0], replace(good[1], job_id=" padded ")])
    assert path.read_bytes() == before
    with pytest.raises(ValueError, match="read back"):
        write_trace(path, [replace(good[0], workload=" mlp")])
    b_above_big_b = replace(good[0], worker_demand=replace(good[0].worker_demand,
                                                           bandwidth_gbps=1000.0))
    with pytest.raises(InputError, match="worker_bandwidth_gbps"):
        write_trace(path, [b_above_big_b])
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]


def test_demo_trace_loads_and_matches_its_recipe() -> None:
    from psched.traces.synth import oasis_paper_jobs
    specs, _ = oasis_paper_jobs(60, seed=0, slots=60)
    assert load_trace(ROOT / "traces" / "demo_sim.csv") == specs


# -- malformed input --------------------------------------------------------------------------

def _valid_rows() -> tuple[list[str], list[list[str]]]:
    specs = load_trace(ROOT / "traces" / "demo_sim.csv")[:2]
    header = list(NATIVE_COLUMNS)
    from psched.traces.native import _format, _row_values
    return header, [[_format(v) for v in _row_values(s)] for s in specs]


def _file(tmp_path: Path, header: list[str], rows: list[list[str]]) -> Path:
    path = tmp_path / "jobs.csv"
    with path.open("w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows([header, *rows])
    return path


# (column to set in the second job row, value, field named in the error, line)
CELL_CASES = [
    ("epochs", "abc", "epochs"), ("epochs", "0", "epochs"), ("max_workers", "-1", "max_workers"),
    ("minibatches", "0", "minibatches"), ("arrival", "1.5", "arrival"),
    ("arrival", "-1", "arrival"), ("arrival", "", "arrival"), ("tau_s", "nan", "tau_s"),
    ("grad_mb", "inf", "grad_mb"), ("tau_s", "-1", "tau_s"), ("grad_mb", "-0.5", "grad_mb"),
    ("worker_bandwidth_gbps", "0", "worker_bandwidth_gbps"),
    ("ps_bandwidth_gbps", "-2", "ps_bandwidth_gbps"),
    ("worker_bandwidth_gbps", "1000", "worker_bandwidth_gbps"),  # b > B
    ("worker_gpu", "-1", "worker_gpu"), ("ps_cpu", "x", "ps_cpu"),
    ("utility", "cubic", "utility"), ("value", "-3", "value"), ("decay", "NaN", "decay"),
    ("target", "1e999", "target"), ("hparams", "{bad json", "hparams"),
    ("hparams", "[1, 2]", "hparams"), ("tau_includes_comm", "maybe", "tau_includes_comm"),
    ("job_id", "", "job_id"), ("epochs", "9" * 400, "epochs"),
    ("tau_s", "1e308", "tau_s"), ("minibatches", "1e12", "epochs"),  # work beyond bounds
]


@pytest.mark.parametrize(("column", "value", "field"), CELL_CASES,
                         ids=[f"{c}={v[:10]}" for c, v, _ in CELL_CASES])
def test_bad_cell_names_file_line_and_field(tmp_path: Path, column: str, value: str,
                                            field: str) -> None:
    header, rows = _valid_rows()
    rows[1][header.index(column)] = value
    with pytest.raises(InputError) as err:
        load_trace(_file(tmp_path, header, rows))
    assert err.value.line == 3 and err.value.field == field
    assert str(err.value).startswith(f"{tmp_path / 'jobs.csv'}:3: {field}: ")


def test_tau_and_grad_both_zero_is_rejected(tmp_path: Path) -> None:
    header, rows = _valid_rows()
    rows[0][header.index("tau_s")] = "0"
    rows[0][header.index("grad_mb")] = "0.0"
    with pytest.raises(InputError, match=r"jobs.csv:2: tau_s: "):
        load_trace(_file(tmp_path, header, rows))


def test_duplicate_job_id_names_both_lines(tmp_path: Path) -> None:
    header, rows = _valid_rows()
    rows[1][0] = rows[0][0]
    with pytest.raises(InputError, match=r"jobs.csv:3: job_id: duplicate .*line 2"):
        load_trace(_file(tmp_path, header, rows))


@pytest.mark.parametrize(("edit", "line", "field"), [
    ("drop:epochs", 1, "epochs"), ("add:colour", 1, "colour"), ("dup:grad_mb", 1, "grad_mb"),
    ("ragged", 3, None), ("headerless", 1, None),
])
def test_bad_structure_names_file_and_line(tmp_path: Path, edit: str, line: int,
                                           field: str | None) -> None:
    header, rows = _valid_rows()
    action, _, name = edit.partition(":")
    if action == "drop":
        i = header.index(name)
        header, rows = header[:i] + header[i + 1:], [r[:i] + r[i + 1:] for r in rows]
    elif action == "add":
        header, rows = [*header, name], [[*r, "1"] for r in rows]
    elif action == "dup":
        header, rows = [*header, name], [[*r, r[header.index(name)]] for r in rows]
    elif action == "ragged":
        rows[1] = rows[1][:-3]
    else:
        header = rows.pop(0)
    with pytest.raises(InputError) as err:
        load_trace(_file(tmp_path, header, rows))
    assert err.value.line == line and "jobs.csv" in str(err.value)
    if field is not None:
        assert err.value.field == field


@pytest.mark.parametrize("content", [b"", b"\n\n  \n", b"job_id,arrival\xff\xfe\n"])
def test_empty_or_binary_file_is_an_input_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "jobs.csv"
    path.write_bytes(content)
    with pytest.raises(InputError, match=r"jobs\.csv"):
        load_trace(path)


def test_missing_file_and_directory_are_input_errors(tmp_path: Path) -> None:
    for path in (tmp_path / "nope.csv", tmp_path):
        with pytest.raises(InputError, match=re.escape(str(path))):
            load_trace(path)


def test_optional_columns_default_to_zero_false_and_empty(tmp_path: Path) -> None:
    header, rows = _valid_rows()
    keep = [i for i, c in enumerate(header)
            if c in ("job_id", "arrival", "epochs", "max_workers", "minibatches", "tau_s",
                     "grad_mb", "worker_bandwidth_gbps", "ps_bandwidth_gbps", "utility",
                     "value", "decay", "target")]
    spec = load_trace(_file(tmp_path, [header[i] for i in keep],
                            [[r[i] for i in keep] for r in rows]))[0]
    assert spec.worker_demand.gpu == spec.ps_demand.cpu == 0.0
    assert not spec.tau_includes_comm and spec.workload == spec.hparams == ""


CORRUPTIONS = st.sampled_from(["truncate", "cell", "drop_line", "shuffle_header", "bytes"])


@HYPO
@given(kind=CORRUPTIONS, where=st.integers(0, 10_000), junk=st.one_of(
    st.text(max_size=12), st.sampled_from(["1e400", "-0", "nan", "9" * 30, '"', "\x00", ","])))
def test_corrupted_files_give_input_error_or_valid_specs(tmp_path: Path, kind: str, where: int,
                                                         junk: str) -> None:
    text = (ROOT / "traces" / "demo_sim.csv").read_text()
    lines = text.splitlines()[:6]
    if kind == "truncate":
        body = "\n".join(lines)[: where % len("\n".join(lines))]
    elif kind == "cell":
        r = 1 + where % (len(lines) - 1)
        cells = lines[r].split(",")
        cells[where % len(cells)] = junk
        body = "\n".join([*lines[:r], ",".join(cells), *lines[r + 1:]])
    elif kind == "drop_line":
        body = "\n".join(lines[: where % 6] + lines[where % 6 + 1:])
    elif kind == "shuffle_header":
        cols = lines[0].split(",")
        k = where % len(cols)
        cols[0], cols[k] = cols[k], cols[0]
        body = "\n".join([",".join(cols), *lines[1:]])
    else:
        raw = "\n".join(lines).encode()
        cut = where % len(raw)
        body_bytes = raw[:cut] + junk.encode("utf-8", "surrogatepass") + b"\xc3" + raw[cut:]
        (tmp_path / "c.csv").write_bytes(body_bytes)
        body = None
    if body is not None:
        (tmp_path / "c.csv").write_text(body)
    try:
        specs = load_trace(tmp_path / "c.csv")
    except InputError as err:
        assert str(err).startswith(str(tmp_path / "c.csv"))
    else:
        assert all(isinstance(s, JobSpec) for s in specs)


# -- horizon ----------------------------------------------------------------------------------

def _job(job_id: str, arrival: int, utility: Utility, n: int = 4, fastest: int = 3) -> JobSpec:
    return JobSpec(job_id=job_id, arrival=arrival, epochs=1, max_workers=n, minibatches=1,
                   tau_s=fastest * 3600.0, grad_mb=0.0, tau_includes_comm=True,
                   worker_demand=Resources(gpu=1, bandwidth_gbps=1),
                   ps_demand=Resources(cpu=1, bandwidth_gbps=1), utility=utility)


def _literal_window(spec: JobSpec, max_window: int | None) -> int:
    fastest = ceil_eps(spec.work(3600.0) / spec.max_workers)
    cap = max_window if max_window is not None else max(10 * fastest, 50)
    d = 1
    while d < cap and spec.utility(d) >= WINDOW_UTILITY_FLOOR * spec.utility(1):
        d += 1
    return d


@pytest.mark.parametrize("max_window", [None, 7, 400])
def test_horizon_is_max_arrival_plus_old_capped_window(max_window: int | None) -> None:
    specs = [
        _job("deadline", 4, Utility(kind="deadline", value=5, target=5)),
        _job("constant", 2, Utility(kind="constant", value=1), fastest=8),
        _job("critical", 30, Utility(kind="sigmoid", value=50, decay=5, target=6)),
        _job("linear", 11, Utility(kind="linear", value=10, decay=1, target=3)),
    ]
    horizon = trace_horizon(specs, 3600.0, max_window)
    assert horizon == max(s.arrival + _literal_window(s, max_window) for s in specs)
    for s in specs:  # no window is cut short of the old cap by the horizon
        job = resolve_job(s, 3600.0, horizon, max_window)
        assert job.window >= _literal_window(s, max_window) and job.last_slot <= horizon - 1


@pytest.mark.parametrize("horizon", [20, 80, 500])
def test_window_ends_at_utility_floor_or_horizon_never_at_old_cap(horizon: int) -> None:
    """oasis.md section 7: a window ends where utility < 1e-6 of its maximum or at the horizon."""
    specs = [
        _job("deadline", 4, Utility(kind="deadline", value=5, target=5)),
        _job("constant", 2, Utility(kind="constant", value=1), fastest=1),
        _job("critical", 3, Utility(kind="sigmoid", value=50, decay=5, target=6)),
        _job("linear", 11, Utility(kind="linear", value=10, decay=1, target=3)),
    ]
    for s in specs:
        job = resolve_job(s, 3600.0, horizon)
        d = 1
        while d < horizon - s.arrival and s.utility(d) >= WINDOW_UTILITY_FLOOR * s.utility(1):
            d += 1
        assert job.window == min(d, horizon - s.arrival)
    flat = resolve_job(specs[1], 3600.0, horizon)
    assert flat.window == horizon - 2  # a flat-utility job may run until the horizon


def test_horizon_of_deadline_job_ends_at_first_zero_utility_slot() -> None:
    spec = _job("d", 10, Utility(kind="deadline", value=5, target=5))
    assert trace_horizon([spec], 3600.0) == 10 + 6


def test_horizon_of_empty_trace_is_zero() -> None:
    assert trace_horizon([], 3600.0) == 0


def test_horizon_refuses_absurd_windows_instead_of_exhausting_memory() -> None:
    huge = _job("huge", 0, Utility(kind="constant", value=1), n=1, fastest=10**9)
    with pytest.raises(InputError, match="huge"):
        trace_horizon([huge], 3600.0)
    late = _job("late", MAX_HORIZON_SLOTS + 5, Utility(kind="constant", value=1))
    with pytest.raises(InputError, match="late"):
        trace_horizon([late], 3600.0)
    assert not math.isnan(trace_horizon([huge], 3600.0, max_window=20))


def test_bom_crlf_and_multiline_cells_keep_physical_line_numbers(tmp_path: Path) -> None:
    header, rows = _valid_rows()
    rows[0][header.index("hparams")] = '{"lr":\n 0.1,\n "note": "a, b"}'
    rows[1][header.index("epochs")] = "zero"
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerows([header, *rows])
    path = tmp_path / "jobs.csv"
    path.write_bytes(b"\xef\xbb\xbf" + buf.getvalue().encode())
    with pytest.raises(InputError) as err:
        load_trace(path)
    assert err.value.line == 5 and err.value.field == "epochs"  # row 1 spans lines 2-4
    rows[1][header.index("epochs")] = "7"
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerows([header, *rows])
    path.write_bytes(b"\xef\xbb\xbf" + buf.getvalue().encode())
    specs = load_trace(path)
    assert json.loads(specs[0].hparams) == {"lr": 0.1, "note": "a, b"} and specs[1].epochs == 7
