"""The engine contract every adapter follows, and the engine registry.

In the spirit of newton's Model/State/Control and MuJoCo's mjModel/mjData: ``load`` builds an
immutable model once, ``reset`` returns a state the caller owns, ``step`` advances it under
joint torques computed by crosssim.

State ownership: a state is an object of the engine's (MuJoCo's MjData, ``PyBulletState``,
``NewtonState``), never the model, and every call acts on the state it is given. Several states
of one model may be alive; stepped in turn, each evolves exactly as it would alone. Engines that
keep a world inside a server or a solver (PyBullet, SolverMuJoCo's warm start) swap it per state
behind this contract; nothing outside ``crosssim.engines`` knows.

Capabilities: what an engine offers beyond the contract is declared on its class as
``capabilities = EngineCapabilities(...)`` (``EngineBase`` gives the all-False default) and read
as declared, never probed. tests/test_engine_contract.py checks every registered engine.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from crosssim.errors import CrossSimError, EngineUnavailable
from crosssim.frame import InitialState, SimFrame
from crosssim.variant import CompiledModel, Variant


@dataclass(frozen=True)
class EngineProfile:
    """Settings of one engine column: which engine, and how it is configured.

    Loaded from ``simulators/<name>.yaml`` (crosssim.profiles): its settings are split there
    into the typed ``variant`` (timestep, scales, motor strength, latency: what a calibration
    sets) and the engine's own ``settings`` (solver, iterations, contact parameters), which the
    engine class lists in ``settings_keys``.
    """

    name: str
    """Column name in results, e.g. ``mujoco`` or ``newton-featherstone``."""
    engine: str
    """Registered engine this profile configures."""
    settings: dict = field(default_factory=dict)
    """Engine-specific settings only (never variant keys)."""
    python: str | None = None
    """Interpreter for this column's worker (e.g. Isaac Sim's Python 3.12); None: crosssim's own."""
    variant: Variant = Variant()
    """Calibration of this column: every condition's perturbation is applied on top of it."""
    path: Path | None = None
    """The YAML file it was read from (None: built in code or the adapter's defaults)."""


@dataclass(frozen=True)
class AuditRow:
    """One physical parameter, canonical value next to what the engine reports back."""

    quantity: str
    """e.g. ``body_mass``, ``joint_damping``."""
    item: str
    """Body, joint or actuator name (or ``model``)."""
    canonical: float
    engine: float | None
    """Value read back from the engine; None where the engine cannot represent it."""
    tolerance: float
    note: str = ""

    @property
    def status(self) -> str:
        if self.engine is None:  # cannot be represented: harmless only where it is zero
            return "ok" if self.canonical == 0 else "unsupported"
        if not np.isfinite(self.engine) or abs(self.engine - self.canonical) > self.tolerance:
            return "MISMATCH"
        return "ok"


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
    worlds: bool = False
    """``worlds_model(model, n)`` returns a model of ``n`` worlds stepped as one (or None where this
    model cannot), whose states are its worlds: the lockstep runner runs a batch on it. Its ``step``
    may defer the physics until the state is read, stepping every world stepped since together, so
    the runner plans every episode's physics before it reads any (Newton: one solver step for N
    worlds instead of N; PyBullet: one server per world, stepped at once). ``worlds_ready(model)``
    says whether this model can (Newton: SolverMuJoCo only); where it cannot, the runner runs the
    episodes one at a time."""


@runtime_checkable
class Engine(Protocol):
    """Adapter contract. All arrays are in canonical (MuJoCo) order and SI units."""

    name: str
    capabilities: EngineCapabilities
    """Optional features this engine has; see ``EngineBase`` for the all-False default."""
    settings_keys: frozenset[str]
    """Profile settings this engine reads; a profile naming any other is refused."""

    def load(self, compiled: CompiledModel, profile: EngineProfile) -> Any:
        """Build the engine's model from ``compiled`` (the scene with the variant applied; read
        ``compiled.scene`` for an engine's own importer) and ``profile.settings``, reconcile it
        to the compiled model, return the model handle."""

    def reset(self, model: Any, initial: InitialState) -> Any:
        """Return a new state in ``initial``, owned by the caller (never the model itself)."""

    def reset_into(self, model: Any, state: Any, initial: InitialState) -> Any:
        """Reset ``state`` (from this model, caller done with it) in place; only where
        ``capabilities.reset_into``. Must equal ``reset(model, initial)`` exactly."""

    def push(self, model: Any, state: Any, velocity: np.ndarray) -> None:
        """Add ``velocity`` [m/s, world frame] to the free base's linear velocity at once (as Isaac
        Lab's push_by_setting_velocity); only where ``capabilities.push``."""

    def step(self, model: Any, state: Any, torques: np.ndarray, n_substeps: int = 1) -> None:
        """Advance ``state`` (and only it) ``n_substeps`` physics steps holding ``torques`` (one per
        canonical joint)."""

    def joint_state(self, model: Any, state: Any) -> tuple[np.ndarray, np.ndarray]:
        """Fast read of (qpos, qvel) in canonical layout, for control at physics rate."""

    def frame(self, model: Any, state: Any, *, contacts: bool = False) -> SimFrame:
        """Read the full SimFrame; ``contacts`` also fills ``body_ext_wrench`` (costly)."""

    def audit(self, model: Any) -> list[AuditRow]:
        """Physical parameters read back from the engine next to the canonical ones."""

    def close(self, model: Any) -> None:
        """Release engine resources (servers, GPU memory); calling it twice is harmless."""


class EngineBase:
    """Optional base class for adapters: declares no optional capability.

    An adapter that has one overrides ``capabilities`` (and implements ``reset_into`` where it
    declares it); plugins need not subclass this, only declare ``capabilities`` themselves.
    """

    name: str = ""
    capabilities: EngineCapabilities = EngineCapabilities()
    settings_keys: frozenset[str] = frozenset()
    """Profile settings this engine reads (none by default)."""

    def reset_into(self, model: Any, state: Any, initial: InitialState) -> Any:
        raise NotImplementedError(f"{self.name}: reset_into is not declared in capabilities; call reset")

    def push(self, model: Any, state: Any, velocity: np.ndarray) -> None:
        raise NotImplementedError(f"{self.name}: push is not declared in capabilities")

    def worlds_ready(self, model: Any) -> bool:
        raise NotImplementedError(f"{self.name}: worlds is not declared in capabilities")

    def worlds_model(self, model: Any, n: int) -> Any:
        raise NotImplementedError(f"{self.name}: worlds is not declared in capabilities")


# name -> "module:Class". Built-in engines; third parties add theirs through the
# ``crosssim.engines`` entry-point group, so nothing here imports an engine eagerly.
BUILTIN_ENGINES: dict[str, str] = {
    "mujoco": "crosssim.engines.mujoco:EngineMuJoCo",
    "pybullet": "crosssim.engines.pybullet:EnginePyBullet",
    "newton": "crosssim.engines.newton:EngineNewton",
    "physx": "crosssim.engines.physx:EnginePhysX",
}


def _entry_points() -> dict[str, str]:
    from crosssim.registry import plugin_targets

    return plugin_targets("crosssim.engines")


def registered_engines() -> dict[str, str]:
    """Every engine crosssim knows: built-ins, then entry-point plugins."""
    return {**BUILTIN_ENGINES, **_entry_points()}


def get_engine(name: str) -> Engine:
    """Instantiate engine ``name``; raise EngineUnavailable with the install fix if it can't run."""
    target = registered_engines().get(name)
    if target is None:
        raise CrossSimError(f"unknown engine {name!r}; known engines: {sorted(registered_engines())}")
    module_name, _, cls_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        from crosssim.extras import engine_distribution, install_hint

        hint = install_hint(engine_distribution(name) or module_name.split(".")[0])
        raise EngineUnavailable(f"{name} is not available ({exc}): {hint}") from None
    engine = getattr(module, cls_name)()
    # Validated once here, so the runner can read the declaration without probing it.
    if not isinstance(getattr(engine, "capabilities", None), EngineCapabilities):
        raise CrossSimError(f"engine {name} ({target}) does not declare its capabilities: set the class attribute "
                            "capabilities = EngineCapabilities(...) or subclass crosssim.engines.base.EngineBase")
    return engine


def compiled_canonical(compiled: CompiledModel):
    """The canonical parameters of ``compiled`` *with its variant applied*: what an adapter
    reconciles to and audits against (a calibrated or perturbed column holds the variant's masses,
    friction and joint parameters, not the scene's). Call it before an adapter changes
    ``compiled.mj`` (MuJoCo's adapter zeroes native actuator gains)."""
    from crosssim.scene import canonical_from_mj, canonical_model

    if compiled.variant == type(compiled.variant)():  # unvaried: the cached scene model
        return canonical_model(compiled.scene)
    return canonical_from_mj(compiled.mj, compiled.scene)


def check_finite(frame: SimFrame, engine: str) -> None:
    if not frame.is_finite():
        from crosssim.errors import EngineFailure

        raise EngineFailure(f"{engine}: diverged (NaN) at t = {frame.time:.3f} s")
