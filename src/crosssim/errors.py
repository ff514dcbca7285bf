"""Errors crosssim reports to users: each carries a message that names the file and the fix."""


class CrossSimError(Exception):
    """Base class: a problem crosssim can explain in one message (no traceback needed)."""


class EngineUnavailable(CrossSimError):
    """An engine cannot run here (not installed, needs a GPU, ...); the message says how to fix it."""


class CardError(CrossSimError):
    """A policy card is malformed; the message names the card file and the field."""


class PolicyLoadError(CrossSimError):
    """A policy file cannot be loaded or does not fit its task; the message names the file."""


class EngineFailure(CrossSimError):
    """An engine diverged (NaN), crashed or hung during a rollout."""
