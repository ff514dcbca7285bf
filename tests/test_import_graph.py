"""crosssim's internal import graph: no circles, and the runner stays below report and real.

The graph is read from the source with ``ast`` (imports at module level and inside functions
alike: a lazy import is still a dependency), so the test needs no engine installed.
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


def test_no_import_cycles():
    assert find_cycles(import_graph()) == []


def test_runner_never_imports_report_or_real():
    graph = import_graph()
    bad = {(m, t) for m, ts in graph.items() if m.startswith("crosssim.runner")
           for t in ts if t.split(".")[:2] in (["crosssim", "report"], ["crosssim", "real"])}
    assert bad == set()


def test_the_checks_can_fail(tmp_path):
    """A planted circle (one through a function-level import) and a runner -> report edge are found."""
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


def test_engines_stay_below_the_profile_reader_and_the_runner():
    """Engines own their contract, settings and profile types; reading profile files (profiles.py),
    options and the runner sit above them (a profiles <-> engines loop once hid here)."""
    graph = import_graph()
    above = ("crosssim.profiles", "crosssim.options", "crosssim.cli", "crosssim.runner")
    bad = {(m, t) for m, ts in graph.items() if m.startswith("crosssim.engines")
           for t in ts if any(t == a or t.startswith(a + ".") for a in above)}
    assert bad == set()
