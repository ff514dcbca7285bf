"""What an engine offers beyond the core contract: flags declared on its class, and the methods each
flag promises (one Protocol per capability), checked against the class when the registry loads it.

A flag is read as declared, never probed: the runner calls a capability's methods only where its
flag is set, so a flag without its methods would fail deep inside an episode. ``check_capabilities``
refuses such a class in one line before any instance exists (crosssim.engines.registry).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, fields
from typing import Any, Protocol, runtime_checkable

import numpy as np

from crosssim.frame import InitialState, SimFrame


@dataclass(frozen=True)
class EngineCapabilities:
    """What an engine can do beyond the contract, declared on its class (never probed)."""

    reset_into: bool = False
    """``reset_into(model, state, initial)`` resets a state the caller is done with in place,
    giving exactly what ``reset`` would (the runner then reuses one state's buffers)."""
    concurrent_states: bool = False
    """Several live states of one model step in lockstep at no extra cost, so the runner may
    batch episodes. Every engine must keep interleaved states apart (the contract); this flag
    says doing so is cheap, on the model or on its ``worlds_model`` (PyBullet restores a snapshot
    per switch between states of one server, so its batch runs on one server per episode)."""
    parallel_states: bool = False
    """``step``/``step_targets`` on different states of one model may run in several threads at
    once, the engine releasing the GIL while it steps (MuJoCo's ``mj_step``): the lockstep runner
    then steps a batch's episodes on all cores."""
    fluid: bool = False
    """The engine applies MuJoCo's fluid forces (``<option viscosity density>``: Swimmer). A scene
    that sets them is refused by an engine without, rather than run as a robot in vacuum."""
    native_derived: bool = False
    """``frame(..., derived=True)`` fills ``SimFrame.derived`` from the engine's own body arrays
    (MuJoCo), so gymnasium's tasks read exactly what gymnasium reads; other engines' frames leave
    it None and the task computes the same quantities from the joint state."""
    native_pd: bool = False
    """``native_pd_model(model, actuation)`` returns a copy of the model whose own actuators compute
    the card's PD law inside the engine at every physics step (or None where they cannot do it
    exactly), and ``step_targets(model, state, targets, n)`` steps it: the lockstep runner's path
    without per-physics-step Python (crosssim.runner.batched)."""
    ball_joints: bool = False
    """Builds a ball joint in the robot's base (CanonicalModel.ball_joints, e.g. three slides and
    a ball joint instead of a free joint); an engine without it is refused for such a robot."""
    push: bool = False
    """``push(model, state, velocity)`` adds a velocity to a free base (Locomotion's push
    disturbances, card ``task_options.pushes``); a card with pushes is refused by an engine without."""
    contact_softness: bool = False
    """Builds the compiled model's contact softness (MuJoCo's solref time constant and damping ratio,
    the variant axes ``contact_timeconst`` / ``contact_dampratio``) into its contacts. An engine
    without it refuses a variant that sets them, and a rehearsal or ladder there runs without those
    axes (docs/risk.md)."""
    mocap: bool = False
    """``step_mocap(model, state, law, command, n)`` drives a mocap body welded to the robot (a
    benchmark's own end-effector law, crosssim.actuation.MocapLaw: gymnasium-robotics' Fetch) with
    the model's own actuators on; an engine without it refuses a task run under such a law."""
    worlds: bool = False
    """``worlds_model(model, n)`` returns a model of ``n`` worlds stepped as one (or None where this
    model cannot), whose states are its worlds: the lockstep runner runs a batch on it. Its ``step``
    may defer the physics until the state is read, stepping every world stepped since together, so
    the runner plans every episode's physics before it reads any (Newton: one solver step for N
    worlds instead of N; PyBullet: one server per world, stepped at once). ``worlds_ready(model)``
    says whether this model can (Newton: SolverMuJoCo only); where it cannot, the runner runs the
    episodes one at a time."""


@runtime_checkable
class EngineResetInto(Protocol):
    def reset_into(self, model: Any, state: Any, initial: InitialState) -> Any:
        """Reset ``state`` (of this model, the caller done with it) in place and return it; must
        equal ``reset(model, initial)`` exactly."""


@runtime_checkable
class EnginePush(Protocol):
    def push(self, model: Any, state: Any, velocity: np.ndarray) -> None:
        """Add ``velocity`` [m/s, world frame] to the free base's linear velocity at once (as Isaac
        Lab's push_by_setting_velocity)."""


@runtime_checkable
class EngineNativePD(Protocol):
    def native_pd_model(self, model: Any, actuation: Any) -> Any | None:
        """A copy of ``model`` whose own actuators run ``actuation``'s PD law (kp [N m/rad], kd
        [N m s/rad], torque limit [N m]) at every physics step; None where they cannot exactly."""

    def step_targets(self, model: Any, state: Any, targets: np.ndarray, n_substeps: int) -> None:
        """Advance ``state`` of a ``native_pd_model`` ``n_substeps`` physics steps towards PD
        ``targets`` [rad or m], canonical joint order."""


@runtime_checkable
class EngineMocap(Protocol):
    def step_mocap(self, model: Any, state: Any, law: Any, command: np.ndarray, n_substeps: int) -> None:
        """Set the mocap pose and actuator controls from ``command`` as ``law`` says, then advance
        ``state`` ``n_substeps`` physics steps with the model's own actuators and weld."""


@runtime_checkable
class EngineWorlds(Protocol):
    def worlds_ready(self, model: Any) -> bool:
        """Whether ``model`` can run a batch as worlds (else the runner runs episodes one at a time)."""

    def worlds_model(self, model: Any, n: int) -> Any | None:
        """A model of ``n`` worlds stepped as one, each state one world; None where it cannot."""


@runtime_checkable
class EngineDerivedFrames(Protocol):
    def frame(self, model: Any, state: Any, *, contacts: bool = False, derived: bool = False) -> SimFrame:
        """The frame, with ``derived=True`` also ``SimFrame.derived`` from the engine's body arrays."""


PROTOCOLS: dict[str, type] = {"reset_into": EngineResetInto, "push": EnginePush, "native_pd": EngineNativePD,
                              "worlds": EngineWorlds, "mocap": EngineMocap, "native_derived": EngineDerivedFrames}
"""Capability flag -> the methods it promises. The other flags promise behaviour, not methods."""
PARAMETERS = {"native_derived": ("frame", "derived")}
"""Capability flag -> (method, keyword it must take)."""


def methods(protocol: type) -> list[str]:
    """The methods ``protocol`` declares, in order."""
    return [n for n, v in vars(protocol).items() if inspect.isfunction(v) and not n.startswith("_")]


def missing_methods(cls: type, capabilities: EngineCapabilities) -> list[str]:
    """``"flag: method, ..."`` for each set flag of ``capabilities`` whose methods (or keyword)
    ``cls`` lacks; empty when the class keeps every promise."""
    out = []
    for flag in (f.name for f in fields(capabilities)):
        if not getattr(capabilities, flag) or flag not in PROTOCOLS:
            continue
        lacking = [name for name in methods(PROTOCOLS[flag]) if not callable(getattr(cls, name, None))]
        if flag in PARAMETERS:
            name, keyword = PARAMETERS[flag]
            method = getattr(cls, name, None)
            if callable(method) and keyword not in inspect.signature(method).parameters:
                lacking.append(f"{name}(..., {keyword}=)")
        if lacking:
            out.append(f"{flag}: {', '.join(lacking)}")
    return out
