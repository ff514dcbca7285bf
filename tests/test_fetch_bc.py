"""The committed behaviour-cloned Fetch policy (policies/fetch-pick-and-place-bc, written by
scripts/train_fetch_bc.py) loads without trust, as data, and acts: four finite commands in the
card's clip, batched rows equal to single calls, and on a real first observation it heads where
the scripted expert heads."""

from pathlib import Path

import numpy as np
import pytest

from crosssim.card import load_card
from crosssim.policies.load import load_policy
from crosssim.policies.sb3 import SB3ActorPolicy
from crosssim.tasks import fetch_expert

CARD = Path(__file__).resolve().parents[1] / "policies" / "fetch-pick-and-place-bc" / "card.yaml"


def test_card_loads_untrusted_and_acts():
    card = load_card(CARD)
    policy = load_policy(card, obs_size=31, action_size=4, trust=False)
    assert isinstance(policy.inner, SB3ActorPolicy)  # the weights read as arrays, SB3 never imported to load
    rng = np.random.default_rng(0)
    mean, std = policy.normalizer.mean, np.sqrt(policy.normalizer.var)
    batch = mean + std * rng.standard_normal((8, 31))
    actions = policy.act(batch)
    assert actions.shape == (8, 4) and np.isfinite(actions).all()
    assert (np.abs(actions) <= 1.0).all()
    single = policy.act(batch[3])
    assert single.shape == (4,)
    np.testing.assert_allclose(single, actions[3], atol=1e-12)


def test_first_action_follows_the_expert():
    pytest.importorskip("gymnasium_robotics", reason="Fetch's scene files: pip install 'crosssim[robotics]'")
    from crosssim.gym_env import CrossSimEnv

    card = load_card(CARD)
    policy = load_policy(card, obs_size=31, action_size=4, trust=False)
    env = CrossSimEnv(card=card)
    try:
        for seed in range(3):
            obs, _ = env.reset(seed=seed)
            a, e = policy.act(obs), fetch_expert.pick_and_place(obs)
            cos = float(a[:3] @ e[:3] / (np.linalg.norm(a[:3]) * np.linalg.norm(e[:3])))
            assert cos > 0.9, (seed, a, e)
            assert np.sign(a[3]) == np.sign(e[3])  # opens on the approach
    finally:
        env.close()
