"""The Policy protocol and the wrappers every loader shares."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from crosssim.normalize import ObservationNormalizer  # noqa: F401  (re-exported)


@runtime_checkable
class Policy(Protocol):
    """``reset()`` at every episode start; ``act(obs)`` once per control step.

    ``obs`` is (obs_size,) or a batch (n, obs_size); the action has the matching shape.
    """

    obs_size: int | None
    action_size: int | None
    batchable: bool = False
    """True when act() on a batch treats each row as its own episode: equal to act() row by row
    for a memoryless policy; for a recurrent one (crosssim.policies.recurrent) each row keeps
    its own memory across calls and reset() clears every row. The runner then steps many
    episodes in lockstep with one forward per step. Loaders subclass Policy to
    inherit this False default and set it where it holds."""

    def reset(self) -> None: ...

    def act(self, obs: np.ndarray) -> np.ndarray: ...


class NormalizedPolicy(Policy):
    """A policy behind an observation normalizer (statistics from the card, never a pickle)."""

    def __init__(self, inner: Policy, normalizer: ObservationNormalizer):
        self.inner, self.normalizer = inner, normalizer
        self.obs_size, self.action_size = inner.obs_size, inner.action_size
        self.batchable = inner.batchable

    def reset(self) -> None:
        self.inner.reset()

    def act(self, obs: np.ndarray) -> np.ndarray:
        return self.inner.act(self.normalizer(obs))


class CallablePolicy(Policy):
    """A Python callable ``f(obs) -> action`` (trusted code, by definition)."""

    def __init__(self, fn, obs_size: int | None = None, action_size: int | None = None):
        self.fn, self.obs_size, self.action_size = fn, obs_size, action_size

    def reset(self) -> None:
        reset = getattr(self.fn, "reset", None)
        if callable(reset):
            reset()

    def act(self, obs: np.ndarray) -> np.ndarray:
        return np.asarray(self.fn(obs), dtype=float)
