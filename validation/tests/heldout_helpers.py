"""A fixed-action policy and rollouts in the held-out realities, shared by the realities' tests.

A module of its own, and validation/tests has no conftest.py: the product's tests import helpers with
``from conftest import``, which resolves to whichever conftest pytest imported last, so a second
conftest here broke their collection whenever both folders ran in one session (`make test`). Each
test module puts validation/ on sys.path itself; none of them uses crosssim's row cache."""

from __future__ import annotations


class FixedActions:
    """A policy of fixed sinusoidal actions (``amplitude``) that records what it observes; used to
    check the held-out realities' mechanisms without any trained policy."""

    def __init__(self, size: int, amplitude: float = 0.05, on_act=None):
        self.size, self.amplitude, self.on_act, self.seen, self.t = size, amplitude, on_act, [], 0

    def reset(self):
        self.t = 0

    def act(self, obs):
        import numpy as np

        self.seen.append(np.array(obs))
        if self.on_act:
            self.on_act()
        self.t += 1
        return self.amplitude * np.sin(0.3 * self.t + np.arange(self.size))


def heldout_rollout(module, reality, task: str = "Ant-v4", steps: int = 40):
    """(return, observations seen) of one ``FixedActions`` episode (amplitude 0.9, large enough to
    reach a torque limit; seed 0) in a held-out reality of ``module`` (validation/realities_heldout*.py)."""
    import numpy as np

    from crosssim.runner.harness import Harness

    h = Harness.for_task(task)
    policy = FixedActions(h.action_size, amplitude=0.9)
    ret = module.run_heldout(h, policy, reality, episode_seeds=[0], max_steps=steps)[0]
    return ret, np.array(policy.seen)


def assert_mechanism_changes_rollout(module, reality, name: str, task: str) -> None:
    """A held-out mechanism alone (``reality``) changes what the policy observes against the module's
    nominal loop (the episode may end earlier or later: the common steps are compared)."""
    import numpy as np

    _, base = heldout_rollout(module, module.NOMINAL, task)
    _, obs = heldout_rollout(module, reality, task)
    n = min(len(base), len(obs))
    assert n > 3 and np.abs(obs[:n] - base[:n]).max() > 1e-3, f"{name} left the {task} rollout unchanged"
