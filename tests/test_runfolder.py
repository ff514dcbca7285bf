"""The run folder: one owner writes and reads every file of a run, typed, and reads folders written
before it existed (same files, same layout)."""

import ast
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crosssim.errors import CrossSimError
from crosssim.results import AuditEntry, EpisodeRow
from crosssim.runfolder import (AUDIT_FILE, ROWS_FILE, SUMMARY_FILE, TRAJECTORIES_FILE, RunFolder, StoredRun)
from test_results import _summary

ROOT = Path(__file__).resolve().parents[1]


def _rows() -> list[EpisodeRow]:
    return [EpisodeRow("p", "mujoco", "nominal", 0, 0, 900.0, 1000, False, None, 1.5, {"survival": 1.0}),
            EpisodeRow.failed("p", "pybullet", "nominal", 0, 0, "pybullet: lost")]


AUDIT = {"mujoco": [AuditEntry("body_mass", "torso", 3.5, 3.5, 0.0035)],
         "pybullet": [AuditEntry("joint_damping", "hip", 1.0, None, 0.01, "dropped by loadMJCF", "unsupported")]}


def test_every_file_round_trips_typed(tmp_path):
    folder = RunFolder(tmp_path / "run").create()
    written = folder.write_rows(_rows())
    folder.write_audit(AUDIT)
    qpos = np.arange(12.0).reshape(4, 3)
    folder.write_trajectories({"mujoco": {0: {"t": np.arange(4.0), "qpos": qpos}}})
    folder.write_summary(_summary())
    pd.testing.assert_frame_equal(folder.rows(), written)
    assert folder.audit() == AUDIT and isinstance(folder.audit()["mujoco"][0], AuditEntry)
    np.testing.assert_array_equal(folder.trajectories()["mujoco"][0]["qpos"], qpos)
    run = folder.read()
    assert isinstance(run, StoredRun) and run.baseline is None and run.summary.policy == "p"
    np.testing.assert_array_equal(run.trajectories["mujoco"]["t"], np.arange(4.0))


def test_a_folder_written_before_the_run_folder_reads_back(tmp_path):
    """The files as runner/crossval.py and results.py wrote them before RunFolder: the same layout."""
    from crosssim.results import rows_frame, to_dict

    rows = rows_frame(_rows())
    rows.to_parquet(tmp_path / "results.parquet", index=False)
    (tmp_path / "audit.json").write_text(json.dumps({"mujoco": [
        {"quantity": "timestep", "item": "model", "canonical": 0.002, "engine": 0.002, "tolerance": 1e-09, "note": "",
         "status": "ok"}]}, indent=1))
    np.savez_compressed(tmp_path / "trajectories.npz", **{"pybullet/0/base_z": np.ones(3)})
    (tmp_path / "summary.json").write_text(json.dumps(to_dict(_summary()), indent=1))
    run = RunFolder(tmp_path).read()
    pd.testing.assert_frame_equal(run.rows, rows)
    assert run.audit == {"mujoco": [AuditEntry("timestep", "model", 0.002, 0.002, 1e-09)]}
    assert list(run.trajectories) == ["pybullet"] and run.trajectories["pybullet"]["base_z"].tolist() == [1, 1, 1]
    # and what RunFolder writes is byte for byte what was written before (audit.json) or reads the same
    again = RunFolder(tmp_path / "again").create()
    again.write_audit(run.audit)
    assert (again.path / "audit.json").read_text() == (tmp_path / "audit.json").read_text()


def test_rows_that_are_not_a_crossvals_are_one_line(tmp_path):
    pd.DataFrame({"x": [1]}).to_parquet(tmp_path / "results.parquet")
    with pytest.raises(CrossSimError, match="columns .* missing .*rerun crossval"):
        RunFolder(tmp_path).rows()
    with pytest.raises(CrossSimError, match="no summary.json here"):
        RunFolder(tmp_path).summary()


def test_an_unwritable_folder_is_refused_before_any_engine_runs(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(CrossSimError, match="cannot write results to .*choose another --out"):
        RunFolder(tmp_path / "file" / "run").create()


def _names_run_files(path: Path) -> list[str]:
    """String constants in ``path``'s code (docstrings, comments and prose aside) that name a run file."""
    names = {ROWS_FILE, AUDIT_FILE, TRAJECTORIES_FILE, SUMMARY_FILE}
    tree = ast.parse(path.read_text())
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            words = node.value.split()  # a path, or a path's tail in an f-string; not a mention in prose
            found += [f"{path.relative_to(ROOT)}:{node.lineno}: {n}" for n in names
                      if any(w == n or w.endswith("/" + n) for w in words)]
    return found


def test_only_the_run_folder_opens_run_files_by_name():
    """The runner, the verdict, the report, the gate, the CLI and bench read and write runs through
    RunFolder: no other module names results.parquet, audit.json, trajectories.npz or summary.json."""
    files = [p for p in (ROOT / "src" / "crosssim").rglob("*.py") if p.name != "runfolder.py"]
    files += sorted((ROOT / "bench").glob("*.py"))
    found = [hit for p in files for hit in _names_run_files(p)]
    assert found == []


def test_the_check_finds_a_module_that_opens_a_run_file(tmp_path, monkeypatch):
    planted = ROOT / "bench" / "_planted_reader_test.py"
    planted.write_text('"""Reads results.parquet (a docstring: fine)."""\nimport pandas as pd\n\n\n'
                       'def rows(out):\n    return pd.read_parquet(out / "results.parquet")\n')
    try:
        assert _names_run_files(planted) == ["bench/_planted_reader_test.py:6: results.parquet"]
    finally:
        planted.unlink()
