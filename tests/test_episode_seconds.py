"""The Locomotion task refuses an episode length that is no duration (it ran one-step episodes)."""

import pytest

from crosssim.errors import CardError
from crosssim.tasks import make_task


@pytest.mark.parametrize("seconds", [0, -5, float("nan"), float("inf"), "10", True])
def test_episode_seconds_must_be_a_positive_duration(seconds):
    with pytest.raises(CardError, match="episode_seconds"):
        make_task("Locomotion", episode_seconds=seconds)


def test_a_duration_is_kept():
    assert make_task("Locomotion", episode_seconds=5).episode_seconds == 5.0
