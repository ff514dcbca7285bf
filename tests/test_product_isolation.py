"""The product never reaches into the validation study or the benchmarks: no file under src/ or tests/
imports a module of validation/ or bench/, or puts either folder on sys.path (or runs a file there).

The study (validation/README.md) tests the product from outside, as a user would; a product test that
imported it would make a change to the study a change to the product's tests, and the other way round.
The study's own tests live in validation/tests. Read with ``ast``, so a lazy import counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = ("validation", "bench")
PATH_CALLS = ("path.insert", "path.append", "addsitedir", "run_path", "spec_from_file_location")


def study_modules(root: Path = ROOT) -> set[str]:
    """Top-level names a file could import the study or the benchmarks by."""
    return {*OUTSIDE, *(p.stem for folder in OUTSIDE for p in (root / folder).glob("*.py"))}


def reaches_outside(path: Path, modules: set[str]) -> list[str]:
    """Each line of ``path`` that imports one of ``modules`` or names validation/ or bench/ in a
    sys.path / runpy / importlib call, as 'file:line: source'."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith(PATH_CALLS):
            args = " ".join(ast.unparse(a) for a in node.args)
            names = [f for f in OUTSIDE if f"'{f}'" in args or f'"{f}"' in args or f"{f}/" in args]
        else:
            continue
        if any(n.split(".")[0] in modules for n in names):
            found.append(f"{path.relative_to(path.parents[1])}:{node.lineno}: {ast.unparse(node)}")
    return found


def product_files(root: Path = ROOT) -> list[Path]:
    return sorted(p for folder in ("src", "tests") for p in (root / folder).rglob("*.py"))


def test_no_product_file_imports_validation_or_bench():
    modules = study_modules()
    assert {"validate_risk", "realities_heldout3", "bench_speed"} <= modules  # the folders were found
    offenders = [line for path in product_files() for line in reaches_outside(path, modules)]
    assert not offenders, "the product reaches into validation/ or bench/:\n" + "\n".join(offenders)


def test_the_check_finds_each_way_in(tmp_path):
    tests = tmp_path / "tests"
    tests.mkdir()
    lines = ['sys.path.insert(0, str(ROOT / "validation"))', "import validation_population as vp",
             "from realities import REALITIES", 'runpy.run_path("bench/bench_speed.py")', "import validation.x",
             'sys.path.append(str(ROOT / "bench"))']
    for i, line in enumerate(lines):
        (tests / f"test_{i}.py").write_text(f"def f():\n    {line}\n")
    (tests / "test_fine.py").write_text("import sys\nfrom crosssim import risk\nsys.path.insert(0, 'src')\n")
    modules = {*OUTSIDE, "validation_population", "realities", "bench_speed"}
    hits = {p.name: reaches_outside(p, modules) for p in sorted(tests.glob("*.py"))}
    assert all(len(hits[f"test_{i}.py"]) == 1 for i in range(len(lines))), hits
    assert hits["test_fine.py"] == []
