"""Opt-in gap families: ladders swept only when a card's deployment asks for them (docs/risk.md,
"Opt-in families"), so the default run costs nothing more.

A family joins the run when the deployment states its gap (``push``, ``motor_free_speed``,
``actuator``, ``obs_noise_terms``), and then joins the verdict; or when ``deployment.margins``
names it, and then only its margin is reported. Every rung acts in the shared control step
(crosssim.runner.stepper), so all engines see the same perturbation.
"""

from __future__ import annotations

from pathlib import Path

from crosssim.errors import CardError
from crosssim.sweep import TERM_NOISE, Ladder

LEVELS = (0.5, 1, 2, 3, 4, 5)
"""Severities of the numeric opt-in ladders (as actuation's and contact's)."""
PUSH_DV = 0.5
"""Velocity change [m/s] of a severity-1 push: Isaac Lab's velocity tasks push by up to 0.5 m/s
(push_by_setting_velocity); the ladder's impulses are this times the robot's mass."""
FREE_SPEED = 20.0
"""Free speed [rad/s] of the severity-1 DC motor: small quadrupeds' joint motors reach 20-30 rad/s
with no load; severity s is a free speed of 20 / s (inverse-linear: half the speed, twice the gap)."""
TERM_NOISE_1 = {"joint_pos": 0.006, "joint_pos_rel": 0.006, "joint_vel": 0.9, "base_ang_vel": 0.12,
                "base_lin_vel": 0.06, "projected_gravity": 0.03}
"""Severity-1 noise std per observation term, in its units: the standard deviation of Isaac Lab's
uniform observation noise of its velocity tasks (+-0.01 rad, +-1.5 rad/s, +-0.2 rad/s, +-0.1 m/s,
+-0.05). A term not listed takes its stated gap as severity 1."""


def family_key(name: str, where) -> str:
    """The deployment key a family name belongs to (CardError for an unknown name)."""
    if name == "push":
        return "push"
    if name == "dc_motor":
        return "motor_free_speed"
    if name.startswith("noise:") and len(name) > len("noise:"):
        return "obs_noise_terms"
    raise CardError(f"{where}: field 'deployment.margins' names {name!r}; opt-in families are push, dc_motor and "
                    "noise:<observation term> (actuator_net needs its file: state deployment.actuator)")


def opt_in_ladders(deployment: dict | None, total_mass=None, where="card") -> dict[str, Ladder]:
    """The opt-in ladders a card's deployment asks for (its stated keys, ``StatedDeployment.stated()``),
    by family name, in a fixed order.
    ``total_mass``: a function giving the robot's mass [kg] (the push impulses), called only when
    a push family is asked for."""
    d = deployment or {}
    asked = set(d.get("margins", ()))
    out: dict[str, Ladder] = {}
    if d.get("push") or "push" in asked:
        mass = float(total_mass())
        impulses = tuple(round(PUSH_DV * mass * s, 6) for s in LEVELS)
        out["push"] = Ladder("push", LEVELS, (("push_impulse", impulses),),
                             f"push disturbances (impulse {impulses[0]:.3g} to {impulses[-1]:.3g} N s on the base, "
                             f"{PUSH_DV * LEVELS[0]:g} to {PUSH_DV * LEVELS[-1]:g} m/s)")
    if d.get("motor_free_speed") or "dc_motor" in asked:
        speeds = tuple(round(FREE_SPEED / s, 6) for s in LEVELS)
        out["dc_motor"] = Ladder("dc_motor", LEVELS, (("motor_free_speed", speeds),),
                                 f"DC-motor torque-speed limit (free speed {speeds[0]:g} to {speeds[-1]:g} rad/s)")
    if d.get("actuator"):
        out["actuator_net"] = Ladder("actuator_net", (1.0,), (("actuator", (d["actuator"],)),),
                                     f"actuator model ({Path(d['actuator']).name})")
    terms = dict(d.get("obs_noise_terms") or {})
    for name in sorted(asked):
        if name.startswith("noise:"):
            terms.setdefault(name[len("noise:"):], None)
    for term in sorted(terms):
        one = TERM_NOISE_1.get(term, terms[term])
        if not one:
            raise CardError(f"{where}: field 'deployment.margins' asks for noise:{term}, which has no typical noise "
                            f"(known: {', '.join(TERM_NOISE_1)}); state deployment.obs_noise_terms.{term}")
        stds = tuple(round(one * s, 9) for s in LEVELS)
        out[f"noise:{term}"] = Ladder(f"noise:{term}", LEVELS, ((TERM_NOISE + term, stds),),
                                      f"noise on {term} (std {stds[0]:.3g} to {stds[-1]:.3g}, term units)")
    return out
