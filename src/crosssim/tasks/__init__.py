"""Engine-agnostic tasks: observation, reward, termination from SimFrames only."""

from crosssim.tasks.base import _REGISTRY, StepResult, Task


def registered_tasks() -> dict[str, type[Task]]:
    """Every task by name. The task modules register themselves on import; importing them here
    (not in tasks.base, which they import) keeps the task modules and their base out of a circle."""
    import crosssim.tasks.gym_locomotion  # noqa: F401
    import crosssim.tasks.locomotion  # noqa: F401

    return dict(_REGISTRY)


def make_task(name: str, **options) -> Task:
    tasks = registered_tasks()
    if name not in tasks:
        from crosssim.errors import CrossSimError

        raise CrossSimError(f"unknown task {name!r}; known tasks: {sorted(tasks)}")
    return tasks[name](**options)


__all__ = ["StepResult", "Task", "make_task", "registered_tasks"]
