"""Closed-loop rollouts and the crossval run that fans them over engines."""

from crosssim.runner.crossval import CrossvalConfig, run_crossval
from crosssim.runner.rollout import EpisodeResult, Harness, run_episode

__all__ = ["CrossvalConfig", "EpisodeResult", "Harness", "run_crossval", "run_episode"]
