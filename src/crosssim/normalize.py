"""Observation normalisation as VecNormalize does it; statistics come from cards, never pickles."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ObservationNormalizer:
    """VecNormalize-style: clip((o - mean) / sqrt(var + eps), -clip, clip)."""

    mean: np.ndarray
    var: np.ndarray
    clip: float = 10.0
    epsilon: float = 1e-8

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return np.clip((obs - self.mean) / np.sqrt(self.var + self.epsilon), -self.clip, self.clip)
