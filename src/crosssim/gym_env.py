"""crosssim tasks as standard ``gymnasium.Env``s, in any engine (for training through crosssim)."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import gymnasium as gym
import numpy as np

from crosssim.errors import CrossSimError, EngineFailure
from crosssim.profiles import load_profile
from crosssim.runner.episode import Episode
from crosssim.runner.harness import Harness
from crosssim.runner.simulator import Simulator, open_engine
from crosssim.runner.stepper import ControlStepper
from crosssim.variant import ModelVariant, Variant

PerturbationSampler = Callable[[np.random.Generator], Variant]


class CrossSimEnv(gym.Env):
    """One task in one engine through crosssim's harness (motor actuation, gymnasium semantics).

    ``reset(seed=s)`` gives the same initial state as gymnasium's own env with the same seed.
    ``task`` may name a version (``"Walker2d-v4"``); ``task_options`` are a card's ``task_options``.
    ``card`` (a path or a Card) builds the card's harness instead (``task`` is then ignored): its
    observation, actuation and ``first_call``, so ``reset`` gives crossval's first observation.
    ``perturbations`` (domain randomisation) draws a perturbation (a Variant) at every reset; model-level
    parts (mass, friction) rebuild the engine model, so keep them coarse.
    """

    metadata = {"render_modes": []}
    MAX_MODELS = 32

    def __init__(self, task: str = "Hopper", engine: str = "mujoco", *, max_steps: int | None = None,
                 perturbations: PerturbationSampler | None = None, task_options: dict | None = None,
                 card=None):
        if card is not None:  # the card's harness: its observation terms, actuation and first-call timing
            from crosssim.card import Card, load_card

            if task_options:
                raise CrossSimError("CrossSimEnv: pass task_options in the card, not beside it")
            self.harness = Harness.from_card(card if isinstance(card, Card) else load_card(card))
        else:
            self.harness = Harness.for_task(task, task_options)
        self.canonical = self.harness.canonical
        self.profile = load_profile(engine)
        self.sampler = perturbations
        # Randomised mass/friction draws come from a coarse grid: keep the models already built
        # (building a Newton model costs ~0.1 s, a MuJoCo one ~5 ms) instead of rebuilding per reset.
        self._models: dict[ModelVariant, Simulator] = {}
        self.sim = self._simulator(Variant())
        self.episode = Episode(ControlStepper(self.sim, self.harness))
        n_obs = self.harness.obs_size
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (n_obs,), np.float64)
        act = self.harness.actuation
        self.action_space = gym.spaces.Box(act.ctrl_low.astype(np.float32), act.ctrl_high.astype(np.float32),
                                           dtype=np.float32)
        self.max_steps = max_steps or self.task.max_steps
        self._started = False

    @property
    def task(self):
        """The task every episode of this env runs (the harness's)."""
        return self.harness.task

    @property
    def model(self):
        """The engine model the current episode runs on."""
        return self.sim.model

    def _simulator(self, variant: Variant) -> Simulator:
        """A simulator for ``variant``: its model part picks (or builds) the engine model, its
        harness part is this episode's."""
        if variant.model not in self._models:
            if len(self._models) >= self.MAX_MODELS:  # drop the oldest
                self._models.pop(next(iter(self._models))).close()
            self._models[variant.model] = open_engine(self.profile, self.harness.scene, Variant(variant.model),
                                                    base=self.harness.model_variant)
        built = self._models[variant.model]
        return replace(built, variant=self.profile.variant.then(variant))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if self.sampler is not None:
            self.sim = self._simulator(self.sampler(self.np_random))
            self.episode = Episode(ControlStepper(self.sim, self.harness))
        init = self.task.initial_state(self.canonical, self.np_random)
        # The observation-noise stream is drawn per episode, sampler or not: a fixed seed would
        # give every episode the same noise.
        self.episode.reset(init, int(self.np_random.integers(2**63)))
        self.episode.wait_for_first_call()  # a card's first_call: after_one_period, as crossval
        self._started = True
        return self.episode.observe(), {}

    def step(self, action):
        if not self._started:
            raise gym.error.ResetNeeded("call reset() before step()")
        ep = self.episode
        try:
            step = ep.advance(np.asarray(action, dtype=float), check=False)
        except EngineFailure:  # a diverged engine ends the episode instead of poisoning training
            return ep.observe(), 0.0, True, False, {"diverged": True}
        return ep.observe(), float(step.reward), bool(step.terminated), ep.t >= self.max_steps, step.terms

    def close(self):
        for sim in self._models.values():
            sim.close()
        self._models.clear()


def make_env(task: str, *, engine: str = "mujoco", **kwargs) -> CrossSimEnv:
    return CrossSimEnv(task, engine, **kwargs)


def register_envs() -> None:
    """Register ``crosssim/<Task>-v0`` ids (``gymnasium.make("crosssim/Hopper-v0", engine="pybullet")``)."""
    from crosssim.tasks import registered_tasks

    for name, cls in registered_tasks().items():
        env_id = f"crosssim/{name}-v0"
        if cls.scene and env_id not in gym.registry:
            gym.register(env_id, entry_point="crosssim.gym_env:CrossSimEnv", kwargs={"task": name},
                         max_episode_steps=None)


class MultiEngineSampler:
    """Which engine a sub-environment uses: round-robin by index (fixed) over ``engines``."""

    def __init__(self, engines: tuple[str, ...]):
        if not engines:
            raise ValueError("at least one engine")
        self.engines = tuple(engines)

    def engine_for(self, index: int) -> str:
        return self.engines[index % len(self.engines)]


def make_multi_engine_vec_env(task: str, engines: tuple[str, ...], n_envs: int, *, seed: int = 0,
                              perturbations: PerturbationSampler | None = None, subprocess: bool = False):
    """An SB3 VecEnv of ``n_envs`` sub-environments spread round-robin over ``engines``.

    ``subprocess=True`` puts each sub-environment in its own process (SubprocVecEnv), which also
    keeps engines with global state (PyBullet servers, Warp) apart.
    """
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    sampler = MultiEngineSampler(engines)

    def factory(i: int):
        def make():
            env = make_env(task, engine=sampler.engine_for(i), perturbations=perturbations)
            env.reset(seed=seed + i)
            return env
        return make

    fns = [factory(i) for i in range(n_envs)]
    return SubprocVecEnv(fns, start_method="spawn") if subprocess else DummyVecEnv(fns)


def rllib_env_creator(task: str, engines: tuple[str, ...], *, perturbations: PerturbationSampler | None = None):
    """An RLlib env creator spreading sub-environments round-robin over ``engines``.

    RLlib hands every sub-environment of an env runner the same EnvContext, so the creator counts
    its calls; runners are offset by their ``worker_index`` so that remote runners interleave too.
    """
    sampler = MultiEngineSampler(engines)
    calls = [0]

    def create(ctx) -> CrossSimEnv:
        per_runner = int(ctx.get("num_envs_per_runner", 1)) if isinstance(ctx, dict) else 1
        index = getattr(ctx, "worker_index", 0) * per_runner + calls[0]
        calls[0] += 1
        return make_env(task, engine=sampler.engine_for(index), perturbations=perturbations)

    return create
