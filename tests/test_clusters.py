"""Cluster files (TOML / JSON) and the default cluster for a trace."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from psched.core.errors import InputError
from psched.core.horizon import trace_horizon
from psched.core.model import Cluster, JobSpec, Pool, Resources, Server
from psched.core.utility import Utility
from psched.traces.clusters import (
    cluster_toml_text,
    default_cluster_for_trace,
    load_cluster,
    write_cluster_json,
)
from psched.traces.native import load_trace
from psched.traces.synth import fig5_instance, oasis_paper_cluster

ROOT = Path(__file__).resolve().parents[1]
CLUSTERS = ROOT / "traces" / "clusters"


def test_shipped_oasis_paper_file_is_the_seed_0_scenario_cluster() -> None:
    assert load_cluster(CLUSTERS / "oasis_paper.toml") == oasis_paper_cluster(seed=0)


def test_tiny_example_expands_count_and_reads_capacity_tables() -> None:
    c = load_cluster(CLUSTERS / "tiny.toml")
    assert [s.server_id for s in c.servers] == ["w00", "w01", "ps-0"]
    assert c.slot_seconds == 600.0 and c.servers[1].capacity.gpu == 4
    assert c.servers[2].pool is Pool.PS and c.servers[2].capacity.bandwidth_gbps == 25


@pytest.mark.parametrize("seed", [0, 3])
def test_cluster_json_output_reads_back_equal(tmp_path: Path, seed: int) -> None:
    _, cluster = fig5_instance(7, seed=seed)
    write_cluster_json(tmp_path / "cluster.json", cluster)
    assert load_cluster(tmp_path / "cluster.json") == cluster
    assert [p.name for p in tmp_path.iterdir()] == ["cluster.json"]
    (tmp_path / "c.toml").write_text(cluster_toml_text(cluster, header="x\ny"))
    assert load_cluster(tmp_path / "c.toml") == cluster


def test_flat_json_schema_with_count_and_ids(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"servers": [
        {"id": "gpu", "pool": "worker", "count": 3, "gpu": 2, "bandwidth_gbps": 10},
        {"pool": "ps", "cpu": 8, "bandwidth_gbps": 10},
    ]}))
    c = load_cluster(path)
    assert [s.server_id for s in c.servers] == ["gpu-0", "gpu-1", "gpu-2", "p00"]
    assert c.slot_seconds == 3600.0 and c.servers[0].capacity == Resources(gpu=2,
                                                                           bandwidth_gbps=10)


TOML_OK = """slot_seconds = 3600
[[servers]]
pool = "worker"
gpu = 4
cpu = 8
[[servers]]
id = "p"
pool = "ps"
cpu = 8
"""

# (replace this, by this, field in the error, line of the error)
TOML_CASES = [
    ('pool = "ps"', 'pool = "gpu-pool"', "servers[1].pool", 8),
    ("gpu = 4", "gpu = -4", "servers[0].gpu", 4),
    ("gpu = 4", "gpu = nan", "servers[0].gpu", 4),
    ("gpu = 4", 'gpu = "four"', "servers[0].gpu", 4),
    ("cpu = 8\n[[servers]]", "cpu = 8\ncount = 0\n[[servers]]", "servers[0].count", 6),
    ("gpu = 4", "gpus = 4", "servers[0].gpus", 4),
    ('id = "p"', 'id = "w00"', "servers[1].id", 7),
    ('pool = "ps"', 'pool = "worker"', "servers", None),
    ('pool = "worker"', 'pool = "ps"', "servers", None),
    ("slot_seconds = 3600", "slot_seconds = -1", "slot_seconds", 1),
    ("slot_seconds = 3600", "slot_seconds = 3600\nflavour = 1", "flavour", None),
    ("gpu = 4", "gpu = 4\n[servers.capacity]\ngpu = 2", "servers[0].gpu", 4),
]


@pytest.mark.parametrize(("old", "new", "field", "line"), TOML_CASES,
                         ids=[c[1].replace("\n", " ") for c in TOML_CASES])
def test_bad_toml_cluster_names_file_field_and_line(tmp_path: Path, old: str, new: str,
                                                    field: str, line: int | None) -> None:
    path = tmp_path / "c.toml"
    path.write_text(TOML_OK.replace(old, new, 1))
    with pytest.raises(InputError) as err:
        load_cluster(path)
    assert err.value.field == field and err.value.path == str(path)
    if line is not None:
        assert err.value.line == line and f"c.toml:{line}: {field}: " in str(err.value)


def test_bad_json_capacity_names_line_of_the_key(tmp_path: Path) -> None:
    cluster = Cluster(servers=(
        Server(server_id="a", pool=Pool.WORKER, capacity=Resources(gpu=1)),
        Server(server_id="b", pool=Pool.PS, capacity=Resources(cpu=1)),
    ))
    text = json.dumps(cluster.to_dict(), indent=2).replace('"cpu": 1.0', '"cpu": -1.0')
    path = tmp_path / "c.json"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_cluster(path)
    expected = 1 + text.splitlines().index('        "cpu": -1.0,')
    assert err.value.field == "servers[1].cpu" and err.value.line == expected


@pytest.mark.parametrize(("name", "text", "line"), [
    ("c.toml", 'slot_seconds = 3600\n[[servers]]\npool = "worker\n', 3),
    ("c.toml", "a = 1\na = 2\n", 2),
    ("c.json", '{\n  "servers": [\n    {"pool": "worker",}\n  ]\n}\n', 3),
    ("c.json", "", 1),
])
def test_syntax_errors_carry_the_parser_line(tmp_path: Path, name: str, text: str,
                                             line: int) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_cluster(path)
    assert err.value.line == line and str(err.value).startswith(f"{path}:{line}: ")


@pytest.mark.parametrize("content", ['{"servers": []}', "[1, 2]", '{"servers": "w0"}',
                                     '{"servers": [1]}', "servers = 3\n"])
def test_structurally_wrong_files_are_input_errors(tmp_path: Path, content: str) -> None:
    path = tmp_path / ("c.json" if content[0] in "[{" else "c.toml")
    path.write_text(content)
    with pytest.raises(InputError, match="servers"):
        load_cluster(path)


def test_unreadable_or_binary_cluster_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nope\.toml"):
        load_cluster(tmp_path / "nope.toml")
    (tmp_path / "b.toml").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InputError, match=r"b\.toml"):
        load_cluster(tmp_path / "b.toml")


# -- default cluster --------------------------------------------------------------------------

def _spec(job_id: str, arrival: int, gpu: float, n: int, fastest: int) -> JobSpec:
    return JobSpec(job_id=job_id, arrival=arrival, epochs=1, max_workers=n, minibatches=1,
                   tau_s=fastest * 3600.0, grad_mb=0.0, tau_includes_comm=True,
                   worker_demand=Resources(gpu=gpu, bandwidth_gbps=1),
                   ps_demand=Resources(cpu=1, bandwidth_gbps=1),
                   utility=Utility(kind="deadline", value=1, target=20))


def test_default_cluster_follows_mean_gpu_demand_over_the_span() -> None:
    # windows end at duration 21 (deadline 20): T = 30 + 21 = 51, span = 51 - 10 = 41 slots
    specs = [_spec("a", 10, 2, 50, 10), _spec("b", 30, 1, 100, 5)]
    assert trace_horizon(specs, 3600.0) == 51
    demand = 2 * 500 + 1 * 500  # GPU-slots
    for load in (0.8, 0.5, 0.1):
        c = default_cluster_for_trace(specs, slot_seconds=3600.0, load=load)
        expected = math.ceil(max(100 / 8, demand / 41 / (8 * load)))
        assert len(c.indices(Pool.WORKER)) == len(c.indices(Pool.PS)) == expected
        assert c.servers[0].capacity == Resources(gpu=8, cpu=64, memory_gb=488, storage_gb=1000,
                                                  bandwidth_gbps=50)
        assert c.servers[-1].capacity == Resources(cpu=36, memory_gb=60, storage_gb=1000,
                                                   bandwidth_gbps=50)


def test_default_cluster_is_at_least_the_largest_job() -> None:
    specs = [_spec("big", 0, 4, 30, 1)]  # 120 GPUs at full width, little work
    c = default_cluster_for_trace(specs, slot_seconds=3600.0)
    assert len(c.indices(Pool.WORKER)) == 15


def test_default_cluster_for_gpu_free_trace_has_one_server_per_pool() -> None:
    specs = [_spec("cpu-only", 0, 0, 4, 2)]
    c = default_cluster_for_trace(specs, slot_seconds=600.0)
    assert len(c.servers) == 2 and c.slot_seconds == 600.0


def test_default_cluster_for_demo_trace_scales_with_load() -> None:
    specs = load_trace(ROOT / "traces" / "demo_sim.csv")
    small = default_cluster_for_trace(specs, slot_seconds=3600.0, load=1.6)
    big = default_cluster_for_trace(specs, slot_seconds=3600.0, load=0.4)
    assert len(big.servers) > len(small.servers) >= 2
    assert len({s.server_id for s in big.servers}) == len(big.servers)


@pytest.mark.parametrize(("specs", "load", "field"), [
    ([], 0.8, "trace"), ([_spec("a", 0, 1, 1, 1)], 0.0, "load"),
    ([_spec("a", 0, 1, 1, 1)], float("nan"), "load"),
])
def test_default_cluster_bad_arguments(specs: list[JobSpec], load: float, field: str) -> None:
    with pytest.raises(InputError) as err:
        default_cluster_for_trace(specs, slot_seconds=3600.0, load=load)
    assert err.value.field == field


@pytest.mark.parametrize(("server", "field"), [
    ('{"pool": "worker", "gpu": 1' + "0" * 400 + "}", "servers[0].gpu"),
    ('{"pool": "worker", "gpu": 1e999}', "servers[0].gpu"),
    ('{"pool": "worker", "gpu": NaN}', "servers[0].gpu"),
    ('{"pool": "worker", "count": 1000000000000}', "servers[0].count"),
    ('{"pool": "worker", "count": true}', "servers[0].count"),
    ('{"pool": "worker", "id": 7}', "servers[0].id"),
    ('{"pool": "worker", "capacity": 5}', "servers[0].capacity"),
    ('{"pool": "worker", "capacity": {"tpu": 5}}', "servers[0].capacity.tpu"),
])
def test_json_values_that_are_not_capacities_are_refused(tmp_path: Path, server: str,
                                                         field: str) -> None:
    path = tmp_path / "c.json"
    path.write_text('{"servers": [' + server + ', {"pool": "ps"}]}')
    with pytest.raises(InputError) as err:
        load_cluster(path)
    assert err.value.field == field and err.value.line == 1
