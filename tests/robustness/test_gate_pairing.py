"""The gate follows a policy across renames and judges physics from the base branch (issue 31).

Red-team cases, each the real CLI in a temporary git repository with a main and a pull-request
branch: the project's Hopper policy with its SB3 action head x0.4 (return about 400 vs 900 at 300
steps) renamed by folder or by card file, or kept with a card that names its own hopper.xml whose
gear 500 and ctrlrange +-0.4 give back the lost torque; and a ``--no-risk`` run whose harness check
fails. Below them, ``pair_policy`` rule by rule, in repositories with no crossval.
"""

import io
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, assert_one_line_error
from test_gate_trust import _env, run_git, cli

HOPPER = ROOT / "policies" / "hopper-ppo-mujoco"
needs_hopper = pytest.mark.skipif(not (HOPPER / "model.zip").exists(), reason="policies/hopper-ppo-mujoco not trained")
RUN = ("--engines", "mujoco", "--episodes", "2", "--max-steps", "300")


def _weaken(model_zip: Path, factor: float = 0.4) -> None:
    """Scale the SB3 policy's action head (the issue's regression: return about halves)."""
    import torch

    with zipfile.ZipFile(model_zip) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    state = torch.load(io.BytesIO(members["policy.pth"]), weights_only=True)
    for key in ("action_net.weight", "action_net.bias"):
        state[key] = state[key] * factor
    buf = io.BytesIO()
    torch.save(state, buf)
    members["policy.pth"] = buf.getvalue()
    with zipfile.ZipFile(model_zip, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def _hopper_repo(tmp_path, *, name: bool = True) -> Path:
    repo = tmp_path / "repo"
    (repo / "policies").mkdir(parents=True)
    shutil.copytree(HOPPER, repo / "policies" / "hop")
    if not name:
        card = repo / "policies" / "hop" / "card.yaml"
        card.write_text(re.sub(r"(?m)^name: .*\n", "", card.read_text()))
    run_git(repo, "init", "-q", "-b", "main")
    run_git(repo, "add", ".")
    run_git(repo, "commit", "-qm", "base")
    run_git(repo, "checkout", "-q", "-b", "pr")
    return repo


def _gate(repo, tmp_path, card: str, *extra):
    return cli("gate", "--policy", card, "--base", "main", "--baseline-ref", "main", *RUN, "--out", tmp_path / "out",
               *extra, cwd=repo, env=_env(tmp_path))


def _row(stdout: str, check: str) -> str:
    """The check table's row of ``check``, Markdown escapes removed."""
    rows = [line.replace("\\", "") for line in stdout.splitlines() if line.startswith(f"| {check} |")]
    assert rows, stdout
    return rows[0]


@needs_hopper
@pytest.mark.parametrize("keep_name", [True, False], ids=["by name", "by git rename detection"])
def test_a_renamed_folder_keeps_its_regression_check(tmp_path, keep_name):
    """hop -> hop-v2 with weaker weights: FAIL, not "new policy: no regression check"."""
    repo = _hopper_repo(tmp_path, name=keep_name)
    _weaken(repo / "policies" / "hop" / "model.zip")
    run_git(repo, "mv", "policies/hop", "policies/hop-v2")
    run_git(repo, "commit", "-qam", "rename and weaken")
    proc = _gate(repo, tmp_path, "policies/hop-v2/card.yaml")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "FAIL" in _row(proc.stdout, "regression vs baseline")
    how = "by the card name" if keep_name else "by git's rename detection (policies/hop/"
    assert how in _row(proc.stdout, "baseline") and "policies/hop/card.yaml" in _row(proc.stdout, "baseline")


@needs_hopper
def test_a_renamed_card_file_keeps_its_regression_check(tmp_path):
    """card.yaml -> model.yaml in the same folder, weaker weights: FAIL."""
    repo = _hopper_repo(tmp_path, name=False)
    _weaken(repo / "policies" / "hop" / "model.zip")
    run_git(repo, "mv", "policies/hop/card.yaml", "policies/hop/model.yaml")
    run_git(repo, "commit", "-qam", "rename card file and weaken")
    proc = _gate(repo, tmp_path, "policies/hop/model.yaml")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "FAIL" in _row(proc.stdout, "regression vs baseline")
    assert "paired with policies/hop/card.yaml" in _row(proc.stdout, "baseline")


@needs_hopper
def test_an_own_robot_cannot_hide_a_regression(tmp_path):
    """Weaker weights and a card naming its own hopper.xml (gear 500, ctrlrange +-0.4: the torques of
    before): the regression check runs on the base branch's robot and FAILs; the new robot file
    and the card's robot field are listed on a WARN line of their own."""
    import gymnasium

    repo = _hopper_repo(tmp_path)
    folder = repo / "policies" / "hop"
    _weaken(folder / "model.zip")
    xml = (Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets" / "hopper.xml").read_text()
    strong = xml.replace('gear="200.0"', 'gear="500.0"').replace('ctrlrange="-1.0 1.0"', 'ctrlrange="-0.4 0.4"')
    assert strong.count('gear="500.0"') == 3 and strong.count('ctrlrange="-0.4 0.4"') == 3, "hopper.xml changed"
    (folder / "hopper.xml").write_text(strong)
    card = yaml.safe_load((folder / "card.yaml").read_text())
    (folder / "card.yaml").write_text(yaml.safe_dump({**card, "robot": "hopper.xml"}, sort_keys=False))
    run_git(repo, "add", ".")
    run_git(repo, "commit", "-qm", "weaker weights, stronger robot")
    proc = _gate(repo, tmp_path, "policies/hop/card.yaml")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "FAIL" in _row(proc.stdout, "regression vs baseline")
    physical = _row(proc.stdout, "physical files changed")
    assert "WARN" in physical and "policies/hop/hopper.xml (new)" in physical and "card field robot" in physical
    (repo / "crosssim.toml").write_text('[gate]\nphysical_changes = "fail"\n')  # the base config decides
    run_git(repo, "checkout", "-q", "main")
    run_git(repo, "add", "crosssim.toml")
    run_git(repo, "commit", "-qm", "physical changes fail")
    run_git(repo, "checkout", "-q", "pr")
    run_git(repo, "rebase", "-q", "main")
    proc = _gate(repo, tmp_path, "policies/hop/card.yaml")
    assert "FAIL" in _row(proc.stdout, "physical files changed"), proc.stdout + proc.stderr


def test_no_risk_harness_mismatch_fails_the_gate(tmp_path):
    """``crossval --no-risk`` of a policy that does not do its task (0 of 5 episodes succeed, enough to
    decide: 2 would be "too few episodes to decide"): the gate FAILs on its harness check, against a
    baseline as without one."""
    import torch

    folder = tmp_path / "p"
    folder.mkdir()
    lin = torch.nn.Linear(11, 3)
    with torch.no_grad():
        lin.weight.zero_()
        lin.bias.fill_(1.0)  # full torque on every joint: the hopper falls at once
    torch.jit.script(torch.nn.Sequential(lin)).save(str(folder / "policy.pt"))
    (folder / "card.yaml").write_text(yaml.safe_dump({"name": "flail", "task": "Hopper", "control_period": 0.008,
                                                      "policy": {"file": "policy.pt", "format": "torchscript"},
                                                      "trained_in": "mujoco"}))
    env = _env(tmp_path)
    cv = cli("crossval", "--policy", folder / "card.yaml", "--engines", "mujoco", "--episodes", "5", "--no-risk",
             "--no-report", "--quiet", "--out", tmp_path / "run", cwd=tmp_path, env=env)
    assert "0 of 5 episodes succeed" in cv.stdout, cv.stdout + cv.stderr
    for extra in (("--baseline", tmp_path / "run"), ()):
        proc = cli("gate", "--run", tmp_path / "run", *extra, cwd=tmp_path, env=env)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "FAIL" in _row(proc.stdout, "harness check") and "0 of 5 episodes succeed" in proc.stdout


# -- pairing, rule by rule (no crossval) ---------------------------------------------------------------


def _card(folder: Path, good_policy: Path, **fields) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "policy.pt").exists():
        shutil.copy(good_policy / "policy.pt", folder / "policy.pt")
    card = {"task": "Hopper", "policy": {"file": "policy.pt", "format": "torchscript"}, "control_period": 0.008,
            **fields}
    (folder / "card.yaml").write_text(yaml.safe_dump(card))


def _pair(repo: Path, card: str):
    from crosssim.pairing import against_base
    from crosssim.trust import trusted_base

    with trusted_base("main", root=repo) as base:
        got = against_base(repo / card, base)
        return got.pairing.how, got.pairing.removed, got.physical_changes


@pytest.fixture
def base_repo(tmp_path, good_policy):
    repo = tmp_path / "repo"
    _card(repo / "policies" / "hop", good_policy)
    _card(repo / "policies" / "walk", good_policy, name="walker")
    (repo / "policies" / "walk" / "policy.pt").write_bytes((good_policy / "policy.pt").read_bytes() + b"\0")
    run_git(repo, "init", "-q", "-b", "main")
    run_git(repo, "add", ".")
    run_git(repo, "commit", "-qm", "base")
    run_git(repo, "checkout", "-q", "-b", "pr")
    return repo


def test_pairing_rules(base_repo, good_policy):
    repo = base_repo
    assert "policies/hop/card.yaml at main: the same card path" in _pair(repo, "policies/hop/card.yaml")[0]
    _card(repo / "policies" / "other", good_policy, name="walker")  # walk's name, hop's weights
    assert "policies/walk/card.yaml at main by the card name 'walker'" in _pair(repo, "policies/other/card.yaml")[0]
    _card(repo / "policies" / "copy", good_policy)  # hop's weights, a name of its own
    assert "policies/hop/card.yaml at main by the weights (SHA-256" in _pair(repo, "policies/copy/card.yaml")[0]
    _card(repo / "policies" / "moved", good_policy, name="moved", replaces="../walk")
    assert "policies/walk/card.yaml at main by the card's replaces: field" in _pair(repo, "policies/moved/card.yaml")[0]


def test_pairing_by_rename_and_an_unpaired_new_policy(base_repo, good_policy):
    repo = base_repo
    (repo / "policies" / "hop" / "policy.pt").write_bytes((good_policy / "policy.pt").read_bytes()[:-64] + b"x" * 64)
    run_git(repo, "mv", "policies/hop", "policies/hop2")
    run_git(repo, "commit", "-qam", "rename hop")
    how, removed, _ = _pair(repo, "policies/hop2/card.yaml")
    assert "policies/hop/card.yaml at main by git's rename detection" in how, how
    _card(repo / "policies" / "fresh", good_policy, name="fresh")
    (repo / "policies" / "fresh" / "policy.pt").write_bytes(b"new weights")
    how, removed, _ = _pair(repo, "policies/fresh/card.yaml")
    assert "paired with no card at main" in how and removed == ("policies/hop/card.yaml",), (how, removed)


def test_pairing_refuses_to_guess(base_repo, good_policy):
    repo = base_repo
    _card(repo / "policies" / "x", good_policy, name="x", replaces="../nowhere")
    assert_one_line_error(cli("gate", "--policy", "policies/x/card.yaml", "--baseline-ref", "main", *RUN, cwd=repo,
                              env=_env(repo.parent)), "field 'replaces' names policies/nowhere")
    _card(repo / "policies" / "x", good_policy, name="x", replaces="../../../elsewhere")
    with pytest.raises(Exception, match="must be a path inside the repository"):
        _pair(repo, "policies/x/card.yaml")
    shutil.copytree(repo / "policies" / "walk", repo / "policies" / "walk2")
    run_git(repo, "add", ".")
    run_git(repo, "commit", "-qm", "two walkers")
    run_git(repo, "checkout", "-q", "main")
    run_git(repo, "merge", "-q", "pr")  # main now has two cards named walker
    run_git(repo, "checkout", "-q", "-b", "pr2")
    _card(repo / "policies" / "y", good_policy, name="walker")
    with pytest.raises(Exception, match="2 cards at main.*add `replaces:"):
        _pair(repo, "policies/y/card.yaml")


def test_physical_changes_are_listed_by_content(base_repo, good_policy):
    import gymnasium

    repo = base_repo
    assert _pair(repo, "policies/hop/card.yaml")[2] == ()
    (repo / "simulators").mkdir()
    (repo / "simulators" / "mujoco.yaml").write_text("engine: mujoco\n")
    shutil.copy(Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets" / "hopper.xml",
                repo / "policies" / "hop" / "hopper.xml")
    (repo / "policies" / "hop" / "gap.yaml").write_text("latency: 0.0\n")
    _card(repo / "policies" / "hop", good_policy, robot="hopper.xml", deployment={"file": "gap.yaml"})
    changes = _pair(repo, "policies/hop/card.yaml")[2]
    assert changes == ("policies/hop/gap.yaml (new)", "policies/hop/hopper.xml (new)", "simulators/mujoco.yaml (new)",
                       "card field robot", "card field deployment"), changes


def test_comparison_card_is_the_pr_policy_in_the_base_world(base_repo, good_policy, tmp_path):
    """The card the regression check runs: the PR's weights and normalisation, the base card's robot
    and deployment gap, every path absolute."""
    import gymnasium

    from crosssim.card import load_card
    from crosssim.pairing import comparison_card

    repo = base_repo
    assets = Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets"
    pr = repo / "policies" / "hop"
    shutil.copy(assets / "hopper.xml", pr / "hopper.xml")
    (pr / "vecnormalize.json").write_text('{"mean": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], '
                                          '"var": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]}')
    _card(pr, good_policy, robot="hopper.xml", deployment={"latency": 0.0},
          observation={"normalize": {"file": "vecnormalize.json"}})
    base = tmp_path / "base" / "hop"
    _card(base, good_policy, robot="gymnasium:hopper.xml", deployment={"latency": 0.02})
    (tmp_path / "cmp").mkdir()
    made = load_card(comparison_card(load_card(pr / "card.yaml"), load_card(base / "card.yaml"), tmp_path / "cmp"))
    assert made.policy_file == (pr / "policy.pt").resolve()
    assert made.robot == str((assets / "hopper.xml").resolve())
    assert made.deployment.stated() == {"latency": 0.02}
    assert made.normalization is not None
