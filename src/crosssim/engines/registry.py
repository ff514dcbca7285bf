"""The engines crosssim knows: a ``crosssim.registry.Registry`` like every other kind of extension.

Built-in engines are ``"module:Class"`` strings, imported only when one is asked for; third parties
add theirs through the ``crosssim.engines`` entry-point group (docs/extending.md). A class is
checked when the registry loads it, before any instance exists: the core contract's methods, a
declared ``capabilities`` whose every set flag has its methods, and a ``settings_model``.
"""

from __future__ import annotations

from crosssim.engines.capabilities import EngineCapabilities, missing_methods
from crosssim.engines.contract import CORE_METHODS, Engine
from crosssim.engines.settings import BUILTIN_SETTINGS, EngineSettings
from crosssim.errors import CrossSimError, EngineUnavailable
from crosssim.registry import Registry

BUILTIN_ENGINES: dict[str, str] = {
    "mujoco": "crosssim.engines.mujoco:EngineMuJoCo",
    "pybullet": "crosssim.engines.pybullet:EnginePyBullet",
    "newton": "crosssim.engines.newton:EngineNewton",
    "physx": "crosssim.engines.physx:EnginePhysX",
}
"""name -> "module:Class". Nothing here imports an engine eagerly."""


def _unavailable(name: str, target: str, exc: ImportError) -> EngineUnavailable:
    from crosssim.extras import engine_distribution, install_hint

    hint = install_hint(engine_distribution(name) or target.partition(":")[0].split(".")[0])
    return EngineUnavailable(f"{name} is not available ({exc}): {hint}")


ENGINES = Registry("engine", "crosssim.engines", BUILTIN_ENGINES, missing=_unavailable)


def registered_engines() -> dict[str, str]:
    """Every engine crosssim knows, ``name -> "module:Class"``: built-ins, then entry-point plugins."""
    return ENGINES.targets()


def engine_class(name: str) -> type:
    """The class of engine ``name``, checked (``check_engine_class``); EngineUnavailable with the
    install fix where its library is missing, CrossSimError where the name is unknown."""
    cls = ENGINES.load(name)
    check_engine_class(name, cls)
    return cls


def get_engine(name: str) -> Engine:
    """A new instance of engine ``name`` (see ``engine_class``)."""
    return engine_class(name)()


def check_engine_class(name: str, cls) -> None:
    """Refuse, in one line, an engine class that breaks the contract where its declaration says:
    a core method missing, no ``capabilities``, a set capability flag without its methods
    (crosssim.engines.capabilities), or no ``settings_model``. The runner reads the declaration
    without probing it, so a broken promise must fail here, not inside an episode."""
    where = f"engine {name!r} ({registered_engines().get(name, getattr(cls, '__qualname__', cls))})"
    if not isinstance(cls, type):
        raise CrossSimError(f"{where} is a {type(cls).__name__}, not a class; register the engine's class")
    core = [m for m in CORE_METHODS if not callable(getattr(cls, m, None))]
    if core:
        raise CrossSimError(f"{where} lacks {', '.join(core)} of the engine contract (crosssim.engines.contract.Engine)")
    capabilities = getattr(cls, "capabilities", None)
    if not isinstance(capabilities, EngineCapabilities):
        raise CrossSimError(f"{where} does not declare its capabilities: set the class attribute "
                            "capabilities = EngineCapabilities(...) or subclass crosssim.engines.EngineBase")
    missing = missing_methods(cls, capabilities)
    if missing:
        raise CrossSimError(f"{where} declares capabilities it does not implement ({'; '.join(missing)}): define "
                            "them (crosssim.engines.capabilities) or leave those flags False")
    model = getattr(cls, "settings_model", None)
    if not (isinstance(model, type) and issubclass(model, EngineSettings)):
        raise CrossSimError(f"{where} declares no settings_model: set it to a subclass of "
                            "crosssim.engines.EngineSettings (EngineSettings itself: no settings)")


def settings_model(name: str) -> type[EngineSettings]:
    """The settings model of engine ``name``; a built-in's without importing its library, a
    plugin's from its class (which imports the plugin)."""
    if name in BUILTIN_SETTINGS and registered_engines().get(name) == BUILTIN_ENGINES.get(name):
        return BUILTIN_SETTINGS[name]
    return engine_class(name).settings_model
