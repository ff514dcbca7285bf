"""The GitHub Action (action.yml) and the workflow template: GitHub's schemas (offline, through
check-jsonschema's vendored copies), the action's rules, and its run: steps driven as written in a
temporary repository with a main branch and pull request branches."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT

ACTION = ROOT / "action.yml"
WORKFLOW = ROOT / ".github" / "workflows" / "policy-gate.yml"
POLICY = ROOT / "policies" / "hopper-ppo-mujoco"


def _schema_check(schema: str, path: Path) -> subprocess.CompletedProcess:
    pytest.importorskip("check_jsonschema")
    return subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", f"vendor.{schema}",
                           str(path)], capture_output=True, text=True, timeout=120)


def test_workflow_and_action_follow_githubs_schemas(tmp_path):
    for schema, path in (("github-workflows", WORKFLOW), ("github-actions", ACTION)):
        proc = _schema_check(schema, path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    # The check can fail: a composite run step without its shell, a misspelt permission.
    action = yaml.safe_load(ACTION.read_text())
    del next(s for s in action["runs"]["steps"] if "run" in s)["shell"]
    (tmp_path / "action.yml").write_text(yaml.safe_dump(action))
    assert _schema_check("github-actions", tmp_path / "action.yml").returncode == 1
    workflow = WORKFLOW.read_text().replace("contents: read", "contents: raed")
    (tmp_path / "policy-gate.yml").write_text(workflow)
    assert _schema_check("github-workflows", tmp_path / "policy-gate.yml").returncode == 1


def test_workflow_uses_the_action_from_the_base_branch():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    steps = workflow["jobs"]["gate"]["steps"]
    checkout = next(s for s in steps if s.get("with", {}).get("path") == ".crosssim-action")
    assert checkout["with"]["ref"].startswith("${{ github.base_ref")  # never the pull request's head
    assert any(s.get("uses") == "./.crosssim-action" for s in steps)
    assert "pip install" not in WORKFLOW.read_text()  # no crosssim from an index: the action installs it
    assert workflow["permissions"] == {"contents": "read"} and "pull_request_target" not in workflow[True]


def test_run_scripts_take_inputs_only_through_env():
    """${{ }} inside run: is pasted into the script before bash reads it (a card name or branch name
    could inject commands); every input reaches the scripts as an environment variable."""
    steps = yaml.safe_load(ACTION.read_text())["runs"]["steps"]
    scripts = [s["run"] for s in steps if "run" in s]
    assert len(scripts) >= 4
    assert not any("${{" in s for s in scripts)
    assert "pip install \"$GITHUB_ACTION_PATH[$EXTRAS]\"" in ACTION.read_text()
    # Caches are written only outside pull requests.
    for s in steps:
        if str(s.get("uses", "")).startswith("actions/cache/save"):
            assert s["if"] == "github.event_name != 'pull_request'", s
        assert not str(s.get("uses", "")).startswith("actions/cache@"), "restore+save in one step would save in PRs"


def test_extras_follow_the_engines():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from action_extras import extras_for
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    assert extras_for("mujoco,pybullet,newton-mujoco-warp", "sb3,report") == ["newton", "pybullet", "report", "sb3"]
    assert extras_for("mujoco") == [] and extras_for("physx, newton-xpbd") == ["newton", "physx"]
    with pytest.raises(ValueError, match="not a profile name"):
        extras_for("mujoco;rm -rf ~")
    with pytest.raises(ValueError, match="'reports' is not declared"):
        extras_for("mujoco", "reports")


# -- the action's steps, run as written -------------------------------------------------------------

_EXPR = re.compile(r"\$\{\{\s*([^}]+?)\s*\}\}")


class ActionRun:
    """Runs action.yml's run: steps in order, as the runner would (bash -eo pipefail, env: with its
    ${{ }} expressions filled, $GITHUB_OUTPUT and $GITHUB_STEP_SUMMARY files). ``uses:`` steps
    (caches, upload) are GitHub's own and are skipped; so is "Install crosssim", which needs the
    package index: a `crosssim` on PATH runs this checkout's source instead (tests/test_packaging.py
    installs the built wheel)."""

    def __init__(self, repo: Path, tmp: Path, inputs: dict[str, str], event: str = "pull_request",
                 cache: Path | None = None):
        self.repo, self.tmp = repo, tmp
        spec = yaml.safe_load(ACTION.read_text())
        self.steps = spec["runs"]["steps"]
        self.inputs = {k: str(v.get("default", "")) for k, v in spec["inputs"].items()} | inputs
        self.context = {"github.event_name": event, "github.base_ref": "main", "github.sha": "0" * 40,
                        "runner.os": "Linux", "runner.arch": "X64", "runner.temp": str(tmp / "runner")}
        self.outputs: dict[str, dict[str, str]] = {}
        self.summary = tmp / "step-summary.md"
        bin_dir = tmp / "bin"
        bin_dir.mkdir(exist_ok=True)
        shim = bin_dir / "crosssim"
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m crosssim.cli "$@"\n')
        shim.chmod(0o755)
        (bin_dir / "python").symlink_to(sys.executable)
        (tmp / "runner").mkdir(exist_ok=True)
        self.env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                    "PYTHONPATH": str(ROOT / "src"), "PYTHONSAFEPATH": "1", "GITHUB_ACTION_PATH": str(ROOT),
                    "RUNNER_TEMP": str(tmp / "runner"), "GITHUB_STEP_SUMMARY": str(self.summary),
                    "CROSSSIM_CACHE": str(cache or tmp / "cache")}

    def value(self, expr: str) -> str:
        if expr.startswith("inputs."):
            return self.inputs[expr.removeprefix("inputs.")]
        if expr.startswith("steps."):
            step, _, key = expr.removeprefix("steps.").partition(".outputs.")
            return self.outputs.get(step, {}).get(key, "")
        return self.context[expr]

    def condition(self, text: str | None, failed: bool) -> bool:
        """A step's if: (the forms action.yml uses); without always(), only while nothing failed."""
        text = (text or "").strip()
        always = text.startswith("always() && ")
        text = text.removeprefix("always() && ")
        if failed and not always:
            return False
        if not text:
            return True
        left, op, right = re.fullmatch(r"(\S+) (==|!=) '([^']*)'", text).groups()
        return (self.value(left) == right) == (op == "==")

    def run(self) -> int:
        """The exit status of the first failing step (0 when all pass), as the job would end."""
        first_failure = 0
        for step in self.steps:
            if "uses" in step or step["name"] == "Install crosssim" or not self.condition(step.get("if"),
                                                                                         first_failure != 0):
                continue
            out = self.tmp / f"output-{len(self.outputs)}"
            out.write_text("")
            env = {k: _EXPR.sub(lambda m: self.value(m.group(1)), str(v)) for k, v in step.get("env", {}).items()}
            cwd = _EXPR.sub(lambda m: self.value(m.group(1)), step.get("working-directory", str(self.repo)))
            proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                                  cwd=cwd, env={**self.env, **env, "GITHUB_OUTPUT": str(out)},
                                  capture_output=True, text=True, timeout=900)
            self.log = getattr(self, "log", "") + proc.stdout + proc.stderr
            self.outputs[step.get("id", step["name"])] = dict(
                line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
            first_failure = first_failure or proc.returncode
        return first_failure


def run_git(repo, *args):
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=repo, check=True,
                   capture_output=True)


@pytest.mark.slow
@pytest.mark.skipif(not (POLICY / "model.zip").exists(), reason="policies/hopper-ppo-mujoco not trained (make policies)")
def test_action_steps_in_a_pull_request(tmp_path):
    """Unchanged policy passes; a regression fails; a broken card fails; a detection failure fails."""
    from test_gate import _degrade

    repo = tmp_path / "repo"
    (repo / "policies").mkdir(parents=True)
    shutil.copytree(POLICY, repo / "policies" / "hopper")
    (repo / "crosssim.toml").write_text("[gate]\n")  # the defaults: regression against main
    run_git(repo, "init", "-q", "-b", "main")
    run_git(repo, "add", ".")
    run_git(repo, "commit", "-qm", "good policy")
    inputs = {"engines": "mujoco", "episodes": "2", "max-steps": "150", "base-ref": "main"}
    card = repo / "policies" / "hopper" / "card.yaml"

    def pull_request(name, change, **more) -> ActionRun:
        run_git(repo, "checkout", "-q", "main")
        run_git(repo, "checkout", "-q", "-b", name)
        change()
        run_git(repo, "commit", "-qam", name)
        work = tmp_path / name
        work.mkdir()
        action = ActionRun(repo, work, {**inputs, **more}, cache=tmp_path / "cache")
        action.rc = action.run()
        return action

    # A push to main fills the base branch's row cache (what the action saves outside pull requests).
    warm_dir = tmp_path / "warm"
    warm_dir.mkdir()
    warm = ActionRun(repo, warm_dir, inputs, event="push", cache=tmp_path / "cache")
    assert warm.run() == 0, warm.log
    baseline_rows = Path(warm.outputs["plan"]["rows"])
    cached = sorted(baseline_rows.rglob("*.json"))
    assert cached and "evaluated 1 policies" in warm.log

    same = pull_request("same", lambda: card.write_text(card.read_text() + "# reviewed\n"))
    assert sorted(baseline_rows.rglob("*.json")) == cached  # the baseline came wholly from those rows
    assert same.rc == 0, same.log
    assert same.outputs["gate"] == {"status": "pass", "gated": "1"}, same.log
    from test_gate import _pass_or_high_risk_warning

    _pass_or_high_risk_warning(same.summary.read_text().split("\n---\n")[0])
    assert (Path(same.outputs["plan"]["reports"]) / "policy-1.md").is_file()  # what the optional comment posts
    assert "crosssim gated 1 changed policies: **pass**" in same.summary.read_text()
    reports = Path(same.outputs["plan"]["reports"])
    assert (reports / "policy-1.xml").is_file() and (reports / "policy-1" / "summary.json").is_file()

    worse = pull_request("worse", lambda: _degrade(repo / "policies" / "hopper" / "model.zip", noise=3.0))
    assert worse.rc == 1 and worse.outputs["gate"]["status"] == "fail", worse.log
    text = worse.summary.read_text()
    assert "crosssim gate: FAIL" in text and "**regression vs baseline**" in text, text  # the decisive reason

    broken = pull_request("broken", lambda: card.write_text(card.read_text().replace("task:", "tsak:")))
    assert broken.rc == 1 and broken.outputs["gate"] == {"status": "fail", "gated": "0"}, broken.log
    assert "change detection failed" in broken.summary.read_text() and "tsak" in broken.summary.read_text()

    missing = pull_request("unfetched", lambda: card.write_text(card.read_text() + "# again\n"),
                           **{"base-ref": "origin/main"})  # the base branch was never fetched
    assert missing.rc == 1 and missing.outputs["gate"] == {"status": "fail", "gated": "0"}, missing.log
    assert "fetch it first" in missing.summary.read_text()


def test_workflow_has_one_concurrency_group_per_pull_request():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    group = workflow["concurrency"]
    assert "github.event.pull_request.number" in group["group"]
    assert group["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}"  # pushes to main run out


def _comment_step(tmp_path, gh_exit_codes: list[int], event="pull_request"):
    """The comment step's script as written, with a fake `gh` that records its calls."""
    step = next(s for s in yaml.safe_load(ACTION.read_text())["runs"]["steps"]
                if s["name"] == "Comment on the pull request")
    assert step["if"] == "always() && inputs.comment == 'true'"
    bin_dir, reports = tmp_path / "bin", tmp_path / "reports"
    bin_dir.mkdir(parents=True)
    reports.mkdir()
    (reports / "policy-1.md").write_text("## ❌ crosssim gate: FAIL — hop\n")
    calls = tmp_path / "calls"
    codes = " ".join(map(str, gh_exit_codes))
    (bin_dir / "gh").write_text(f'#!/bin/bash\necho "$@" >> "{calls}"\ncodes=({codes})\n'
                                f'n=$(wc -l < "{calls}")\nexit ${{codes[$((n - 1))]:-0}}\n')
    (bin_dir / "gh").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "RUNNER_TEMP": str(tmp_path),
           "GH_TOKEN": "t", "EVENT": event, "PR": "7", "REPO": "o/r", "REPORTS": str(reports), "STATUS": "fail"}
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], env=env,
                          capture_output=True, text=True, timeout=60)
    return proc, calls.read_text().splitlines() if calls.exists() else []


def test_the_optional_comment_is_off_by_default_and_never_fails_the_job(tmp_path):
    spec = yaml.safe_load(ACTION.read_text())
    assert spec["inputs"]["comment"]["default"] == "false"
    proc, calls = _comment_step(tmp_path / "new", [1, 0])  # no comment yet: --edit-last fails, one is created
    assert proc.returncode == 0 and len(calls) == 2 and "--edit-last" in calls[0] and "--edit-last" not in calls[1]
    assert "crosssim gate: FAIL" in (tmp_path / "new" / "crosssim-comment.md").read_text()
    proc, calls = _comment_step(tmp_path / "fork", [1, 1])  # a fork's read-only token
    assert proc.returncode == 0 and "could not comment" in proc.stdout
    proc, calls = _comment_step(tmp_path / "push", [0], event="push")
    assert proc.returncode == 0 and calls == []
