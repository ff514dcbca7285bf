"""Engine-agnostic tasks: observation, reward, termination from SimFrames only.

Tasks are found by name in one registry: the built-ins below, then the ``crosssim.tasks``
entry-point group of installed plugins (docs/extending.md).
"""

from crosssim.registry import Registry
from crosssim.tasks.base import StepResult, Task

BUILTIN_TASKS = {
    "Hopper": "crosssim.tasks.gym_locomotion:Hopper",
    "Walker2d": "crosssim.tasks.gym_locomotion:Walker2d",
    "HalfCheetah": "crosssim.tasks.gym_locomotion:HalfCheetah",
    "Ant": "crosssim.tasks.gym_locomotion:Ant",
    "Locomotion": "crosssim.tasks.locomotion:Locomotion",
}
"""name -> ``"module:Class"`` of crosssim's own tasks (a subclass of Task whose ``name`` is the key)."""

TASKS = Registry("task", "crosssim.tasks", BUILTIN_TASKS)


def registered_tasks() -> dict[str, type[Task]]:
    """Every task class by name: built-ins, then plugins (a plugin may replace a built-in)."""
    return TASKS.load_all()


def make_task(name: str, **options) -> Task:
    """An instance of task ``name``; CrossSimError naming the known tasks if there is none."""
    return TASKS.load(name)(**options)


__all__ = ["BUILTIN_TASKS", "TASKS", "StepResult", "Task", "make_task", "registered_tasks"]
