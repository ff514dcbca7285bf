"""What crosssim says on stderr, through Python's ``logging``: the ``crosssim`` logger hierarchy.

Every module logs to its own ``crosssim.<module>`` logger (MuJoCo's warnings arrive on
``crosssim.mujoco``, see crosssim.mujoco_log). The command line calls ``setup`` once with the
verbosity of its flags, as pytest and Gymnasium users expect:

    -q / --quiet     warnings, errors and the verdict only (no header, progress or tables)
    (default)        what a run says today: its header, progress, tables and warnings
    -v / --verbose   and every debug message of every crosssim module, named by its logger

Messages read as they always did: an info line as it is, a warning as ``warning: ...``, an error
as written (crosssim's own errors carry their ``crosssim <cmd>: error:`` prefix), a debug line as
``debug: <logger>: ...``. Tables and the verdict stay on stdout (``print``), gated by ``enabled``.
"""

from __future__ import annotations

import logging
import sys

LOG = logging.getLogger("crosssim")

QUIET, NORMAL, VERBOSE = -1, 0, 1
"""Verbosities: -q, none, -v (more -v are VERBOSE too)."""


class _Format(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        if record.levelno >= logging.ERROR:
            return text
        if record.levelno >= logging.WARNING:
            return text if text.startswith("warning:") else f"warning: {text}"
        if record.levelno <= logging.DEBUG:
            return f"debug: {record.name}: {text}"
        return text


class _Stderr(logging.StreamHandler):
    """A handler on whatever ``sys.stderr`` is when a record is written (pytest's capture, a redirect)."""

    def __init__(self):
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):  # StreamHandler sets it once; the property always answers sys.stderr
        pass


def setup(verbosity: int = NORMAL) -> None:
    """Route the ``crosssim`` loggers to stderr at the level ``verbosity`` asks (idempotent)."""
    level = logging.WARNING if verbosity <= QUIET else logging.DEBUG if verbosity >= VERBOSE else logging.INFO
    for h in [h for h in LOG.handlers if isinstance(h, _Stderr)]:
        LOG.removeHandler(h)
    handler = _Stderr()
    handler.setFormatter(_Format())
    LOG.addHandler(handler)
    LOG.setLevel(level)


def enabled(level: int = logging.INFO) -> bool:
    """Whether messages of ``level`` are shown (the CLI prints its tables when INFO is)."""
    return LOG.isEnabledFor(level)


def get(name: str) -> logging.Logger:
    """The logger of a crosssim module, e.g. ``get(__name__)`` (always under ``crosssim``)."""
    return logging.getLogger(name if name == "crosssim" or name.startswith("crosssim.") else f"crosssim.{name}")
