"""A ``--quick`` run is a preview everywhere a user meets it (issue 36): the terminal header with the
counts it really runs, summary.json's ``preview``, the report's banner, and the gate, which refuses it.
One real quick run (MuJoCo only, the project's Hopper card) serves every check."""

import json
import subprocess
import sys

import pytest

from conftest import ROOT

CARD = ROOT / "policies" / "hopper-ppo-mujoco" / "card.yaml"


def cli(*args, cwd, timeout=600):
    env = {"PYTHONPATH": str(ROOT / "src"), "COLUMNS": "80"}
    import os

    env = {**os.environ, **env}
    env.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run([sys.executable, "-m", "crosssim.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("quick")
    proc = cli("crossval", "--policy", CARD, "--engines", "mujoco", "--quick", "--episodes", "10", "--workers", "1",
               "--out", folder / "run", "--cache-dir", folder / "cache", cwd=folder)
    assert proc.returncode == 0, proc.stderr
    return folder, proc


def test_the_header_says_preview_and_the_counts_really_run(quick_run):
    _, proc = quick_run
    first = proc.stderr.splitlines()[0]
    assert "3 episodes per engine" in first and "--quick preview" in first and "10 episodes" not in first, first
    assert "--episodes 10 capped" in first
    assert "verdict (--quick preview):" in proc.stdout
    assert "the gate refuses a preview" in proc.stdout


def test_summary_json_carries_the_preview_and_a_full_run_none(quick_run):
    folder, _ = quick_run
    summary = json.loads((folder / "run" / "summary.json").read_text())
    assert summary["preview"] == {"episodes": 3, "sweep_episodes": 2, "max_steps": 300}
    assert summary["episodes"] == 3
    assert summary["engines"]["mujoco"]["episodes"] == 3


def test_the_report_banner_says_preview(quick_run):
    folder, _ = quick_run
    page = (folder / "run" / "report.html").read_text()
    assert 'id="preview"' in page and "PREVIEW (--quick)" in page and "Preview verdict:" in page
    assert "3 episodes per engine, 2 per sweep rung, at most 300 control steps" in page


def test_the_gate_refuses_a_preview_in_one_line(quick_run):
    folder, _ = quick_run
    proc = cli("gate", "--run", folder / "run", "--junit", folder / "gate.xml", "--summary", folder / "gate.md",
               cwd=folder)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("crosssim: error:") and "--quick preview (3 episodes per engine" in last, last
    assert "Traceback" not in proc.stderr
    # refused, yet the CI still gets its job summary and JUnit file saying why
    assert "crosssim gate: ERROR" in (folder / "gate.md").read_text()
    assert "<error" in (folder / "gate.xml").read_text() and "--quick preview" in (folder / "gate.xml").read_text()


def test_a_summary_without_preview_reads_as_a_full_run(quick_run):
    from crosssim.runfolder import read_summary

    folder, _ = quick_run
    data = json.loads((folder / "run" / "summary.json").read_text())
    data.pop("preview")
    old = folder / "old"
    old.mkdir()
    (old / "summary.json").write_text(json.dumps(data))
    assert read_summary(old).preview is None


def test_the_terminal_fits_80_columns_and_progress_ends_in_done(quick_run):
    """COLUMNS=80: every family, engine, headroom and class is in the tables, whose lines fit; the
    physical values at the margin go under the table. Progress ends in "done", never "(stopped)"."""
    _, proc = quick_run
    out = proc.stdout
    for word in ("actuation", "timing", "contact", "headroom", "class", "mujoco", "reference",
                 "actuation at the margin:", "ms"):
        assert word in out, word
    assert any(c in out for c in (" low ", " medium ", " high ", " unknown "))
    table = [ln for ln in out.splitlines() if ln.startswith(" ")]
    assert table and max(map(len, table)) <= 80, max(table, key=len)
    assert "…" not in out
    assert "(100 %), done in " in proc.stderr and "(stopped)" not in proc.stderr
