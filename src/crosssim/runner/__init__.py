"""Closed-loop rollouts, and the crossval's plan and execution that fan them over engines."""

from crosssim.runner.crossval import CrossvalConfig, Plan, plan_crossval
from crosssim.runner.rollout import EpisodeResult, Harness, run_episode

__all__ = ["CrossvalConfig", "EpisodeResult", "Harness", "Plan", "plan_crossval", "run_episode"]
