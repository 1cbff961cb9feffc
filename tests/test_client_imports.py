"""The commands that talk to a running service import only what they need: ``psched submit``
parses and checks a job file, and ``status``, ``logs``, ``cancel`` and ``page`` build their
parser, without numpy, scipy, Ray or any policy (each would add a second or more to every
call on a loaded machine: ``benchmarks/results/page.md``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from service_jobs import job_toml

from psched.cli.main import COMMAND_MODULES, OWN_COMMANDS, build_parser
from ray_cluster.workloads.builtin import available_workloads
from ray_cluster.workloads.hparams import builtin_workloads

HEAVY = ("numpy", "scipy", "pandas", "ray", "matplotlib", "aiohttp", "psched.policies",
         "psched.offline.milp", "ray_cluster.workloads.builtin", "ray_cluster.service")

JOB = job_toml(job_id="light-1", minibatches=50)

#: What ``psched submit JOB.toml`` runs before its one HTTP request (``cmd_submit``).
_SUBMIT_PATH = """
import json, sys
from psched.cli.main import build_parser
args = build_parser("submit").parse_args(["submit", "--dir", sys.argv[1], sys.argv[2]])
from psched.cli.jobs import _submissions
from ray_cluster.workloads.jobspec import spec_to_json

class Door:
    door = ("http://127.0.0.1:1/", "token")

spec, where = _submissions(args, Door())[0]
spec_to_json(spec)
print(json.dumps(sorted(sys.modules)))
"""


def _loaded(code: str, *argv: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                         check=True, timeout=120)
    return list(json.loads(out.stdout.splitlines()[-1]))


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_submit_parses_and_checks_a_job_without_heavy_imports(tmp_path: Path) -> None:
    job = tmp_path / "job.toml"
    job.write_text(JOB)
    loaded = _loaded(_SUBMIT_PATH, str(tmp_path), str(job))
    assert "ray_cluster.workloads.jobspec" in loaded  # the job file was really read and checked
    assert _heavy(loaded) == []


@pytest.mark.parametrize("command", ["status", "logs", "cancel", "page", "stop"])
def test_client_command_parser_imports_nothing_heavy(command: str) -> None:
    code = ("import json, sys\nfrom psched.cli.main import build_parser\n"
            f"build_parser({command!r})\nprint(json.dumps(sorted(sys.modules)))")
    assert _heavy(_loaded(code)) == []


def test_each_command_parser_knows_its_command_and_the_full_one_all() -> None:
    everything = {c for names in COMMAND_MODULES.values() for c in names} | set(OWN_COMMANDS)
    full = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(full) == everything
    for command in everything:
        choices = build_parser(command)._subparsers._group_actions[0].choices  # type: ignore
        assert command in choices


def test_light_workload_names_are_the_registry() -> None:
    assert builtin_workloads() == available_workloads()
