"""Many episodes in lockstep in one worker: one batched policy forward per control step for all.

Each episode has its own engine state (engines whose ``capabilities`` declare
``concurrent_states``; MuJoCo: one MjData per episode on a shared model), its own ControlStepper
and its own observation history; only the policy call is shared. The batch always has one row per episode of the job, in job
order, whether the episode is still running, finished or was taken from the cache: a row's
action then depends only on its own observation and the batch size, so results do not depend on
which other episodes ran (the BLAS kernel a matrix product takes depends on its shape; batched
and one-at-a-time actions differ in the last bits, which is why batching is a cache-key field).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from crosssim.perturb import Perturbation
from crosssim.policies.base import Policy
from crosssim.runner.harness import Harness
from crosssim.runner.rollout import EpisodeAccount, EpisodeResult
from crosssim.runner.stepper import ControlStepper

HEARTBEAT_STEPS = 100
"""Control steps between two progress calls (the parent's hang detector hears them)."""


def can_batch(engine, policy: Policy) -> bool:
    """Lockstep needs several live states per model and a policy without per-episode memory."""
    return engine.capabilities.concurrent_states and policy.batchable


def run_episodes_lockstep(engine, model, harness: Harness, policy: Policy, slots: list[tuple[int, int, int]], *,
                          batch_size: int, max_steps: int | None = None, record_episode: int | None = None,
                          profile_name: str | None = None, perturbation: Perturbation | None = None,
                          on_result: Callable[[EpisodeResult], None], heartbeat: Callable[[int], None] = lambda t: None,
                          ) -> None:
    """Run the episodes ``slots`` = [(row, episode, seed)] together; ``on_result`` gets each as it ends."""
    task, c = harness.task, harness.canonical
    name = profile_name or engine.name
    steppers, accounts, frames, states, alive = {}, {}, {}, {}, []
    for row, episode, seed in slots:
        stepper = ControlStepper(engine, model, harness, perturbation, name=name)
        account = EpisodeAccount(name, episode, seed, record=episode == record_episode)
        steppers[row], accounts[row] = stepper, account
        try:
            frames[row], states[row] = stepper.reset(task.initial_state(c, np.random.default_rng(seed)), [seed, 1])
            alive.append(row)
        except Exception as exc:
            account.fail(exc)
            on_result(account.finish(stepper.control_dt))
    policy.reset()
    obs = np.zeros((batch_size, harness.obs_size))
    for t in range(max_steps or task.max_steps):
        if not alive:
            break
        if t and t % HEARTBEAT_STEPS == 0:
            heartbeat(t)
        ended = []
        for row in alive:
            try:
                obs[row] = steppers[row].observe(frames[row], states[row])
            except Exception as exc:  # this episode's observation: only this episode fails
                accounts[row].fail(exc)
                ended.append(row)
        alive = [row for row in alive if row not in ended]
        try:
            actions = np.asarray(policy.act(obs))
        except Exception as exc:  # the shared policy failed: every running episode fails with it
            for row in alive:
                accounts[row].fail(exc)
            ended, alive = ended + alive, []
        for row in alive:
            stepper, account = steppers[row], accounts[row]
            try:
                action = stepper.check_action(actions[row], t)
                after = stepper.step(action)
                step = task.step(frames[row], after, action, states[row], stepper.control_dt)
                account.add(t, step, after)
                frames[row] = after
                if step.terminated:
                    ended.append(row)
            except Exception as exc:
                account.fail(exc)
                ended.append(row)
        for row in ended:
            on_result(accounts[row].finish(steppers[row].control_dt))
        alive = [row for row in alive if row not in ended]
    for row in alive:  # ran to the step limit
        on_result(accounts[row].finish(steppers[row].control_dt))
