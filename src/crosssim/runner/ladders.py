"""The ladders a crossval sweeps for a card: the default ones and the card's opt-in families.

Here, not in crosssim.families, because a push ladder needs the robot's mass from the card's
harness, and the harness reads the card (which reads the deployment, which names families).
"""

from __future__ import annotations

from crosssim import sweep
from crosssim.errors import CardError
from crosssim.families import opt_in_ladders
from crosssim.runner.harness import Harness
from crosssim.sweep import Ladder


def ladders_for(card, harness=None) -> dict[str, Ladder]:
    """The default ladders (crosssim.sweep.LADDERS) and the card's opt-in ones. ``harness``: the
    card's (built here only when a push family needs the robot's mass)."""
    def mass() -> float:
        nonlocal harness
        if harness is None:
            harness = Harness.from_card(card)
        if not harness.canonical.free_base:
            raise CardError(f"{card.path}: the push family needs a free-joint base; {harness.scene.name}'s base is "
                            "fixed: remove deployment.push (or push from deployment.margins)")
        return harness.canonical.total_mass

    return {**sweep.LADDERS, **opt_in_ladders(card.deployment.stated(), mass, card.path)}
