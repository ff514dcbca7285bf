"""Trusted test policies that misbehave on purpose, to exercise engine-worker isolation."""

import os
import signal
import sys
import time

import numpy as np

_calls = 0


def _in_pybullet_worker() -> bool:
    return "pybullet" in sys.modules


def _misbehave_in_pybullet(at_call: int, act):
    """A zero-action policy that runs ``act()`` at its ``at_call``-th call, in the PyBullet worker only."""
    def policy(obs):
        global _calls
        _calls += 1
        if _in_pybullet_worker() and _calls == at_call:
            act()
        return np.zeros(3)
    return policy


# SIGKILL at the 120th call: the third 50-step episode.
die_in_pybullet = _misbehave_in_pybullet(120, lambda: os.kill(os.getpid(), signal.SIGKILL))
hang_in_pybullet = _misbehave_in_pybullet(60, lambda: time.sleep(3600))
# SIGSEGV at the 45th call: the second 30-step episode.
segfault_in_pybullet = _misbehave_in_pybullet(45, lambda: os.kill(os.getpid(), signal.SIGSEGV))


def nan_policy(obs):
    return np.full(3, np.nan)


def inf_policy(obs):
    return np.full(3, np.inf)


def wrong_shape_policy(obs):
    return np.zeros(5)

