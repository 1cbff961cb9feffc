"""The ``psched`` commands shown in README.md, docs/ and traces/README.md run.

Every line of a ```bash block that starts with ``psched`` is collected. A command is *cheap*,
and is run here (in a fresh folder, repository paths made absolute), when it is one of:

- ``psched --version`` or any ``psched ... --help``;
- ``psched trace synth`` / ``inspect`` / ``convert``, and ``psched trace fetch --list``;
- ``psched simulate`` on at most 60 jobs (``--jobs N``), or on ``traces/demo_sim.csv`` with at
  most two policies;
- ``psched ratio --instances 1`` on at most two server counts and priority ranges;
- ``psched sweep --serial`` on ``traces/demo_sim.csv``.

A command runs in a fresh temporary folder: the paths it reads (``traces/demo_sim.csv``) are made
absolute, the paths it writes (``--out``, ``--dest``, ``--png``, ``--cluster-out``, ``--dir``)
stay relative to that folder, so running the tests never writes inside the checkout, whatever
earlier commands left there.

Everything else is skipped and named in the skip reason: ``serve``, ``submit``, ``status``,
``logs``, ``cancel``, ``stop``, ``run`` (a live service on Ray, real training), ``sweep`` on
Ray, ``trace fetch`` of data (network), ``report`` (needs an earlier output), and commands on
paths outside the repository (``../shared``) or on placeholders. The Ray front doors have their
own suites (``pytest -m ray``). The whole file takes well under a minute.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "traces" / "README.md"]
SHELL_LANGS = {"bash", "sh", "shell", "console"}
MAX_JOBS = 60
#: options whose value is a path the command writes: never resolved against the checkout
OUTPUT_OPTIONS = frozenset({"--out", "--dest", "--png", "--cluster-out", "--dir"})


def shown_commands() -> list[tuple[str, str]]:
    """(document, command) for every ``psched`` line of a shell block, continuations joined."""
    out: list[tuple[str, str]] = []
    for doc in DOCS:
        lang = None
        for line in doc.read_text().replace("\\\n", " ").splitlines():
            if line.startswith("```"):
                lang = line[3:].strip() if lang is None else None
                continue
            command = line.split(" #")[0].strip().rstrip("&").strip()
            if lang in SHELL_LANGS and command.startswith("psched"):
                out.append((doc.relative_to(ROOT).as_posix(), command))
    return out


def _option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv[:-1] else None


def why_not_cheap(argv: list[str]) -> str | None:
    """None when the rule of the module docstring calls ``argv`` cheap, else why not."""
    if "--help" in argv or argv[1:] == ["--version"]:
        return None
    if any(a.startswith("../") or a.isupper() or "HEAD_IP" in a for a in argv):
        return "a path outside the repository or a placeholder"
    verb = argv[1] if len(argv) > 1 else ""
    if verb == "trace":
        sub = argv[2] if len(argv) > 2 else ""
        if sub in {"synth", "inspect", "convert"} or argv[2:] == ["fetch", "--list"]:
            return None
        return f"trace {sub} downloads data"
    if verb == "simulate":
        jobs = _option(argv, "--jobs")
        policies = (_option(argv, "--policies") or "all").split(",")
        if jobs is not None and int(jobs) <= MAX_JOBS:
            return None
        if _option(argv, "--trace") == "traces/demo_sim.csv" and "all" not in policies \
                and len(policies) <= 2:
            return None
        return "a simulation beyond the cheap rule"
    if verb == "ratio":
        small = all(len((_option(argv, k) or "x,x,x").split(",")) <= 2
                    for k in ("--servers", "--priorities"))
        return None if _option(argv, "--instances") == "1" and small else "a larger ratio study"
    if verb == "sweep" and "--serial" in argv and _option(argv, "--trace") == "traces/demo_sim.csv":
        return None
    return f"{verb}: a live service, real training or Ray"


def _absolute(argv: list[str], root: Path = ROOT) -> list[str]:
    """Paths the command reads made absolute in ``root``; paths it writes left relative."""
    out: list[str] = []
    for i, a in enumerate(argv):
        written = i > 0 and argv[i - 1] in OUTPUT_OPTIONS
        out.append(str(root / a) if "/" in a and not written and (root / a).exists() else a)
    return out


COMMANDS = shown_commands()


def test_the_documents_show_cheap_commands_of_every_kind() -> None:
    cheap = {shlex.split(c)[1] for _, c in COMMANDS if why_not_cheap(shlex.split(c)) is None}
    assert {"simulate", "trace", "ratio"} <= cheap


@pytest.mark.parametrize(("doc", "command"), COMMANDS,
                         ids=[f"{d}:{c[:60]}" for d, c in COMMANDS])
def test_a_shown_command_runs(doc: str, command: str, tmp_path: Path) -> None:
    argv = shlex.split(command)
    reason = why_not_cheap(argv)
    if reason is not None:
        pytest.skip(f"not cheap ({reason})")
    # the timeout only guards against a hang: in a fresh clone the first command that runs
    # oasis-rp also compiles its kernels, on a loaded machine for minutes
    proc = subprocess.run([sys.executable, "-m", "psched", *_absolute(argv[1:])], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, f"{doc}: `{command}` failed:\n{proc.stderr[-2000:]}"


def test_a_written_path_stays_in_the_temporary_folder_even_if_the_checkout_holds_it(
        tmp_path: Path) -> None:
    """After the README's own commands, ``out/ratio`` exists in the checkout: not written there."""
    (tmp_path / "out" / "ratio").mkdir(parents=True)
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "demo_sim.csv").write_text("x")
    argv = shlex.split("psched ratio --instances 1 --out out/ratio --png out/ratio/p.png")
    assert _absolute(argv, tmp_path) == argv
    argv = shlex.split("psched simulate --trace traces/demo_sim.csv --out out/ratio")
    assert _absolute(argv, tmp_path) == [*argv[:3], str(tmp_path / "traces" / "demo_sim.csv"),
                                         "--out", "out/ratio"]


def test_no_shown_command_writes_inside_the_checkout() -> None:
    for _, command in COMMANDS:
        argv = _absolute(shlex.split(command))
        written = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in OUTPUT_OPTIONS]
        assert not any(Path(w).is_absolute() for w in written), command


def test_the_cheap_rule() -> None:
    assert why_not_cheap(shlex.split("psched serve --help")) is None
    assert why_not_cheap(shlex.split("psched simulate --jobs 400 --scenario oasis-paper"))
    assert why_not_cheap(shlex.split("psched simulate --trace traces/demo_sim.csv --policies all"))
    assert why_not_cheap(shlex.split("psched trace fetch elasticflow --dest traces/public"))
    assert why_not_cheap(shlex.split("psched submit examples/jobs/digits-a.toml"))
