"""Policies: one small protocol, returned by every loader. Evaluation never asks the format."""

from crosssim.policies.base import Policy, ObservationNormalizer
from crosssim.policies.load import load_policy

__all__ = ["Policy", "ObservationNormalizer", "load_policy"]
