"""Ranked harness-mismatch suspects: each classic card mistake's fix run in short episodes."""

from __future__ import annotations

import dataclasses

import yaml

from conftest import CARDS, requires_fixtures
from crosssim.card import load_card
from crosssim.diagnose import SuspectRanking, SuspectScore, _swap_sides, rank_suspects, suspects
from crosssim.runner.harness import Harness


def test_left_right_swap_exchanges_the_first_pair_of_side_names_found():
    assert _swap_sides(("left_hip", "left_knee", "right_hip", "right_knee")) == (
        "right_hip", "right_knee", "left_hip", "left_knee")
    assert _swap_sides(("FL_calf", "FR_calf", "RL_calf", "RR_calf")) == ("FR_calf", "FL_calf", "RR_calf", "RL_calf")
    assert _swap_sides(("LF_HAA", "RF_HAA", "LH_HAA", "RH_HAA")) == ("RF_HAA", "LF_HAA", "RH_HAA", "LH_HAA")
    assert _swap_sides(("FL_hip", "RL_hip")) is None  # no right side to swap with
    assert _swap_sides(("hip", "knee")) is None
    assert _swap_sides(("left_hip", "knee")) is None  # no right side to swap with


def test_every_classic_mistake_is_a_suspect_with_one_change(tmp_path):
    (tmp_path / "p.pt").write_bytes(b"")
    raw = {"name": "s", "task": "Locomotion", "robot": "gymnasium:ant.xml", "control_period": 0.05,
           "policy": {"file": "p.pt", "format": "torchscript"},
           "observation": {"terms": ["projected_gravity", {"name": "joint_pos", "scale": 2.0}],
                           "history": {"length": 2}}}
    path = tmp_path / "card.yaml"
    path.write_text(yaml.safe_dump(raw))
    card = load_card(path)
    found = dict(suspects(card))
    assert len(found) == 4 * 2 + 4  # per term: sign, zeroed, x2, x0.5; quaternion, layout, fill, first call
    assert found["observation.terms[1] (joint_pos) scale x0.5"].observation.terms[1].scale == 1.0
    assert found["observation.terms[0] (projected_gravity) sign flipped"].observation.terms[0].scale == -1.0
    assert found["observation.quaternion_order wxyz -> xyzw"].observation.quaternion_order == "xyzw"
    assert found["observation.history.layout frame_major -> term_major"].observation.layout == "term_major"
    assert found["first_call reset -> after_one_period"].first_call == "after_one_period"
    assert card.observation.terms[1].scale == 2.0  # the card itself is untouched


def test_hint_names_the_best_fix_or_says_none_explains_the_gap():
    scores = (SuspectScore("observation.quaternion_order xyzw -> wxyz", {"survival": 1.0}, 0.95),
              SuspectScore("first_call reset -> after_one_period", {"survival": 0.0}, 0.0))
    from crosssim.diagnose import _cost

    ranking = SuspectRanking({"survival": 1.0}, {"survival": 0.0}, scores, _cost(2, 2, 100, "mujoco"))
    assert ranking.hint().startswith("most likely: observation.quaternion_order xyzw -> wxyz - it removes 95 %")
    assert "2 suspects + the card as written, 2 episodes of 100 control steps each in mujoco: 600 steps" in ranking.hint()
    weak = SuspectRanking({"survival": 1.0}, {"survival": 0.0}, scores[::-1], ranking.cost)
    assert weak.hint().startswith("no single card fix recovers the target survival")


def _g1_ranking(**change):
    from crosssim.policies import load_policy

    hand = load_card(CARDS / "robots" / "unitree-g1.yaml")
    bad = dataclasses.replace(hand, **change(hand) if callable(change) else change)
    h = Harness.from_card(bad)
    policy = load_policy(bad, obs_size=h.obs_size, action_size=h.action_size)
    return rank_suspects(bad, policy, episodes=1)  # 31 suspects x 1 episode of 2 s (100 policy calls)


@requires_fixtures
def test_g1_card_with_the_wrong_quaternion_order_names_it_first():
    hand = load_card(CARDS / "robots" / "unitree-g1.yaml")
    ranking = _g1_ranking(observation=dataclasses.replace(hand.observation, quaternion_order="xyzw"))
    best = ranking.scores[0]
    assert best.suspect == "observation.quaternion_order xyzw -> wxyz", ranking.hint()
    assert ranking.baseline["survival"] == 0.0 and best.values["survival"] == 1.0  # falls in 2 s, walks when fixed
    assert best.recovered > 0.8 and ranking.scores[1].recovered < 0.5 * best.recovered
    assert ranking.hint().startswith("most likely: observation.quaternion_order xyzw -> wxyz")


@requires_fixtures
def test_g1_card_with_legs_swapped_names_the_joint_order_and_its_twin_first():
    """Swapping the G1's legs is, for a symmetric gait, the same as shifting its phase by half a
    period, which is what flipping the sign of both sin and cos does: the two fixes tie (0.919 and
    0.917 measured) and lead the rest (0.864 next)."""
    hand = load_card(CARDS / "robots" / "unitree-g1.yaml")
    ranking = _g1_ranking(joints=_swap_sides(hand.joints))
    top = {s.suspect for s in ranking.scores[:2]}
    assert top == {"joints: left and right swapped", "observation.terms[6] (gait_phase) sign flipped"}, ranking.hint()
    assert ranking.baseline["survival"] == 0.0 and ranking.scores[0].values["survival"] == 1.0


def test_real_logs_rank_the_card_fix_that_rebuilds_the_logged_inputs(tmp_path):
    """Logs of the arm as deployed; a card whose joint_vel term has its sign flipped: the
    inputs rebuilt with the sign fix match the logged ones, so it is named first (no simulation)."""
    from crosssim.diagnose import rank_log_suspects
    from crosssim.profiles import load_profile
    from crosssim.real.logs import read_logs
    from crosssim.real.simulate import SimulateLogsConfig, simulate_logs
    from crosssim.observations import TermSpec

    arm = CARDS / "real" / "arm3-excite.yaml"
    simulate_logs(arm, load_profile("mujoco"), tmp_path, SimulateLogsConfig(episodes=1, seconds=1), trust=True)
    card = load_card(arm)
    logs = read_logs(tmp_path, Harness.from_card(card))
    assert rank_log_suspects(card, logs).baseline["input error"] < 0.05  # the right card rebuilds them
    terms = list(card.observation.terms)
    terms[1] = TermSpec("joint_vel", -1.0)
    bad = dataclasses.replace(card, observation=dataclasses.replace(card.observation, terms=tuple(terms)))
    ranking = rank_log_suspects(bad, logs)
    assert ranking.scores[0].suspect == "observation.terms[1] (joint_vel) sign flipped", ranking.hint()
    assert ranking.scores[0].recovered > 0.9 and ranking.scores[1].recovered < 0.6
    assert "no simulation" in ranking.hint()


@requires_fixtures
def test_g1_card_with_the_wrong_history_layout_names_it_first(tmp_path):
    """The G1 policy behind a 2-frame frame-major history, carded as term-major: the layout fix
    removes 95 % of the distance, the next suspect 3 % (measured)."""
    from test_robots import _history_wrapper

    hand = load_card(CARDS / "robots" / "unitree-g1.yaml")
    ranking = _g1_ranking(policy_file=_history_wrapper(tmp_path),
                          observation=dataclasses.replace(hand.observation, history=2, layout="term_major"))
    assert ranking.scores[0].suspect == "observation.history.layout term_major -> frame_major", ranking.hint()
    assert ranking.scores[0].recovered > 0.8 and ranking.scores[1].recovered < 0.3
