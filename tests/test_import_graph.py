"""``psched`` and ``ray_cluster`` are layered by role: no module imports, directly or through
others, one that imports it back, and no package imports one above it (:data:`LAYERS`: the core
never imports a policy, a result or the CLI; policies never import results, runs or the CLI).
``psched``'s library never imports ``ray_cluster`` (only the CLI's service commands may, lazily).
No module takes a private name (``_x``, not ``__x__``) from another module, by ``from m import
_x`` or by ``m._x``: what another module needs is public and in its ``__all__``.
The graph is built from the source with ``ast`` -- every ``import`` and ``from ... import`` of a
module of the package, at module level or inside functions, except those under
``if TYPE_CHECKING:``."""


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


#: Each package's rank: a module may import its own package and those of a lower rank only.
#: ``psched`` alone is the top-level package (its names load lazily, PEP 562).
LAYERS: dict[str, int] = {
    "psched.core": 0,
    "psched.oasis": 1, "psched.traces": 1,
    "psched.offline": 2,
    "psched.policies": 3,
    "psched.results": 4,
    "psched.runs": 5,
    "psched.api": 6, "psched.cli": 6, "psched.__main__": 7, "psched": 8,
    "ray_cluster.workloads": 0,
    "ray_cluster.ps": 1,
    "ray_cluster.runtime": 2,
    "ray_cluster.service": 3,
    "ray_cluster": 4,
}


def _package(module: str) -> str:
    """The package of :data:`LAYERS` a module belongs to."""
    parts = module.split(".")
    return ".".join(parts[:2]) if ".".join(parts[:2]) in LAYERS else parts[0]


def _cycles(graph: nx.DiGraph) -> str:
    return "; ".join(" -> ".join(c + c[:1]) for c in nx.simple_cycles(graph))


def upward_imports(graph: nx.DiGraph) -> list[str]:
    """Edges into a package of a higher rank (``psched.__version__`` read from the top-level
    package is allowed)."""
    return sorted(f"{u} -> {v}" for u, v in graph.edges
                  if LAYERS[_package(v)] > LAYERS[_package(u)] and v not in ("psched",))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _source_module(me: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` reads (relative imports resolved against ``me``)."""
    if not node.level:
        return node.module or ""
    base = me.split(".") if is_package else me.split(".")[:-1]
    base = base[:len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def private_imports(package: str = PACKAGE) -> list[str]:
    """``path:line: module._name`` for every private name a module of ``package`` takes from
    another of its modules: ``from m import _x`` (at any depth, under ``TYPE_CHECKING`` too) or
    ``m._x`` where ``m`` names an imported module of the package."""
    files = sorted((ROOT / package).rglob("*.py"))
    modules = {_module_name(f) for f in files}
    found: list[str] = []
    for f in files:
        me = _module_name(f)
        where = f.relative_to(ROOT)
        tree = ast.parse(f.read_text(), filename=str(f))
        bound: dict[str, str] = {}  # local name -> the module of the package it names
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                src = _source_module(me, f.name == "__init__.py", node)
                for a in node.names:
                    if f"{src}.{a.name}" in modules:
                        bound[a.asname or a.name] = f"{src}.{a.name}"
                    if _private(a.name) and src != me:
                        found.append(f"{where}:{node.lineno}: {src}.{a.name}")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in modules:
                        bound[a.asname or a.name.split(".")[0]] = (
                            a.name if a.asname else a.name.split(".")[0])
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            chain, value = [], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in bound:
                target = ".".join([bound[value.id], *reversed(chain)])
                if target in modules and target != me:
                    found.append(f"{where}:{node.lineno}: {target}.{node.attr}")
    return found


@pytest.mark.parametrize("package", ["psched", "ray_cluster"])
def test_no_module_imports_a_private_name_from_another(package: str) -> None:
    assert private_imports(package) == []


def test_a_private_import_would_be_found(tmp_path, monkeypatch) -> None:
    pkg = tmp_path / "priv"
    (pkg / "sub").mkdir(parents=True)
    for init in (pkg / "__init__.py", pkg / "sub" / "__init__.py"):
        init.write_text("")
    (pkg / "a.py").write_text("_hidden = 1\n__version__ = '1'\ndef f():\n    return _hidden\n")
    (pkg / "b.py").write_text("from priv.a import _hidden, __version__\n")
    (pkg / "c.py").write_text("import priv.a\nfrom priv import a as alias\n"
                              "x = priv.a._hidden + alias._hidden\n")
    (pkg / "sub" / "d.py").write_text("from ..a import _hidden\n")
    (pkg / "sub" / "e.py").write_text("class K:\n    _own = 1\n\nK()._own\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert private_imports("priv") == [
        "priv/b.py:1: priv.a._hidden", "priv/c.py:3: priv.a._hidden",
        "priv/c.py:3: priv.a._hidden", "priv/sub/d.py:1: priv.a._hidden"]


@pytest.mark.parametrize("package", ["psched", "ray_cluster"])
def test_the_package_has_no_import_cycle(package: str) -> None:
    graph = import_graph(package)
    assert not _cycles(graph), "import cycles: " + _cycles(graph)


@pytest.mark.parametrize("package", ["psched", "ray_cluster"])
def test_no_package_imports_one_above_it(package: str) -> None:
    graph = import_graph(package)
    assert {_package(m) for m in graph} <= set(LAYERS)  # every package has a rank
    assert upward_imports(graph) == []


def test_an_upward_import_would_be_found() -> None:
    graph = nx.DiGraph([("psched.core.model", "psched.results.summary"),
                        ("psched.policies.fifo", "psched.cli.main"),
                        ("psched.results.summary", "psched"),
                        ("psched.policies.fifo", "psched.core.model")])
    assert upward_imports(graph) == ["psched.core.model -> psched.results.summary",
                                     "psched.policies.fifo -> psched.cli.main"]


def test_the_psched_library_never_imports_ray_cluster() -> None:
    graph = import_graph("psched", into="ray_cluster")
    upward = sorted({u for u, v in graph.edges if v.startswith("ray_cluster")})
    assert upward and set(upward) <= {"psched.cli.service", "psched.cli.connect",
                                      "psched.cli.jobs", "psched.cli.stop"}


def test_the_graph_sees_the_imports_it_checks() -> None:
    """The checker is not vacuous: known edges are found."""
    graph = import_graph()
    assert graph.has_edge("ray_cluster.service.core", "ray_cluster.service.config")
    assert graph.has_edge("ray_cluster.service.core", "ray_cluster.runtime.executor")
    lib = import_graph("psched")
    assert lib.has_edge("psched.results.report_data", "psched.results.job_rows")
    assert lib.has_edge("psched.runs.sweep_order", "psched.runs.sweep_cell")
    assert lib.has_edge("psched.policies.srtf", "psched.core.policy")
    assert graph.has_edge("ray_cluster.runtime.executor", "ray_cluster.runtime")
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


@pytest.mark.parametrize("name", ["ray_cluster.service", "ray_cluster.service.nodes",
                                  "ray_cluster.runtime"])
def test_public_import_paths_work(name: str) -> None:
    import importlib

    assert importlib.import_module(name).__all__
