"""``crossval --quick``: the caps it applies, read by everything downstream through the plan."""

from pathlib import Path

from crosssim.runner.crossval import (QUICK_EPISODES, QUICK_MAX_STEPS, QUICK_SWEEP_EPISODES, CrossvalConfig,
                                      plan_crossval, quick_config)

ROOT = Path(__file__).resolve().parents[1]
CARD = ROOT / "policies" / "hopper-ppo-mujoco" / "card.yaml"


def test_quick_caps_episodes_sweep_episodes_and_steps_and_nothing_without_it():
    plain = CrossvalConfig(policy="x", episodes=20, sweep_episodes=6)
    assert quick_config(plain) is plain
    quick = quick_config(CrossvalConfig(policy="x", episodes=20, sweep_episodes=6, quick=True))
    assert (quick.episodes, quick.sweep_episodes, quick.max_steps) == (QUICK_EPISODES, QUICK_SWEEP_EPISODES,
                                                                      QUICK_MAX_STEPS)
    small = quick_config(CrossvalConfig(policy="x", episodes=1, sweep_episodes=1, max_steps=50, quick=True))
    assert (small.episodes, small.sweep_episodes, small.max_steps) == (1, 1, 50)  # caps, never raises


def test_the_plan_carries_the_capped_config(tmp_path):
    plan = plan_crossval(CrossvalConfig(policy=str(CARD), engines=("mujoco",), out=str(tmp_path), quick=True))
    assert len(plan.episodes) == QUICK_EPISODES and plan.config.max_steps == QUICK_MAX_STEPS
    assert len(plan.sweep_episodes) == QUICK_SWEEP_EPISODES
    assert plan.job("mujoco").max_steps == QUICK_MAX_STEPS


def test_quick_never_lengthens_a_task_shorter_than_its_cap(tmp_path):
    # ant-locomotion's card: 5 s at 0.05 s = 100 control steps; a 300-step cap must not make it 300
    card = ROOT / "tests" / "cards" / "ant-locomotion.yaml"
    plan = plan_crossval(CrossvalConfig(policy=str(card), engines=("mujoco",), out=str(tmp_path), quick=True,
                                        trust_policy_code=True))
    assert plan.harness.task.max_steps == 100
    assert plan.config.max_steps == 100 and plan.job("mujoco").max_steps == 100
