"""Corrections (docs/correction.md): a simulated operator's logs -> a residual -> a composed policy
that loads like any other, equals base + residual step for step, and runs in a crossval."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from crosssim.cli import main
from crosssim.engines.settings import EngineProfile
from crosssim.profiles import split_settings

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "policies" / "hopper-ppo-mujoco" / "card.yaml"
OPERATOR = ROOT / "policies" / "hopper-ppo-150k-dr-s0" / "card.yaml"
SLIPPERY = {"friction_scale": 0.3}


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    """Corrections on a slippery floor: the operator (a second policy) takes over when the torso tilts."""
    from crosssim.correct.collect import CollectConfig, collect

    out = tmp_path_factory.mktemp("corrections")
    profile = split_settings(EngineProfile("mujoco-slippery", "mujoco"), SLIPPERY)
    stats = collect(BASE, profile, out,
                    CollectConfig(takeover="tilt>0.1", operator=str(OPERATOR), episodes=3, steps=120, seed=3))
    assert len(stats.paths) == 3 and 0 < stats.rate < 1
    return out


def test_collected_logs_validate_and_carry_interventions(logs, capsys):
    assert main(["logs", "validate", str(logs), "--corrections"]) == 0
    out = capsys.readouterr().out
    assert "intervention steps" in out and "ok" in out
    from crosssim.real.logs import read_log

    log = read_log(sorted(logs.glob("*.parquet"))[0])
    on = log.intervened
    assert on.any() and not on.all()
    # the motors got the operator's action where it intervened, the policy's elsewhere
    assert np.array_equal(log.applied_action[~on], log.action[~on])
    assert not np.allclose(log.applied_action[on], log.action[on])


@pytest.mark.parametrize("gate", [True, False])
def test_train_composes_base_plus_residual_step_for_step(logs, tmp_path, gate):
    import torch

    from crosssim.card import load_card
    from crosssim.correct.train import TrainConfig, fit_residual, read_corrections, train
    from crosssim.policies import load_policy
    from crosssim.policies.tscheck import check_torchscript
    from crosssim.real.logs import read_log
    from crosssim.runner.harness import Harness

    config = TrainConfig(epochs=20, seed=1, gate=gate)
    record = train(logs, BASE, tmp_path / "corrected", config)
    assert record["logs"]["interventions"] > 0 and len(record["logs"]["files"]) == 3
    assert record["losses"]["residual_mse_interventions"] < record["losses"]["delta_ms_interventions"]
    card = load_card(tmp_path / "corrected" / "card.yaml")
    assert card.policy_format == "torchscript" and card.document.training["base"]["name"] == "hopper-ppo-mujoco"
    check_torchscript(card.policy_file)  # the allow-list accepts it: it loads untrusted
    harness = Harness.from_card(card)
    composed = load_policy(card, obs_size=harness.obs_size, action_size=harness.action_size)
    base_card = load_card(BASE)
    base = load_policy(base_card, obs_size=harness.obs_size, action_size=harness.action_size)
    # the same residual again (same seed, same data): the composed file holds exactly it
    residual, g, _ = fit_residual(read_corrections(logs, base_card, harness), config)
    assert (g is not None) == gate
    obs = read_log(sorted(logs.glob("*.parquet"))[0]).obs
    differs = 0
    for o in obs:
        x = torch.as_tensor(base_card.normalization(o), dtype=torch.float32)[None]
        with torch.no_grad():
            r = (residual(x) * (torch.sigmoid(g(x)) if gate else 1.0))[0].numpy()
        want = np.clip(base.act(o) + r, -1.0, 1.0)
        np.testing.assert_allclose(composed.act(o), want, atol=2e-5)
        differs += not np.allclose(composed.act(o), base.act(o), atol=1e-3)
    assert differs > 0  # the residual does something


def test_composed_policy_runs_in_crossval(logs, tmp_path):
    from crosssim.correct.train import TrainConfig, train
    from crosssim.evaluate import crossval
    from crosssim.runner.crossval import CrossvalConfig

    train(logs, BASE, tmp_path / "corrected", TrainConfig(epochs=5))
    run = crossval(CrossvalConfig(policy=str(tmp_path / "corrected" / "card.yaml"), engines=("mujoco",), episodes=2,
                                  max_steps=40, out=str(tmp_path / "run"), inline=True, risk=False, report=False,
                                  cache=False))
    assert (run.out / "summary.json").is_file() and run.summary.policy_file.endswith("policy.pt")
    mujoco = run.summary.engines["mujoco"]
    assert mujoco.episodes == 2 and mujoco.failed == 0 and np.isfinite(mujoco.mean_return)
    assert "hopper-ppo-mujoco" in (tmp_path / "corrected" / "card.yaml").read_text()  # provenance: the base
    # the corrected card names its base: crossval ran it with the same settings and compared them
    versus = run.summary.correction
    assert versus is not None and Path(versus["base_card"]) == BASE.resolve()
    assert (run.out / "base" / "summary.json").is_file() and set(versus["engines"]) == {"mujoco"}
    row = versus["engines"]["mujoco"]
    assert row["corrected"]["mean_return"] == run.summary.engines["mujoco"].mean_return and np.isfinite(row["base"]["mean_return"])
    assert json.loads((run.out / "summary.json").read_text())["correction"]["engines"]["mujoco"] == row
    from crosssim.report import write_report

    html = write_report(run.out, filmstrips=False).read_text()
    assert 'id="versus-engines"' in html and "versus-regression" in html


def _copy_one(logs: Path, dst: Path) -> Path:
    dst.mkdir()
    src = sorted(logs.glob("*.parquet"))[0]
    shutil.copy(src, dst / src.name)
    side = json.loads(src.with_suffix(".json").read_text())
    side["card"] = str(BASE)
    (dst / src.name).with_suffix(".json").write_text(json.dumps(side))
    return dst / src.name


def _edit(path: Path, change) -> None:
    import pandas as pd

    change(pd.read_parquet(path)).to_parquet(path, index=False)


def test_bad_correction_logs_are_one_line_each(logs, tmp_path, capsys):
    from crosssim.real.logs import validate

    flag_only = _copy_one(logs, tmp_path / "flag-only")
    _edit(flag_only, lambda df: df.drop(columns=[c for c in df.columns if c.startswith("operator.")]))
    _, problems = validate(flag_only)
    assert len(problems) == 1 and "no operator action" in problems[0] and flag_only.name in problems[0]

    not_binary = _copy_one(logs, tmp_path / "not-binary")
    _edit(not_binary, lambda df: df.assign(**{"intervention.active": df["intervention.active"] * 0.5}))
    _, problems = validate(not_binary)
    assert len(problems) == 1 and "must be 0 or 1" in problems[0]

    operator_only = _copy_one(logs, tmp_path / "operator-only")
    _edit(operator_only, lambda df: df.drop(columns=["intervention.active"]))
    _, problems = validate(operator_only)
    assert len(problems) == 1 and "without an intervention.active column" in problems[0]

    none = _copy_one(logs, tmp_path / "none")
    _edit(none, lambda df: df.assign(**{"intervention.active": 0.0}))
    assert main(["logs", "validate", str(none)]) == 0  # a log without corrections is still a log
    assert main(["logs", "validate", str(none), "--corrections"]) == 1
    assert "no intervention" in capsys.readouterr().out
    assert main(["correct", "train", "--logs", str(none), "--policy", str(BASE), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no intervention" in err[0] and "none" in err[0]


def test_residual_inputs_must_match_the_card(logs, tmp_path, capsys):
    wrong = _copy_one(logs, tmp_path / "wrong")
    _edit(wrong, lambda df: df.drop(columns=["obs.10"]))  # 10 inputs; the card's task has 11
    assert main(["correct", "train", "--logs", str(wrong), "--policy", str(BASE), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "obs" in err[0] and "11" in err[0]


def test_takeover_condition_errors_are_one_line(tmp_path, capsys):
    from crosssim.correct.operator import CorrectionError, parse_condition

    assert [t.text() for t in parse_condition("tilt>0.2, height<0.8,|joint:thigh_joint|>1")] == \
        ["tilt>0.2", "height<0.8", "|joint:thigh_joint|>1"]
    with pytest.raises(CorrectionError, match="cannot read 'tilt=0.2'"):
        parse_condition("tilt=0.2")
    assert main(["correct", "collect", "--policy", str(BASE), "--takeover", "joint:nope>1", "--episodes", "1",
                 "--steps", "2"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'nope' is not a joint" in err[0]


def test_the_operator_hands_back_after_hold_clear_steps():
    from types import SimpleNamespace

    from crosssim.card import load_card
    from crosssim.correct.operator import Trigger, parse_condition
    from crosssim.runner.harness import Harness

    trigger = Trigger(parse_condition("height<1.0"), Harness.from_card(load_card(BASE)), hold=3)
    frames = [SimpleNamespace(base_pos=np.array([0, 0, z])) for z in (1.2, 0.9, 1.1, 1.1, 1.1, 1.1)]
    assert [trigger.update(f, {}) for f in frames] == [False, True, True, True, False, False]


def test_collect_command_writes_logs_in_a_perturbed_profile(tmp_path, capsys):
    assert main(["correct", "collect", "--policy", str(BASE), "--perturb", "friction_scale=0.3", "--takeover",
                 "|joint:rooty|>0.05", "--episodes", "1", "--steps", "30", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "mujoco-friction_scale0.3:" in out and "intervention rate" in out
    side = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert side["operator"].startswith("scripted hold") and "rooty" in side["operator"]
    assert main(["correct", "collect", "--policy", str(BASE), "--perturb", "friction_scale", "--takeover",
                 "tilt>1", "--episodes", "1", "--steps", "2"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--perturb: cannot read 'friction_scale'" in err[0]


@pytest.mark.parametrize("budget,noise", [(None, 0.0), (6, 0.0), (None, 0.3)])
def test_a_limited_or_noisy_operator(tmp_path, budget, noise):
    """An intervention budget caps the operator's steps per episode; a noisy operator's logged
    action is its policy's plus noise of the stated size (exact without noise)."""
    from crosssim.card import load_card
    from crosssim.correct.collect import CollectConfig, collect
    from crosssim.policies import load_policy
    from crosssim.real.logs import read_logs
    from crosssim.runner.harness import Harness

    profile = split_settings(EngineProfile("mujoco-slippery", "mujoco"), SLIPPERY)
    stats = collect(BASE, profile, tmp_path, CollectConfig(takeover="|joint:rooty|>0.05", operator=str(OPERATOR),
                                                           episodes=2, steps=80, seed=3, budget=budget,
                                                           operator_noise=noise))
    if budget is None:
        assert max(stats.interventions) > 6  # the budget below binds
    else:
        assert max(stats.interventions) <= budget and sum(stats.interventions) > 0
    card = load_card(OPERATOR)
    harness = Harness.from_card(card)
    op = load_policy(card, obs_size=harness.obs_size, action_size=harness.action_size)
    diff = np.concatenate([log.operator[log.intervened] - np.array([op.act(o) for o in log.obs[log.intervened]])
                           for log in read_logs(tmp_path)])
    assert diff.size and (np.abs(diff).max() < 1e-5 if noise == 0 else abs(diff.std() - noise) < 0.25 * noise)
