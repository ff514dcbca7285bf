"""Gymnasium MuJoCo tasks at a chosen version: ``v4`` or ``v5`` physics model and observation layout.

A card picks the version with ``task: Walker2d-v4`` or ``task_options.version: v4``; with neither
the task runs its ``default_version`` and says so (``version_note``), because the versions are
different robots (Walker2d-v5's right foot has friction 1.9, v4's 0.9) or different observations
(Ant-v4: 27 or 111 values, Ant-v5: 105), and a policy run on the wrong one fails quietly.
"""

from __future__ import annotations

import re

from crosssim.errors import CardError
from crosssim.tasks.base import Task

VERSIONED = re.compile(r"^(?P<base>.+)-(?P<version>v\d+)$")


def split_version(name: str) -> tuple[str, str | None]:
    """``"Walker2d-v4"`` -> ``("Walker2d", "v4")``; a name with no ``-vN`` suffix -> ``(name, None)``."""
    m = VERSIONED.match(name)
    return (m["base"], m["version"]) if m else (name, None)


class GymTask(Task):
    """A gymnasium MuJoCo environment at one of its versions (``versions``: version -> scene)."""

    versions: dict[str, str] = {}
    """Version -> MJCF reference of that version's physics model."""
    default_version: str = "v5"
    """The version a card that names none runs (stated by ``version_note`` and ``crosssim tasks``)."""
    unavailable_versions: dict[str, str] = {}
    """Version -> why crosssim cannot offer it (one line, said wherever the version is named)."""

    def __init__(self, *, version: str | int | None = None):
        self.version_chosen = version is not None
        if version is None:
            version = self.default_version
        text = str(version).strip()
        text = text if text.startswith("v") else f"v{text}"
        if text in self.unavailable_versions:
            raise CardError(unavailable_line(type(self), text))
        if text not in self.versions:
            raise CardError(f"task_options.version {version!r}: task {self.name} has versions "
                            f"{', '.join(self.versions)} (e.g. task: {self.name}-{self.default_version})")
        self.version = text
        self.scene = self.versions[text]

    @property
    def label(self) -> str:
        """Task and version, as gymnasium names the environment (``Walker2d-v5``)."""
        return f"{self.name}-{self.version}"

    @property
    def version_note(self) -> str | None:
        """One line when the version is the default rather than the card's choice, else None."""
        if self.version_chosen:
            return None
        others = [v for v in self.versions if v != self.version]
        alt = f"; for an agent trained on {', '.join(f'{self.name}-{v}' for v in others)} write task: " \
              f"{self.name}-{others[0]}" if others else ""
        return f"task {self.name} runs {self.label} (the default version: the card names none){alt}"


def unavailable_line(cls: type[GymTask], version: str) -> str:
    """One line: ``cls``'s ``version`` is not offered, why, and what to write instead."""
    return (f"task {cls.name}-{version} is not available: {cls.unavailable_versions[version]}; write task: "
            f"{cls.name}-{cls.default_version}")


def versions_fitting(cls: type[GymTask]) -> dict[int, list[str]]:
    """Observation size -> every way to write ``cls``'s task with that size (version, and the options
    in ``option_choices``), as a card would say it (``Ant-v4 with task_options.contact_forces: on``)."""
    import itertools

    from crosssim.scene import canonical_model, resolve_scene

    found: dict[int, list[str]] = {}
    choices = getattr(cls, "option_choices", {})
    for version in cls.versions:
        for values in itertools.product(*choices.values()):
            options = dict(zip(choices, values))
            task = cls(version=version, **options)
            size = task.observation_size(canonical_model(resolve_scene(task.scene)))
            said = ", ".join(f"task_options.{k}: {v}" for k, v in options.items())
            found.setdefault(size, []).append(task.label + (f" with {said}" if said else ""))
    return found
