"""Engine columns' configuration: ``EngineProfile`` and each built-in engine's typed settings.

A profile (``simulators/<name>.yaml``, read by crosssim.profiles) names an engine and holds its
settings; the engine's own keys are a pydantic model per engine (``extra='forbid'``, strict types,
each field's docstring its description), so a typo or a value of the wrong type is refused in one
line when the profile is read, never as a ValueError deep in an adapter. Nothing here imports an
engine: the profile reader types a built-in engine's settings without loading its library.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union

from pydantic import BaseModel, ConfigDict, Field, Strict, StrictBool, StrictInt, field_validator

from crosssim.errors import CrossSimError
from crosssim.variant import Variant

Number = Annotated[float, Strict()]
"""A number in seconds, metres, N/m...: an integer is one, ``"0.5"`` and ``true`` are not."""


class EngineSettings(BaseModel):
    """An engine's own profile settings; this base reads none (every field at its default)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True, populate_by_name=True)

    def given(self) -> dict:
        """The settings a profile wrote (defaults left out), as its YAML holds them."""
        return self.model_dump(exclude_unset=True, by_alias=True)


class ForeignSettings(EngineSettings):
    """Settings of an engine that is not importable here, for a profile that runs it under another
    interpreter (``python:``): kept as written and typed by the worker, where the engine lives."""

    model_config = ConfigDict(extra="allow")


class MuJoCoSettings(EngineSettings):
    iterations: StrictInt | None = Field(None, ge=1)
    """Constraint solver iterations (``<option iterations>``); None: the scene's."""


class PyBulletSettings(EngineSettings):
    substep_dt: Number | None = Field(0.002, ge=0)
    """Longest Bullet step [s]: each physics step is split into Bullet steps no longer than this
    (0 or None: not split)."""
    substeps: StrictInt = Field(0, ge=0)
    """Bullet's own ``numSubSteps`` per Bullet step."""
    solver_iterations: StrictInt = Field(50, ge=1)
    """Bullet's ``numSolverIterations``."""
    armature: Literal["auto", "emulate", "inertia", "ignore"] = "auto"
    """How joint armature is represented: emulate (mass-matrix compensation), inertia (added to the
    body's inertia), ignore; auto: inertia for a free or ball-jointed base, else emulate."""
    torsional: Literal["refuse", "drop"] = "refuse"
    """A geom with torsional or rolling friction (condim 4 or 6; Fetch's fingers): refuse the column
    (default), or drop: build its sliding friction only (profile pybullet-sliding; docs/manipulation.md)."""


class PhysXSettings(EngineSettings):
    solver: Literal["tgs", "pgs"] = "tgs"
    """PhysX's solver: tgs (temporal Gauss-Seidel) or pgs (projected Gauss-Seidel), in either case."""
    position_iterations: StrictInt = Field(4, ge=1)
    """Articulation solver position iterations."""
    velocity_iterations: StrictInt = Field(1, ge=0)
    """Articulation solver velocity iterations."""
    contact_offset: Number = Field(0.01, ge=0)
    """Distance [m] at which PhysX starts generating contacts."""
    rest_offset: Number = 0.0
    """Distance [m] at which two shapes come to rest."""
    torsional: Literal["refuse", "drop"] = "refuse"
    """A geom with torsional or rolling friction (condim 4 or 6; Fetch's fingers): refuse the column
    (default), or drop: build its sliding friction only (profile physx-sliding; docs/manipulation.md)."""
    hull_tolerance: Number = Field(0.002, ge=0)
    """Largest distance [m] PhysX's cooked convex hull of a mesh (at most 255 vertices) may lie from
    MuJoCo's hull of all its vertices; a mesh beyond it refuses the column (crosssim.engines.physx_hull).
    The Unitree G1's hulls are 0.6-1.7 mm off."""

    @field_validator("solver", mode="before")
    @classmethod
    def _lower(cls, value):
        return value.lower() if isinstance(value, str) else value


MUJOCO_SOLVERS = ("mujoco-warp", "mujoco-c")
"""Newton's SolverMuJoCo on MuJoCo-Warp kernels, or on MuJoCo's C library."""
NEWTON_SOLVERS = (*MUJOCO_SOLVERS, "featherstone", "xpbd", "semi-implicit")


class PenaltyGains(EngineSettings):
    ke: Number | None = None
    """Stiffness [N/m or N m/rad]."""
    kd: Number | None = None
    """Damping [N s/m or N m s/rad]."""


class ContactGains(PenaltyGains):
    kf: Number | None = None
    """Friction gain [N s/m]."""
    ka: Number | None = None
    """Adhesion distance [m]."""
    from_: Literal["mujoco"] | None = Field(None, alias="from")
    """``mujoco``: start from the gains derived from MuJoCo's contact softness, then apply the others."""


class NewtonSettings(EngineSettings):
    solver: Literal[NEWTON_SOLVERS] = "mujoco-warp"  # type: ignore[valid-type]
    """Newton solver: mujoco-warp, mujoco-c, featherstone, xpbd or semi-implicit."""
    substeps: StrictInt = Field(1, ge=1)
    """Solver steps per physics step (at least)."""
    substep_dt: Number | None = Field(None, gt=0)
    """Longest solver step [s]: raises ``substeps`` where the physics step is longer."""
    capture: StrictBool = True
    """Replay each physics step as a captured Warp graph (never with mujoco-c)."""
    passive_torques: StrictBool = True
    """XPBD: apply joint damping and springs as joint forces before each solver step."""
    joint_limit: PenaltyGains | None = None
    """Penalty joint-limit gains (Featherstone, semi-implicit); unset: derived from MuJoCo's solreflimit."""
    contact: Union[Literal["mujoco"], ContactGains, None] = None
    """Penalty contact gains of Newton's own solvers: ``mujoco`` (derived from MuJoCo's solref /
    solimp and the robot's mass) or a mapping of ke / kd / kf / ka."""
    solver_args: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments handed to the Newton solver's constructor as they are."""


BUILTIN_SETTINGS: dict[str, type[EngineSettings]] = {
    "mujoco": MuJoCoSettings, "pybullet": PyBulletSettings, "physx": PhysXSettings, "newton": NewtonSettings}
"""Each built-in engine's settings model, reachable without importing the engine (its class's
``settings_model`` is the same; tests/test_engine_settings.py checks it)."""


@dataclass(frozen=True)
class EngineProfile:
    """Settings of one engine column: which engine, and how it is configured.

    Loaded from ``simulators/<name>.yaml`` (crosssim.profiles): its settings are split there
    into the typed ``variant`` (timestep, scales, motor strength, latency: what a calibration
    sets) and the engine's own ``settings`` (solver, iterations, contact parameters), typed by
    the engine's ``settings_model``.
    """

    name: str
    """Column name in results, e.g. ``mujoco`` or ``newton-featherstone``."""
    engine: str
    """Registered engine this profile configures."""
    settings: EngineSettings = field(default_factory=EngineSettings)
    """Engine-specific settings only (never variant keys); the base ``EngineSettings()``: the
    engine's defaults."""
    python: str | None = None
    """Interpreter for this column's worker (e.g. Isaac Sim's Python 3.12); None: crosssim's own."""
    variant: Variant = Variant()
    """Calibration of this column: every condition's perturbation is applied on top of it."""
    path: Path | None = None
    """The YAML file it was read from (None: built in code or the adapter's defaults)."""


S = TypeVar("S", bound=EngineSettings)


def settings_of(profile: EngineProfile, model: type[S]) -> S:
    """``profile``'s settings as the engine's ``model``: as typed when the profile was read, or the
    model's defaults for a profile built in code without settings."""
    settings = profile.settings
    if isinstance(settings, model):
        return settings
    if type(settings) in (EngineSettings, ForeignSettings) and not settings.given():
        return model()
    where = profile.path or f"profile {profile.name}"
    raise CrossSimError(f"{where}: its settings are {type(settings).__name__}, and engine {profile.engine} reads "
                        f"{model.__name__}; read the profile with crosssim.profiles.load_profile")
