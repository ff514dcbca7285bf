"""The engine contract: everything the runner may call on any engine.

In the spirit of newton's Model/State/Control and MuJoCo's mjModel/mjData: ``load`` builds an
immutable model once, ``reset`` returns a state the caller owns, ``step`` advances it under
joint torques computed by crosssim. All arrays are in canonical (MuJoCo) joint order and SI units.

State ownership: a state is an object of the engine's (MuJoCo's MjData, ``PyBulletState``,
``NewtonState``), never the model, and every call acts on the state it is given. Several states
of one model may be alive; stepped in turn, each evolves exactly as it would alone. Engines that
keep a world inside a server or a solver (PyBullet, SolverMuJoCo's warm start) swap it per state
behind this contract; nothing outside ``crosssim.engines`` knows.

Beyond this core, an engine declares optional capabilities on its class
(``capabilities = EngineCapabilities(...)``); each capability's methods are a Protocol of
crosssim.engines.capabilities, and the registry refuses a class whose flags promise methods it
lacks. tests/test_engine_contract.py checks every registered engine's behaviour.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from crosssim.engines.capabilities import EngineCapabilities
from crosssim.engines.settings import EngineSettings

if TYPE_CHECKING:
    from crosssim.engines.audit import AuditRow
    from crosssim.engines.settings import EngineProfile
    from crosssim.frame import InitialState, SimFrame
    from crosssim.variant import CompiledModel

CORE_METHODS = ("load", "reset", "step", "joint_state", "frame", "audit", "close")
"""The methods every engine has (the Protocol below), whatever its capabilities."""


@runtime_checkable
class Engine(Protocol):
    """Adapter contract. All arrays are in canonical (MuJoCo) order and SI units."""

    name: str
    """Registered name, used in messages (``mujoco``, ``pybullet``...)."""
    capabilities: EngineCapabilities
    """Optional features this engine has; ``EngineBase`` gives the all-False default."""
    settings_model: type[EngineSettings]
    """The pydantic model of the profile settings this engine reads (crosssim.engines.settings);
    a profile holding any other key is refused when it is read."""

    def load(self, compiled: CompiledModel, profile: EngineProfile) -> Any:
        """Build the engine's model from ``compiled`` (the scene with the variant applied; read
        ``compiled.scene`` for an engine's own importer) and ``profile.settings`` (an instance of
        ``settings_model``), reconcile it to the compiled model, return the model handle."""

    def reset(self, model: Any, initial: InitialState) -> Any:
        """Return a new state at ``initial`` (qpos [m, rad], qvel [m/s, rad/s], MuJoCo layout),
        owned by the caller (never the model itself); its time is 0 s."""

    def step(self, model: Any, state: Any, torques: np.ndarray, n_substeps: int = 1) -> None:
        """Advance ``state`` (and only it) ``n_substeps`` physics steps holding ``torques`` [N m or
        N], one per canonical joint."""

    def joint_state(self, model: Any, state: Any) -> tuple[np.ndarray, np.ndarray]:
        """Fast read of (qpos [m, rad], qvel [m/s, rad/s]) in MuJoCo's layout, for control at
        physics rate; the arrays may be the engine's own (read, never write them)."""

    def frame(self, model: Any, state: Any, *, contacts: bool = False) -> SimFrame:
        """Read the full SimFrame (SI units, world frame, quaternions w x y z); ``contacts`` also
        fills ``body_ext_wrench`` [N m, N] per body (costly)."""

    def audit(self, model: Any) -> list[AuditRow]:
        """Physical parameters read back from the engine next to the canonical ones."""

    def close(self, model: Any) -> None:
        """Release engine resources (servers, GPU memory); calling it twice is harmless."""


class EngineBase:
    """Optional base class for adapters: declares no optional capability and reads no settings.

    An adapter that has a capability sets its flag in ``capabilities`` and defines the methods of
    that capability's Protocol (crosssim.engines.capabilities); one that reads settings sets
    ``settings_model``. Plugins need not subclass this, only declare both themselves.
    """

    name: str = ""
    capabilities: EngineCapabilities = EngineCapabilities()
    settings_model: type[EngineSettings] = EngineSettings
