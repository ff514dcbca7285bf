"""An engine class is checked when the registry loads it: a capability flag promises methods
(crosssim.engines.capabilities), and a class whose flags promise what it lacks is refused in one
line before any instance exists, not deep inside an episode. The plugins here are entry points
as ``pip install`` would leave them (``plugin_targets`` answers for the installed distributions)."""

from __future__ import annotations

import numpy as np
import pytest

import crosssim.registry
from crosssim.engines import EngineBase, EngineCapabilities, get_engine, registered_engines
from crosssim.errors import CrossSimError, EngineUnavailable


class EngineStub(EngineBase):
    """The core contract and nothing more: a valid engine that declares no capability."""

    name = "stub"

    def load(self, compiled, profile):
        return object()

    def reset(self, model, initial):
        return object()

    def step(self, model, state, torques, n_substeps=1):
        pass

    def joint_state(self, model, state):
        return np.zeros(0), np.zeros(0)

    def frame(self, model, state, *, contacts=False):
        raise NotImplementedError

    def audit(self, model):
        return []

    def close(self, model):
        pass


class EngineClaimsWorlds(EngineStub):
    """Says it runs a batch as worlds, but has neither worlds_ready nor worlds_model."""

    capabilities = EngineCapabilities(concurrent_states=True, worlds=True)


class EngineClaimsDerived(EngineStub):
    """Says its frames carry derived arrays, but its frame() takes no ``derived``."""

    capabilities = EngineCapabilities(native_derived=True)


class EngineClaimsNativePD(EngineStub):
    """Has native_pd_model but not step_targets."""

    capabilities = EngineCapabilities(native_pd=True)

    def native_pd_model(self, model, actuation):
        return None


class EngineWithoutStep(EngineStub):
    step = None


PLUGINS = {name: f"{__name__}:{cls.__name__}" for name, cls in (
    ("stub", EngineStub), ("claims-worlds", EngineClaimsWorlds), ("claims-derived", EngineClaimsDerived),
    ("claims-native-pd", EngineClaimsNativePD), ("no-step", EngineWithoutStep))}


@pytest.fixture()
def plugins(monkeypatch):
    """The engines above, registered through the ``crosssim.engines`` entry-point group."""
    real = crosssim.registry.plugin_targets

    def targets(group):
        return {**real(group), **(PLUGINS if group == "crosssim.engines" else {})}

    monkeypatch.setattr(crosssim.registry, "plugin_targets", targets)


def test_a_valid_plugin_engine_registers(plugins):
    assert registered_engines()["stub"] == PLUGINS["stub"]
    assert isinstance(get_engine("stub"), EngineStub)


@pytest.mark.parametrize("name, says", [
    ("claims-worlds", "worlds: worlds_ready, worlds_model"),
    ("claims-derived", "native_derived: frame(..., derived=)"),
    ("claims-native-pd", "native_pd: step_targets"),
    ("no-step", "lacks step of the engine contract"),
])
def test_a_capability_without_its_methods_is_refused_at_registration(plugins, name, says):
    with pytest.raises(CrossSimError) as err:
        get_engine(name)
    message = str(err.value)
    assert "\n" not in message and f"engine {name!r}" in message and says in message, message


@pytest.mark.parametrize("name", sorted(registered_engines()))
def test_every_registered_engine_keeps_its_capabilities_promises(name):
    try:
        engine = get_engine(name)  # raises where the class breaks a promise
    except EngineUnavailable as exc:
        pytest.skip(str(exc))
    assert isinstance(type(engine).capabilities, EngineCapabilities)
