"""The risk profile on a fixed seed pair: the same PPO recipe with and without domain randomisation."""

import sys

import numpy as np
import pytest

from conftest import ROOT
from crosssim.card import load_card
from crosssim.policies import load_policy
from crosssim.evaluate import crossval
from crosssim.runner import CrossvalConfig
from crosssim.runner.harness import Harness

DR = ROOT / "policies" / "hopper-ppo-150k-dr-s0" / "card.yaml"
NODR = ROOT / "policies" / "hopper-ppo-150k-nodr-s0" / "card.yaml"


def test_components_hand_computed():
    from crosssim.risk import _components

    conditions = ["nominal", "actuation", "timing", "contact", "combined"]
    # returns[engine, condition, episode]: the reference (row 0) and an engine reaching half of it.
    R = np.array([[[100, 100], [80, 80], [100, 100], [50, 50], [40, 40]],
                  [[50, 50], [25, 25], [60, 60], [50, 50], [np.nan, np.nan]]], float)
    out = _components(R, 0, conditions)
    assert out["actuation"] == pytest.approx((1 * 0.2 + 0.5 * 0.5) / 1.5)  # weights 1 and 50/100
    assert out["timing"] == pytest.approx(0.0)  # gains are not negative drops
    assert out["contact"] == pytest.approx(0.5 / 1.5)
    assert out["combined"] == pytest.approx(0.6)  # the failed engine's episodes drop out
    assert out["engine_disagreement"] == pytest.approx(0.5) and out["aggregate"] == out["combined"]
    # An engine where the policy fails outright (no return) carries no weight at all.
    R[1, 0] = -10
    assert _components(R, 0, conditions)["actuation"] == pytest.approx(0.2)


@pytest.mark.skipif(not (DR.exists() and NODR.exists()), reason="example DR/no-DR policies not present")
def test_domain_randomised_policy_ranks_safer(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    from realities import ALL, run_reality

    profile, truth = {}, {}
    for name, card_path in (("dr", DR), ("nodr", NODR)):
        summary = crossval(CrossvalConfig(policy=str(card_path), engines=("mujoco",), episodes=3,
                                          out=str(tmp_path / name), report=False)).summary
        profile[name] = summary.risk.aggregate.drop
        card = load_card(card_path)
        h = Harness.from_card(card)
        real = np.mean(run_reality(h, load_policy(card, obs_size=h.obs_size, action_size=h.action_size), ALL,
                                   episode_seeds=range(3)))
        sim = summary.engines["mujoco"].mean_return
        truth[name] = (sim - real) / abs(sim)
    assert truth["dr"] < truth["nodr"], truth  # what the held-out all-gaps reality says
    assert profile["dr"] < profile["nodr"], profile
