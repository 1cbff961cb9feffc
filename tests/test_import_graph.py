"""``psched`` and ``ray_cluster`` are layered: no module imports, directly or through others, one
that imports it back, and ``psched``'s library never imports ``ray_cluster`` (only the CLI's
service commands may, lazily). The graph is built from the source with ``ast`` -- every
``import`` and ``from ... import`` of a module of the package, at module level or inside
functions, except those under ``if TYPE_CHECKING:`` -- and must be acyclic (networkx)."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "ray_cluster"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of import nodes under ``if TYPE_CHECKING:``."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def import_graph(package: str = PACKAGE, *, into: str | None = None) -> nx.DiGraph:
    """module -> the modules of ``package`` (or, with ``into``, of that other package) it
    imports."""
    files = sorted((ROOT / package).rglob("*.py"))
    modules = {_module_name(f) for f in sorted((ROOT / (into or package)).rglob("*.py"))}
    graph = nx.DiGraph()
    for f in files:
        name = _module_name(f)
        graph.add_node(name)
        tree = ast.parse(f.read_text(), filename=str(f))
        skip = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # ``from pkg import sub`` imports the submodule ``pkg.sub`` when there is one
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules
                           else node.module for a in node.names]
            for target in targets:
                if target in modules and target != name:
                    graph.add_edge(name, target)
    return graph


def test_ray_cluster_has_no_import_cycle() -> None:
    graph = import_graph()
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c + c[:1]) for c in cycles)


def _cycles(graph: nx.DiGraph) -> str:
    return "; ".join(" -> ".join(c + c[:1]) for c in nx.simple_cycles(graph))


def test_psched_has_no_import_cycle() -> None:
    """``psched.policies`` (the registry and ``oasis_rp``'s mechanisms) is left out until its
    package layout settles; every other module is checked."""
    graph = import_graph("psched")
    rest = graph.subgraph(n for n in graph if not n.startswith("psched.policies"))
    assert not _cycles(rest), "import cycles: " + _cycles(rest)
    assert rest.has_edge("psched.report_data", "psched.job_rows")
    assert rest.has_edge("psched.sweep_order", "psched.sweep_cell")


def test_the_psched_library_never_imports_ray_cluster() -> None:
    graph = import_graph("psched", into="ray_cluster")
    upward = sorted({u for u, v in graph.edges if v.startswith("ray_cluster")})
    assert upward == ["psched.commands_service"]


def test_the_graph_sees_the_imports_it_checks() -> None:
    """The checker is not vacuous: known edges are found."""
    graph = import_graph()
    assert graph.has_edge("ray_cluster.service.core", "ray_cluster.service.config")
    assert graph.has_edge("ray_cluster.executor", "ray_cluster.runtime")
    assert graph.number_of_edges() > 20


def test_a_cycle_would_be_found(tmp_path, monkeypatch) -> None:
    pkg = tmp_path / "cyc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from cyc import b\n")
    (pkg / "b.py").write_text("def f():\n    import cyc.a\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    import cyc.a\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    graph = import_graph("cyc")
    assert list(nx.simple_cycles(graph)) and not graph.has_edge("cyc.c", "cyc.a")


@pytest.mark.parametrize("name", ["ray_cluster.service", "ray_cluster.recovery",
                                  "ray_cluster.runtime"])
def test_public_import_paths_work(name: str) -> None:
    import importlib

    assert importlib.import_module(name).__all__
