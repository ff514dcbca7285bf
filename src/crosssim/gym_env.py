"""crosssim tasks as standard ``gymnasium.Env``s, in any engine (for training through crosssim)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from crosssim.actuation import Actuation
from crosssim.engines.base import check_finite
from crosssim.profiles import load_profile
from crosssim.runner.rollout import open_engine
from crosssim.scene import canonical_model, resolve_scene
from crosssim.tasks import make_task


class CrossSimEnv(gym.Env):
    """One task in one engine through crosssim's harness (motor actuation, gymnasium semantics).

    ``reset(seed=s)`` gives the same initial state as gymnasium's own env with the same seed.
    """

    metadata = {"render_modes": []}

    def __init__(self, task: str = "Hopper", engine: str = "mujoco", max_steps: int | None = None):
        self.task = make_task(task)
        self.profile = load_profile(engine)
        scene = resolve_scene(self.task.scene)
        self.canonical = canonical_model(scene)
        self.actuation = Actuation.motors(self.canonical)
        from types import SimpleNamespace

        self.engine, self.model = open_engine(self.profile, SimpleNamespace(scene=scene))
        n_obs = self.task.observation_size(self.canonical)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (n_obs,), np.float64)
        low, high = self.actuation.ctrl_low, self.actuation.ctrl_high
        self.action_space = gym.spaces.Box(low.astype(np.float32), high.astype(np.float32), dtype=np.float32)
        self.max_steps = max_steps or self.task.max_steps
        self.dt = self.task.frame_skip * self.canonical.timestep
        self._state = self._frame = None
        self._steps = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        init = self.task.initial_state(self.canonical, self.np_random)
        self._state = self.engine.reset(self.model, init)
        self._frame = self.engine.frame(self.model, self._state, contacts=self.task.needs_contacts)
        self._task_state = self.task.reset(self._frame)
        self._steps = 0
        return self.task.observe(self._frame, self._task_state), {}

    def step(self, action):
        action = np.asarray(action, dtype=float)
        q, qd = self.engine.joint_state(self.model, self._state)
        self.engine.step(self.model, self._state, self.actuation.torques(self.actuation.target(action), q, qd),
                         self.task.frame_skip)
        after = self.engine.frame(self.model, self._state, contacts=self.task.needs_contacts)
        self._steps += 1
        if not after.is_finite():  # a diverged engine ends the episode instead of poisoning training
            return self.task.observe(self._frame, self._task_state), 0.0, True, False, {"diverged": True}
        step = self.task.step(self._frame, after, action, self._task_state, self.dt)
        self._frame = after
        obs = self.task.observe(after, self._task_state)
        return obs, float(step.reward), bool(step.terminated), self._steps >= self.max_steps, dict(step.terms)

    def close(self):
        if self._state is not None or self.model is not None:
            self.engine.close(self.model)
            self.model = None


def make_env(task: str, *, engine: str = "mujoco", **kwargs) -> CrossSimEnv:
    return CrossSimEnv(task, engine, **kwargs)
