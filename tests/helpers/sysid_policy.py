"""A scripted excitation controller for real-to-sim tests: PD tracking of a multi-sine target.

Observation: joint_pos_rel (3), joint_vel (3) of tests/cards/real/arm3.xml; action: motor
commands in [-1, 1] (gear 10, 5, 2 N m). Stateful (a step counter), reset at each episode.
"""

import numpy as np

GEAR = np.array([10.0, 5.0, 2.0])
KP, KD = np.array([25.0, 10.0, 3.0]), np.array([1.5, 0.6, 0.15])
FREQ = np.array([[0.4, 1.1, 2.3], [0.7, 1.6, 2.9], [0.5, 1.3, 3.1]])  # Hz, per joint
AMP = np.array([[0.5, 0.25, 0.1], [0.6, 0.3, 0.15], [0.6, 0.3, 0.15]])  # rad


class Excite:
    def __init__(self, dt: float = 0.02):
        self.dt, self.k = dt, 0

    def reset(self) -> None:
        self.k = 0

    def __call__(self, obs):
        t = self.k * self.dt
        self.k += 1
        target = (AMP * np.sin(2 * np.pi * FREQ * t)).sum(axis=1)
        q, dq = np.asarray(obs[:3]), np.asarray(obs[3:6])
        tau = KP * (target - q) - KD * dq
        return np.clip(tau / GEAR, -1.0, 1.0)


excite = Excite()
