"""A lockstep batch of EnginePyBullet episodes, each in a PyBullet server of its own.

A PyBullet server (a DIRECT client) holds one world, so several states of one model take turns in
it, each switch a save and a restore (0.64x of one at a time, bench/README.md), and several robots
in one world gain nothing (Bullet's step costs the same per robot: 0.89-0.98x). A batch instead
gets one server per episode, each built from the same compiled model exactly as ``load`` builds
the model's own: nothing is switched, and the batch gains what one policy forward for all its
episodes saves (crosssim.runner.batched). A state belongs to one member server; a member whose
state its owner dropped takes the next ``reset``. Every member restores its as-built snapshot at
reset, as the single server does between episodes, so a row equals one at a time (the batched
forward's last bits aside).
"""

from __future__ import annotations

from dataclasses import dataclass

from crosssim.errors import EngineFailure


@dataclass(eq=False)
class PyBulletWorlds:
    """``members``: one PyBulletModel (own server) per episode of a batch; ``base`` is the model
    the batch was made from (audited, left open)."""

    base: object
    members: list

    def take(self):
        """A member no live state holds (a server's ``loaded`` is the state in it, held weakly)."""
        for m in self.members:
            if m.loaded is None or m.loaded() is None:
                return m
        raise EngineFailure(f"pybullet: all {len(self.members)} servers of this batch hold live states")

    def member(self, state):
        """The member server ``state`` lives in (a state of another model is refused)."""
        owner = getattr(state, "owner", lambda: None)()
        if owner is None or not any(owner is m for m in self.members):
            raise EngineFailure("pybullet: this state is not one of this batch's servers; use reset(model, ...)")
        return owner
