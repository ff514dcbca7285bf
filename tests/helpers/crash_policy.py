"""Trusted test policies that misbehave on purpose, to exercise engine-worker isolation."""

import os
import signal
import sys
import time

import numpy as np

_calls = 0


def _in_pybullet_worker() -> bool:
    return "pybullet" in sys.modules


def die_in_pybullet(obs):
    """Zero action; the PyBullet worker is SIGKILLed at its 120th call (third 50-step episode)."""
    global _calls
    _calls += 1
    if _in_pybullet_worker() and _calls == 120:
        os.kill(os.getpid(), signal.SIGKILL)
    return np.zeros(3)


def hang_in_pybullet(obs):
    global _calls
    _calls += 1
    if _in_pybullet_worker() and _calls == 60:
        time.sleep(3600)
    return np.zeros(3)


def nan_policy(obs):
    return np.full(3, np.nan)


def inf_policy(obs):
    return np.full(3, np.inf)


def wrong_shape_policy(obs):
    return np.zeros(5)


def segfault_in_pybullet(obs):
    """Zero action; the PyBullet worker dies of SIGSEGV in its second 30-step episode."""
    global _calls
    _calls += 1
    if _in_pybullet_worker() and _calls == 45:
        os.kill(os.getpid(), signal.SIGSEGV)
    return np.zeros(3)
