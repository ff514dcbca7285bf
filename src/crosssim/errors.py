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


class WriteFailed(CrossSimError, OSError):
    """A results file could not be written; still an OSError for callers that catch those."""


def write_failed(path, exc: OSError) -> WriteFailed:
    """The one line for a results file that could not be written (disk full, read-only, quota)."""
    import errno

    reason = exc.strerror or " ".join(str(exc).split())[:200] or type(exc).__name__
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT) or "No space left" in str(exc)
    fix = "free some space" if full else "fix the folder's permissions"
    return WriteFailed(f"{path}: cannot write it ({reason}); any previous {path.name} there is unchanged. "
                         f"{fix[0].upper() + fix[1:]} or choose another --out and rerun: episodes already computed "
                         "are reused from the result cache")
