"""Ground slope (issue 33's lesson from the fourth untouched part: a 5 deg slope felled policies the
rehearsal called LOW): an opt-in gap axis in the compiled model, gravity tilted so that +x is uphill.
Every engine takes gravity from the compiled model; a body falling freely shows it in each."""

from __future__ import annotations

import numpy as np
import pytest

from crosssim.deployment import DeploymentGap
from crosssim.engines import get_engine
from crosssim.errors import EngineUnavailable
from crosssim.frame import InitialState
from crosssim.scene import canonical_model
from crosssim.variant import ModelVariant, compile_model

BALL = """<mujoco><option timestep="0.002"/>
<worldbody><body name="ball" pos="0 0 10"><freejoint/><geom type="sphere" size="0.05" mass="1"/></body>
</worldbody></mujoco>"""
SLOPE = 0.1
STEPS = 150  # 0.3 s


def _fall(column: str, scene, slope: float) -> np.ndarray:
    """The ball's displacement [m] after 0.3 s of free fall in engine column ``column``."""
    from crosssim.profiles import load_profile

    profile = load_profile(column)
    try:
        engine = get_engine(profile.engine)
    except EngineUnavailable as exc:
        pytest.skip(str(exc))
    model = engine.load(compile_model(scene, ModelVariant(ground_slope=slope)), profile)
    c = canonical_model(scene)
    state = engine.reset(model, InitialState(c.qpos0.copy(), np.zeros(c.nv)))
    start = engine.frame(model, state).base_pos.copy()
    for _ in range(STEPS):
        engine.step(model, state, np.zeros(0), 1)
    out = engine.frame(model, state).base_pos - start
    engine.close(model)
    return out


@pytest.fixture(scope="module")
def ball(tmp_path_factory):
    path = tmp_path_factory.mktemp("slope") / "ball.xml"
    path.write_text(BALL)
    return path


@pytest.mark.parametrize("name", ["mujoco", "pybullet", "physx", "newton-mujoco-warp"])
def test_a_slope_tilts_gravity_in_every_engine(name, ball):
    """Free fall for 0.3 s: x = -g sin(slope) t^2 / 2 downhill, z = -g cos(slope) t^2 / 2, within 2 mm
    (each engine's integrator; a slope applied with the wrong sign or axis misses by 44 mm)."""
    t, g = STEPS * 0.002, 9.81
    flat = _fall(name, ball, 0.0)
    tilted = _fall(name, ball, SLOPE)
    assert abs(flat[0]) < 1e-6
    assert tilted[0] == pytest.approx(-0.5 * g * np.sin(SLOPE) * t * t, abs=2e-3)
    assert tilted[2] == pytest.approx(flat[2] * np.cos(SLOPE), abs=2e-3)
    assert abs(tilted[1]) < 1e-6


def test_the_slope_is_a_deployment_key_with_no_default():
    """Opt-in, like the other mechanisms: no robot class's default gap holds it (docs/risk.md)."""
    from crosssim.deployment import DEFAULTS

    assert all(gap.ground_slope == 0.0 for gap in DEFAULTS.values())
    assert DeploymentGap(ground_slope=0.05).axes(0.02)["ground_slope"] == 0.05
