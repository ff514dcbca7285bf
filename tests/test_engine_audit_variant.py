"""A calibrated or perturbed column audits against the model it was built from (the variant
applied), not against the unvaried scene: every engine reads back the variant's masses,
friction, damping and armature, so its audit shows no MISMATCH row for them."""

from __future__ import annotations

import numpy as np
import pytest

from crosssim.engines import EngineProfile, get_engine
from crosssim.engines.mujoco import audit_rows, read_back_mujoco
from crosssim.errors import EngineUnavailable
from crosssim.profiles import load_profile
from crosssim.scene import canonical_model, resolve_scene
from crosssim.variant import ModelVariant, Variant, compile_model

SCENE = "gymnasium:hopper.xml"
VARIANT = ModelVariant(mass_scale=1.3, friction_scale=0.7, damping_scale=2.0, armature_scale=1.5,
                       frictionloss_scale=1.0)
COLUMNS = ("mujoco", "pybullet", "physx", "newton-mujoco-warp")


def _audit(column: str, variant: ModelVariant):
    try:
        base = load_profile(column)
        engine = get_engine(base.engine)
    except EngineUnavailable as exc:
        pytest.skip(str(exc))
    profile = EngineProfile(column, base.engine, base.settings, variant=Variant(variant))
    model = engine.load(compile_model(resolve_scene(SCENE), variant), profile)
    try:
        return engine.audit(model)
    finally:
        engine.close(model)


def _mismatched(rows) -> set:
    return {(r.quantity, r.item) for r in rows if r.status == "MISMATCH"}


@pytest.mark.parametrize("column", COLUMNS)
def test_a_varied_column_audits_against_its_variant(column):
    """No row mismatches under the variant that does not already mismatch without it (PyBullet's
    integrator: Euler where hopper.xml asks for RK4)."""
    rows = _audit(column, VARIANT)
    assert _mismatched(rows) <= _mismatched(_audit(column, ModelVariant())), [r for r in rows if r.status == "MISMATCH"]
    scene = canonical_model(resolve_scene(SCENE))
    mass = {r.item: r.canonical for r in rows if r.quantity == "body_mass"}
    assert mass["torso"] == pytest.approx(1.3 * scene.body_mass[scene.body_names.index("torso")])
    damping = {r.item: r.canonical for r in rows if r.quantity == "joint_damping"}
    assert damping["thigh_joint"] == pytest.approx(2.0 * scene.joint_damping[scene.joint_index("thigh_joint")])


def test_auditing_against_the_unvaried_scene_would_flag_the_variant():
    """The check can fail: the same read-back against the scene's own parameters is a MISMATCH
    on masses, friction, damping and armature (what every calibrated column showed before)."""
    m = compile_model(resolve_scene(SCENE), VARIANT).mj
    scene = canonical_model(resolve_scene(SCENE))
    rows = audit_rows(scene, read_back_mujoco(m, scene))
    flagged = {r.quantity for r in rows if r.status == "MISMATCH"}
    assert {"body_mass", "geom_friction", "joint_damping", "joint_armature"} <= flagged
    assert np.isfinite([r.canonical for r in rows]).all()
