"""Engine-agnostic tasks: observation, reward, termination from SimFrames only."""

from crosssim.tasks.base import StepResult, Task, make_task, registered_tasks

__all__ = ["StepResult", "Task", "make_task", "registered_tasks"]
