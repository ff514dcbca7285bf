"""The deployment rehearsal (crosssim.rehearsal): realities drawn per episode, every gap at once;
classes as fixed bands of loss and failure rate; the joint margin."""

import numpy as np
import pytest

from crosssim import rehearsal as R
from crosssim.deployment import DEFAULTS
from crosssim.sweep import LADDERS
from crosssim.variant import Variant

AXES = R.distribution(DEFAULTS["legged"].axes(0.02), LADDERS)


def test_every_family_is_in_every_reality_and_draws_depend_on_the_seed_only():
    assert {a.family for a in AXES} == {"actuation", "timing", "contact"}
    spec = R.fields(AXES)[R.FAMILY]
    one, again, other = R.draw(spec, 3), R.draw(spec, 3), R.draw(spec, 4)
    assert one == again and one != other
    v = Variant.of(**one)  # every drawn field is a Variant field
    assert 0.9 <= v.harness.motor_strength <= 1.0 and 0.6 <= v.model.friction_scale <= 1.0
    assert 1.0 <= v.model.mass_scale <= 1.1 and 0 <= v.harness.motor_lag <= 0.01
    # scale stretches every axis from nominal: the same u, twice as far
    twice = Variant.of(**R.draw(dict(spec, scale=2.0), 3))
    assert 1 - twice.harness.motor_strength == pytest.approx(2 * (1 - v.harness.motor_strength))


def test_draws_spread_over_the_whole_range():
    spec = R.fields(AXES)[R.FAMILY]
    strengths = [Variant.of(**R.draw(spec, s)).harness.motor_strength for s in range(200)]
    assert min(strengths) < 0.91 and max(strengths) > 0.99


@pytest.mark.parametrize("loss, failure, expected", [
    (0.0, 0.0, "low"), (0.05, 0.0, "low"), (0.06, 0.0, "medium"), (0.0, 0.05, "medium"), (0.2, 0.1, "medium"),
    (0.21, 0.0, "high"), (0.0, 0.11, "high"), (0.01, 1.0, "high"), (float("nan"), 0.5, "high"),
    (float("nan"), 0.0, "unknown"),
])
def test_classes_are_fixed_bands_of_loss_and_failure_rate(loss, failure, expected):
    assert R.band(loss, failure) == expected


def test_a_policy_that_already_fails_cannot_look_robust():
    """Nothing left to lose is no robustness: falls count whatever the return."""
    assert R.band(R.loss([10, 10], [10, 10]), 1.0) == "high"
    assert R.joint_margin([(1.0, 0.5)], nominal_badness=R.badness(0.0, 0.7)) == (0.0, False)


def test_joint_margin_interpolates_between_the_last_pass_and_the_first_fail():
    assert R.joint_margin([(0.5, 0.5), (1.0, 1.5)], 0.0) == (pytest.approx(0.75), False)
    assert R.joint_margin([(1.0, 0.5), (4.0, 0.9)], 0.0) == (4.0, True)


def test_joint_margin_fits_every_visited_point_monotonically():
    """A noisy pass above a fail no longer decides the margin alone: the monotone fit pools the
    violating points (0.5 fails at 1.3, 1.0 passes at 0.7: pooled 1.0, the edge) and the crossing
    moves to where the pooled curve passes 1."""
    assert R.monotone([0.2, 1.3, 0.7, 2.0]) == pytest.approx([0.2, 1.0, 1.0, 2.0])
    margin, censored = R.joint_margin([(0.5, 1.3), (1.0, 0.7), (2.0, 2.0)], 0.2)
    assert not censored and margin == pytest.approx(1.0)  # the pooled edge, reached at scale 1.0
    # the old reading (first fail after the last pass at 0) would have said 0.5 * 0.8 / 1.1 = 0.36
    assert R.joint_margin([(0.5, 1.3), (1.0, 0.7), (2.0, 2.0)], 0.2)[0] > 0.5


def test_joint_margin_interval_comes_from_refitting_resampled_episodes():
    """The interval bootstraps the episodes through the whole fit: it contains the point, is wider
    with disagreeing episodes and is the same for the same seed."""
    import pandas as pd

    rows = []
    for ep in range(8):
        rows.append(dict(engine="mujoco", condition="nominal", episode=ep, terminated=False, failure=None, v=100.0))
        for scale, value in ((0.5, 95.0), (1.0, 60.0 if ep % 2 else 95.0), (2.0, 10.0)):
            rows.append(dict(engine="mujoco", condition=R.condition(scale), episode=ep, terminated=False,
                             failure=None, v=value))
    df = pd.DataFrame(rows)
    ok = df.failure.isna().to_numpy()
    margin, censored, points, ci = R._margin(df, df.v.to_numpy(), ok, "mujoco", list(range(8)))
    assert ci[0] <= margin <= ci[1] and ci[1] > ci[0]
    assert R._margin(df, df.v.to_numpy(), ok, "mujoco", list(range(8)))[3] == ci


def test_wilson_interval_is_sane_at_the_ends():
    lo, hi = R.wilson(0, 10)
    assert lo == 0 and 0.2 < hi < 0.35
    lo, hi = R.wilson(10, 10)
    assert hi == 1 and 0.65 < lo < 0.8
    assert all(np.isnan(R.wilson(0, 0)))
