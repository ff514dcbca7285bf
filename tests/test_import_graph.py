"""crosssim's internal import graph: no circles between modules or between folders, and the
runner stays below the stages that read its rows (verdict, risk, diagnose, real, report).

The graph is read from the source with ``ast`` (every Import and ImportFrom anywhere in a module,
at module level and inside functions alike: a lazy import is still a dependency), so the test needs
no engine installed. Rules that hold through other modules are checked on the transitive closure:
runner -> diagnose -> real is runner -> real.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """crosssim module -> the crosssim modules it imports (anywhere in its file)."""
    files = {_module_name(p, src): p for p in (src / "crosssim").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative import: resolve against this module's package
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                # ``from pkg import sub`` depends on the submodule when there is one, else on pkg.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            else:
                continue
            edges |= {t for t in targets if t in files and t != name}
        graph[name] = edges
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def folder_of(module: str) -> str:
    """The room a module lives in: its top-level package or module under crosssim (``crosssim``
    for the package's face)."""
    return ".".join(module.split(".")[:2])


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for m, targets in graph.items():
        out.setdefault(folder_of(m), set()).update(folder_of(t) for t in targets if folder_of(t) != folder_of(m))
    return out


def reached(graph: dict[str, set[str]], starts) -> dict[str, list[str]]:
    """Every module reachable from ``starts``, with one import path that reaches it."""
    paths = {s: [s] for s in starts}
    todo = list(starts)
    while todo:
        m = todo.pop()
        for t in sorted(graph.get(m, ())):
            if t not in paths:
                paths[t] = paths[m] + [t]
                todo.append(t)
    return paths


ABOVE_THE_RUNNER = ("crosssim.verdict", "crosssim.risk", "crosssim.diagnose", "crosssim.real", "crosssim.report",
                    "crosssim.evaluate")
"""Stages that read what the runner stores: the runner imports none of them, directly or not."""

KNOWN_FOLDER_LOOPS: set[tuple[str, ...]] = set()
"""Folder-level loops owned by other work in flight; a loop not listed here fails, and a listed
one that is gone is simply not found."""


def test_no_import_cycles():
    assert find_cycles(import_graph()) == []


def test_no_folder_loops_but_the_known_ones():
    loops = {tuple(c) for c in find_cycles(folder_graph(import_graph()))}
    assert loops <= KNOWN_FOLDER_LOOPS


def test_runner_never_reaches_the_stages_above_it():
    graph = import_graph()
    paths = reached(graph, [m for m in graph if m.startswith("crosssim.runner")])
    bad = [" -> ".join(p) for t, p in sorted(paths.items()) if folder_of(t) in ABOVE_THE_RUNNER]
    assert bad == []


def test_card_and_policies_import_one_way():
    graph = import_graph()
    cards = [m for m in graph if m in ("crosssim.card", "crosssim.card_schema")]
    paths = reached(graph, cards)
    assert [" -> ".join(p) for t, p in sorted(paths.items()) if folder_of(t) == "crosssim.policies"] == []


KNOWN_PRIVATE: set[str] = set()
"""Private names taken across folders by other work in flight."""


def test_no_private_name_crosses_a_folder():
    """``from crosssim.x import _name`` from another folder reaches into its internals (diagnose once
    imported real.conformance's ``_need`` and ``_rms``): share a public helper instead."""
    bad = set()
    for path in (SRC / "crosssim").rglob("*.py"):
        here = _module_name(path, SRC)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("crosssim") and not node.level:
                bad |= {f"{here} -> {node.module}.{a.name}" for a in node.names if a.name.startswith("_")
                        and not a.name.startswith("__") and folder_of(node.module) != folder_of(here)}
    assert bad <= KNOWN_PRIVATE


def test_the_checks_can_fail(tmp_path):
    """A planted circle (one through a function-level import), a runner -> report edge, a folder loop
    and a runner that reaches real through another module are found."""
    pkg = tmp_path / "crosssim"
    (pkg / "runner").mkdir(parents=True)
    (pkg / "report").mkdir()
    for init in (pkg, pkg / "runner", pkg / "report"):
        (init / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from crosssim import b\n")
    (pkg / "b.py").write_text("def f():\n    import crosssim.a\n")
    (pkg / "runner" / "run.py").write_text("def f():\n    from crosssim.report.build import x\n")
    (pkg / "report" / "build.py").write_text("from ..runner import run\n")
    graph = import_graph(tmp_path)
    cycles = find_cycles(graph)
    assert ["crosssim.a", "crosssim.b"] in cycles
    assert ["crosssim.report.build", "crosssim.runner.run"] in cycles
    assert "crosssim.report.build" in graph["crosssim.runner.run"]
    (pkg / "real").mkdir()
    (pkg / "real" / "__init__.py").write_text("")
    (pkg / "real" / "logs.py").write_text("def f():\n    from crosssim.runner import run\n")
    (pkg / "diagnose.py").write_text("def f():\n    from crosssim.real.logs import f\n")
    (pkg / "runner" / "summary.py").write_text("def f():\n    from crosssim import diagnose\n")
    graph = import_graph(tmp_path)
    assert any({"crosssim.real", "crosssim.runner"} <= set(c) for c in find_cycles(folder_graph(graph)))
    paths = reached(graph, ["crosssim.runner.summary"])
    assert paths["crosssim.real.logs"] == ["crosssim.runner.summary", "crosssim.diagnose", "crosssim.real.logs"]


def test_engines_stay_below_the_profile_reader_and_the_runner():
    """Engines own their contract, settings and profile types; reading profile files (profiles.py),
    options and the runner sit above them (a profiles <-> engines loop once hid here)."""
    graph = import_graph()
    above = ("crosssim.profiles", "crosssim.options", "crosssim.cli", "crosssim.runner")
    bad = {(m, t) for m, ts in graph.items() if m.startswith("crosssim.engines")
           for t in ts if any(t == a or t.startswith(a + ".") for a in above)}
    assert bad == set()
