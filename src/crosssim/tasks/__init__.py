"""Engine-agnostic tasks: observation, reward, termination from SimFrames only.

Tasks are found by name in one registry: the built-ins below, then the ``crosssim.tasks``
entry-point group of installed plugins (docs/extending.md). A gymnasium task may be named with its
version (``Walker2d-v4``): the same as ``Walker2d`` with ``task_options.version: v4``.
"""

from crosssim.errors import CardError, CrossSimError
from crosssim.registry import Registry
from crosssim.tasks.base import StepResult, Task
from crosssim.tasks.gym_base import split_version

BUILTIN_TASKS = {
    "Hopper": "crosssim.tasks.gym_locomotion:Hopper",
    "Walker2d": "crosssim.tasks.gym_locomotion:Walker2d",
    "HalfCheetah": "crosssim.tasks.gym_locomotion:HalfCheetah",
    "Ant": "crosssim.tasks.gym_locomotion:Ant",
    "Swimmer": "crosssim.tasks.gym_classic:Swimmer",
    "InvertedPendulum": "crosssim.tasks.gym_classic:InvertedPendulum",
    "InvertedDoublePendulum": "crosssim.tasks.gym_classic:InvertedDoublePendulum",
    "Reacher": "crosssim.tasks.gym_classic:Reacher",
    "Pusher": "crosssim.tasks.gym_manipulation:Pusher",
    "Humanoid": "crosssim.tasks.gym_humanoid:Humanoid",
    "FetchPickAndPlace": "crosssim.tasks.fetch:FetchPickAndPlace",
    "FetchPush": "crosssim.tasks.fetch:FetchPush",
    "Locomotion": "crosssim.tasks.locomotion:Locomotion",
}
"""name -> ``"module:Class"`` of crosssim's own tasks (a subclass of Task whose ``name`` is the key)."""

TASKS = Registry("task", "crosssim.tasks", BUILTIN_TASKS)


def registered_tasks() -> dict[str, type[Task]]:
    """Every task class by name: built-ins, then plugins (a plugin may replace a built-in)."""
    return TASKS.load_all()


def task_class(name: str) -> type[Task]:
    """The class of task ``name``, which may carry a version (``Walker2d-v4``); CrossSimError naming
    the known tasks, or the versions the task has, if there is none."""
    if name in TASKS:
        return TASKS.load(name)
    base, version = split_version(name)
    if version is None or base not in TASKS:
        return TASKS.load(name)  # the registry's error: known tasks, "did you mean"
    cls = TASKS.load(base)
    versions = getattr(cls, "versions", {})
    if version in getattr(cls, "unavailable_versions", {}):
        from crosssim.tasks.gym_base import unavailable_line

        raise CrossSimError(unavailable_line(cls, version))
    if version not in versions:
        offered = f"versions {', '.join(versions)}" if versions else "no versions"
        raise CrossSimError(f"task {base} has {offered}, not {version}")
    return cls


def make_task(name: str, **options) -> Task:
    """An instance of task ``name`` (``Walker2d`` or ``Walker2d-v4``); CrossSimError naming the known
    tasks if there is none, CardError when the name's version and ``options['version']`` differ."""
    cls = task_class(name)
    if name not in TASKS:
        _, version = split_version(name)
        given = options.get("version")
        if given is not None and str(given).lstrip("v") != version[1:]:
            raise CardError(f"task {name} names version {version} but task_options.version is {given!r}; keep one")
        options = {**options, "version": version}
    return cls(**options)


def _gym_class(name: str):
    from crosssim.tasks.gym_base import GymTask

    try:
        cls = task_class(name)
    except CrossSimError:
        return None
    return cls if isinstance(cls, type) and issubclass(cls, GymTask) else None


def version_sizes(name: str) -> set[int]:
    """Every observation size some version (and option) of task ``name`` has; empty if it has none."""
    from crosssim.tasks.gym_base import versions_fitting

    cls = _gym_class(name)
    return set(versions_fitting(cls)) if cls else set()


def version_hint(name: str, sizes: set[int]) -> str:
    """For a policy whose input has one of ``sizes`` values: the versions of task ``name`` that would
    fit, as a sentence to append to a size mismatch ("" when none does or the task has no versions)."""
    from crosssim.tasks.gym_base import versions_fitting

    cls = _gym_class(name)
    if cls is None:
        return ""
    fits = [way for size, ways in sorted(versions_fitting(cls).items()) if size in sizes for way in ways]
    return f"; that is the observation of {' or '.join(fits)}: choose it in the card" if fits else ""


def describe_task(task: Task) -> str:
    """The task as gymnasium names it, with its version where it has one (``Walker2d-v5``)."""
    return getattr(task, "label", task.name)


__all__ = ["BUILTIN_TASKS", "TASKS", "StepResult", "Task", "describe_task", "make_task", "registered_tasks",
           "task_class", "version_hint", "version_sizes"]
