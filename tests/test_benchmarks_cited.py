"""Every benchmark command that BENCHMARKS.md and README.md cite runs a script that exists, with
options its argparse defines, and every script in ``benchmarks/`` is cited there or imported by
one that is. Read from the source with ``ast``: nothing is run."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
DOCS = ("BENCHMARKS.md", "README.md")

#: ``python benchmarks/X.py ...`` or, after ``cd benchmarks``, ``python X.py ...``; the command
#: ends at a closing backtick, a comment, ``&&``, ``;`` or the end of its (joined) line.
COMMAND = re.compile(r"python3? (?:benchmarks/)?([A-Za-z0-9_]+)\.py((?:[^`#;&\n]|&(?!&))*)")
FLAG = re.compile(r"(?<![\w-])(--[A-Za-z0-9][A-Za-z0-9-]*)")

def _joined_lines(text: str) -> list[str]:
    """The text's lines with shell continuations (a trailing backslash) joined."""
    return text.replace("\\\n", " ").splitlines()


def cited_commands() -> list[tuple[str, str, str]]:
    """(document, script file name, the command's arguments) for every cited command."""
    out = []
    for doc in DOCS:
        for line in _joined_lines((ROOT / doc).read_text()):
            for m in COMMAND.finditer(line):
                out.append((doc, f"{m.group(1)}.py", m.group(2)))
    return out


def defined_flags(script: Path) -> set[str]:
    """Every ``--option`` that an ``add_argument`` call of ``script`` defines (any parser)."""
    flags = {"--help"}
    for node in ast.walk(ast.parse(script.read_text(), filename=str(script))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            flags |= {a.value for a in node.args
                      if isinstance(a, ast.Constant) and isinstance(a.value, str)
                      and a.value.startswith("--")}
    return flags


def local_imports(script: Path) -> set[str]:
    """File names of the ``benchmarks/`` modules that ``script`` imports."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(script.read_text(), filename=str(script))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return {f"{n}.py" for n in names if (BENCH / f"{n}.py").is_file()}


def test_benchmarks_md_stays_within_800_lines() -> None:
    """Today's figures only: a re-measured figure replaces the old one."""
    assert len((ROOT / "BENCHMARKS.md").read_text().splitlines()) <= 800


def test_the_documents_cite_benchmark_commands() -> None:
    assert len({script for _, script, _ in cited_commands()}) >= 20


@pytest.mark.parametrize(("doc", "script", "args"), cited_commands(),
                         ids=lambda v: v if isinstance(v, str) and v.endswith(".py") else "")
def test_a_cited_script_exists_and_defines_every_cited_option(doc: str, script: str,
                                                              args: str) -> None:
    path = BENCH / script
    assert path.is_file(), f"{doc} cites benchmarks/{script}, which does not exist"
    unknown = sorted(set(FLAG.findall(args)) - defined_flags(path))
    assert not unknown, f"{doc}: benchmarks/{script} defines no {unknown} ({args.strip()!r})"


def test_every_benchmark_script_is_cited_or_imported_by_a_cited_one() -> None:
    cited = {script for _, script, _ in cited_commands() if (BENCH / script).is_file()}
    reached, todo = set(cited), list(cited)
    while todo:
        for dep in local_imports(BENCH / todo.pop()) - reached:
            reached.add(dep)
            todo.append(dep)
    scripts = {p.name for p in BENCH.glob("*.py")}
    uncited = sorted(scripts - reached)
    assert not uncited, f"benchmarks/ scripts no document cites: {uncited}"
