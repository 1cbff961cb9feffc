"""Job spec files (TOML): parsed as data, every problem one line naming file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from psched.core.errors import InputError
from ray_cluster.workloads.jobspec import TAU_UNKNOWN, load_jobspec, parse_jobspec

EXAMPLES = sorted((Path(__file__).parent.parent / "examples" / "jobs").glob("*.toml"))

GOOD = """\
workload = "softmax"
epochs = 2
partitions = 3
minibatches = 50
grad_mb = 0.1

[hparams]
dataset = "digits"

[worker]
gpu = 1
cpu = 2
bandwidth_gbps = 1

[ps]
cpu = 1
bandwidth_gbps = 4

[utility]
kind = "sigmoid"
value = 5
decay = 0.5
target = 3
"""


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_job_specs_load(path):
    spec = load_jobspec(path)
    assert spec.job_id == path.stem
    assert spec.workload and spec.tau_s > 0 and spec.tau_includes_comm


def test_a_spec_without_speed_figures_is_marked_for_profiling():
    spec = parse_jobspec(GOOD, path="j.toml", default_id="j")
    assert spec.tau_s == TAU_UNKNOWN
    assert (spec.epochs, spec.max_workers, spec.minibatches) == (2, 3, 50)
    assert spec.worker_demand.gpu == 1 and spec.ps_demand.bandwidth_gbps == 4
    assert spec.ps_ratio == pytest.approx(0.25)
    assert spec.hparams == '{"dataset": "digits"}'
    assert spec.job_id == "j"


def test_a_deadline_becomes_a_deadline_utility():
    text = GOOD.replace('kind = "sigmoid"\nvalue = 5\ndecay = 0.5\ntarget = 3',
                        "value = 7\ndeadline = 4")
    u = parse_jobspec(text).utility
    assert (u.kind, u.value, u.target) == ("deadline", 7.0, 4.0)
    assert u(4) == 7.0 and u(5) == 0.0


@pytest.mark.parametrize(("old", "new", "line", "field"), [
    ("epochs = 2", "epochs = 0", 2, "epochs"),
    ("epochs = 2", 'epochs = "two"', 2, "epochs"),
    ("partitions = 3\n", "", None, "partitions"),
    ("gpu = 1", "gpu = -1", 11, "worker.gpu"),
    ("gpu = 1", "gpus = 1", 11, "worker.gpus"),
    ("cpu = 1\nbandwidth_gbps = 4", "cpu = 1\nbandwidth_gbps = 0.5", 13,
     "worker.bandwidth_gbps"),  # b > B: named at b, as in the native trace format
    ('kind = "sigmoid"', 'kind = "cubic"', 20, "utility.kind"),
    ('workload = "softmax"', 'workload = "resnet9000"', 1, "workload"),
    ('workload = "softmax"', 'workload = "os:system"', 1, "workload"),
    ("grad_mb = 0.1", "grad_mb = 0.1\ncolour = 1", 6, "colour"),
    ("epochs = 2", "epochs = = 2", 2, "toml"),
])
def test_bad_specs_fail_in_one_line_naming_line_and_field(old, new, line, field):
    text = GOOD.replace(old, new)
    assert text != GOOD
    with pytest.raises(InputError) as err:
        parse_jobspec(text, path="bad.toml")
    e = err.value
    assert e.path == "bad.toml" and e.field == field
    assert e.line == line
    assert "\n" not in str(e) and str(e).startswith("bad.toml")


def test_import_paths_only_when_the_operator_allows():
    text = GOOD.replace('workload = "softmax"', 'workload = "mypkg.models:Net"')
    with pytest.raises(InputError, match="refused"):
        parse_jobspec(text)
    assert parse_jobspec(text, allow_import=True).workload == "mypkg.models:Net"


def test_a_spec_is_data_never_evaluated(tmp_path):
    # a string that would run code if evaluated stays a string
    text = GOOD.replace('dataset = "digits"', 'dataset = "__import__(\'os\').system(\'x\')"')
    with pytest.raises(InputError, match=r"hparams\.dataset: expected one of .*__import__"):
        parse_jobspec(text)  # refused by the workload's schema, shown as the string it is
    with pytest.raises(InputError, match="cannot read"):
        load_jobspec(tmp_path / "missing.toml")


def test_a_spec_file_with_a_utf8_byte_order_mark_loads_like_one_without(tmp_path):
    plain, marked = tmp_path / "plain.toml", tmp_path / "marked.toml"
    plain.write_text(GOOD, encoding="utf-8")
    marked.write_bytes(b"\xef\xbb\xbf" + GOOD.encode("utf-8"))
    import dataclasses

    got = dataclasses.replace(load_jobspec(marked), job_id="plain")
    assert got == load_jobspec(plain)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_an_example_job_lasts_long_enough_to_watch_and_cancel(path):
    """At the documented 30-s slots (docs/service.md) every example needs at least 2 worker-
    slots; digits-a and digits-b (the one the docs cancel) need 3 slots or more even on all
    their workers, so ``psched cancel digits-b`` finds it active."""
    spec = load_jobspec(path)
    work = spec.work(30.0)
    assert work >= 2
    if spec.job_id in ("digits-a", "digits-b"):
        assert work / spec.max_workers >= 3


def test_the_reference_documents_every_field_and_its_example_parses():
    """docs/jobspec.md: its example (with ``worker.gpu``) is a valid spec, and its table
    names every field the parser knows."""
    import re

    from ray_cluster.workloads import jobspec

    doc = (Path(__file__).parent.parent / "docs" / "jobspec.md").read_text()
    example = re.search(r"```toml\n(.*?)```", doc, re.S).group(1)
    spec = parse_jobspec(example, path="docs/jobspec.md")
    assert spec.worker_demand.gpu == 1 and spec.workload == "torch-cnn"
    documented = set(re.findall(r"^\| `\[?([a-z_]+)\]?` \|", doc, re.M))
    assert documented >= jobspec._TOP, sorted(jobspec._TOP - documented)
