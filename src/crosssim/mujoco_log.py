"""MuJoCo's warnings through Python's ``logging`` instead of its default handler, which appends
them to ``MUJOCO_LOG.TXT`` in the current folder (the user's checkout) and prints them.

``route()`` is called wherever crosssim first touches MuJoCo (the scene loader, the MuJoCo
engine): a warning then reaches the ``crosssim.mujoco`` logger (the terminal in the main process,
the worker log in an engine worker), and a simulation that goes unstable is still caught by the
engine's own checks (crosssim.engines.mujoco: a reset after a bad acceleration is a divergence).
"""

from __future__ import annotations

import logging

LOG = logging.getLogger("crosssim.mujoco")
_routed = False


HARMLESS = ("compiler attribute 'settotalmass' is deprecated",)
"""Warnings about the scene files crosssim ships or reads unchanged (gymnasium's), not about the
run: logged at debug level (``-v`` shows them)."""


def _warn(message: str) -> None:
    message = message.strip()
    LOG.log(logging.DEBUG if any(h in message for h in HARMLESS) else logging.WARNING, "MuJoCo: %s", message)


def route() -> None:
    """Install the handler once per process."""
    global _routed
    if not _routed:
        import mujoco

        mujoco.set_mju_user_warning(_warn)
        _routed = True
