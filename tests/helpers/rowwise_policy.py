"""A memoryless batchable test policy whose rows never mix, for lockstep-vs-alone equality tests."""

import numpy as np


class RowwisePolicy:
    """Row i's action is ``amps[i] * sin(gain * obs[pos] + obs[phase])``: each row depends only on
    its own observation and amplitude, so a batch and a row alone give the same actions bit for
    bit and any difference between the paths is the engine's or the runner's."""

    batchable = True

    def __init__(self, amps, *, obs_size: int, pos: slice, phase: slice, gain: float):
        self.amps = np.asarray(amps, dtype=float)
        self.obs_size, self.action_size = obs_size, pos.stop - pos.start
        self.pos, self.phase, self.gain = pos, phase, gain

    def reset(self):
        pass

    def act(self, obs):
        obs = np.atleast_2d(obs)
        out = self.amps[:len(obs), None] * np.sin(self.gain * obs[:, self.pos] + obs[:, self.phase])
        return out if len(out) > 1 else out[0]
