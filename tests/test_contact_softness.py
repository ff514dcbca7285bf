"""Contact softness (issue 33): MuJoCo's solref time constant as a variant axis, in the compiled
model. MuJoCo and Newton (SolverMuJoCo) build it; PyBullet and PhysX refuse it in one line, and
their rehearsal and contact ladder run without it. Measured numbers: docs/risk.md, "Contact
softness"."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from crosssim.engines import EngineProfile, get_engine
from crosssim.errors import CrossSimError, EngineFailure, EngineUnavailable
from crosssim.frame import InitialState
from crosssim.scene import canonical_model
from crosssim.variant import CONTACT_SOFTNESS, ModelVariant, Variant, compile_model

BOX = """<mujoco><option timestep="0.002"/>
<worldbody><geom name="floor" type="plane" size="5 5 0.1" friction="0.5 0.005 0.0001"/>
<body name="box" pos="0 0 {z}"><freejoint/>
<geom type="box" size="0.1 0.1 0.02" mass="1" friction="0.5 0.005 0.0001"/></body>
</worldbody></mujoco>"""
HALF = 0.02
"""The box's half height [m]: its centre's height when it touches the floor."""


@pytest.fixture(scope="module")
def boxes(tmp_path_factory):
    """(resting, dropped from 5 cm) box scenes."""
    folder = tmp_path_factory.mktemp("soft")
    out = []
    for name, z in (("rest", HALF), ("drop", HALF + 0.05)):
        (folder / f"{name}.xml").write_text(BOX.format(z=z))
        out.append(folder / f"{name}.xml")
    return tuple(out)


def _heights(name: str, scene: Path, timeconst, steps: int = 400, profile=None) -> np.ndarray:
    """The box centre's height [m] after each 2 ms physics step for 0.8 s."""
    try:
        engine = get_engine(name)
    except EngineUnavailable as exc:
        pytest.skip(str(exc))
    model = engine.load(compile_model(scene, ModelVariant(contact_timeconst=timeconst)),
                        profile or EngineProfile(name, name))
    c = canonical_model(scene)
    state = engine.reset(model, InitialState(c.qpos0.copy(), np.zeros(c.nv)))
    out = []
    for _ in range(steps):
        engine.step(model, state, np.zeros(0), 1)
        out.append(engine.frame(model, state).base_pos[2])
    engine.close(model)
    return np.array(out)


def _sink(name, boxes, timeconst, profile=None) -> tuple[float, float]:
    """(resting penetration, deepest penetration after a 5 cm drop) [mm]."""
    rest, drop = (_heights(name, scene, timeconst, profile=profile) for scene in boxes)
    return 1e3 * (HALF - rest[-50:].mean()), 1e3 * (HALF - drop.min())


def test_the_axis_sets_every_contacts_solref(boxes):
    """Every geom's time constant (the floor's too: MuJoCo mixes a contact's two solrefs) and damping
    ratio; None keeps the scene's own; a profile setting is typed and range-checked."""
    from crosssim.profiles import check_ranges

    m = compile_model(boxes[0], ModelVariant(contact_timeconst=0.04, contact_dampratio=0.7)).mj
    assert np.allclose(m.geom_solref, [[0.04, 0.7]] * m.ngeom)
    assert np.allclose(compile_model(boxes[0]).mj.geom_solref, [[0.02, 1.0]] * m.ngeom)  # MuJoCo's default
    v = Variant.from_settings({"contact_timeconst": "0.03"}, "profile x")
    assert v.model.contact_timeconst == 0.03 and v.harness == Variant().harness
    with pytest.raises(CrossSimError, match="contact_timeconst.*> 0"):
        check_ranges(Variant.of(contact_timeconst=0.0), "profile x")


def test_direct_form_solref_becomes_a_time_constant(tmp_path):
    """A scene stating (stiffness, damping) directly (negative solref) gets the time constant, critically
    damped; a damping ratio alone cannot apply there and says so."""
    scene = tmp_path / "direct.xml"
    scene.write_text(BOX.format(z=HALF).replace('mass="1"', 'mass="1" solref="-5000 -50"'))
    m = compile_model(scene, ModelVariant(contact_timeconst=0.03)).mj
    assert np.allclose(m.geom_solref, [[0.03, 1.0]] * m.ngeom)
    with pytest.raises(CrossSimError, match="direct"):
        compile_model(scene, ModelVariant(contact_dampratio=0.5))


def test_a_scene_with_its_own_time_constant_keeps_it_as_nominal(tmp_path):
    """The axis scales the scene's own time constants (value / 20 ms): a stiffer robot geom (5 ms) is
    not reset to 20 ms by the ladder's nominal, nor made 4x softer by its first rung."""
    scene = tmp_path / "stiff.xml"
    scene.write_text(BOX.format(z=HALF).replace('mass="1"', 'mass="1" solref="0.005 1"'))
    own = compile_model(scene).mj.geom_solref[:, 0]
    assert sorted(own) == [0.005, 0.02]
    for value in (0.02, 0.022, 0.04):
        m = compile_model(scene, ModelVariant(contact_timeconst=value)).mj
        assert np.allclose(m.geom_solref[:, 0], own * value / 0.02), value


def test_mujoco_contact_gives_way_more_as_the_time_constant_grows(boxes):
    """Resting penetration grows with the square of the time constant (measured 0.017, 0.068, 0.25 mm
    at 20, 40, 80 ms) and the deepest sink after a 5 cm drop with it (5.6, 12.5, 26.4 mm)."""
    sinks = [_sink("mujoco", boxes, t) for t in (0.02, 0.04, 0.08)]
    rest, impact = np.array(sinks).T
    assert np.all(np.diff(rest) > 0) and np.all(np.diff(impact) > 0), sinks
    assert rest[1] / rest[0] == pytest.approx(4.0, rel=0.1)  # ~ timeconst^2
    assert 4.5 < impact[0] < 6.5 and 11.0 < impact[1] < 14.0, sinks
    assert _sink("mujoco", boxes, None) == pytest.approx(sinks[0], abs=1e-9)  # the scene's own is 20 ms


def test_newton_solver_mujoco_builds_the_softness_as_mujoco(boxes):
    """SolverMuJoCo takes each shape's solref from the compiled model (Newton's importer reads the MJCF's):
    at 40 ms, resting and impact sink within 0.005 mm and 0.1 mm of MuJoCo's (measured: equal to
    0.0001 mm and 0.001 mm); Newton at nominal sinks 5.6 mm, so the variant reached it."""
    pytest.importorskip("newton")
    from crosssim.profiles import load_profile

    profile = load_profile("newton-mujoco-warp")
    ref, got = _sink("mujoco", boxes, 0.04), _sink("newton", boxes, 0.04, profile)
    assert got[0] == pytest.approx(ref[0], abs=0.005) and got[1] == pytest.approx(ref[1], abs=0.1), (ref, got)
    assert _sink("newton", boxes, None, profile)[1] < 7.0


@pytest.mark.parametrize("name", ["pybullet", "physx", "newton-xpbd"])
def test_engines_without_solref_refuse_the_axis_in_one_line(name, boxes):
    """PyBullet's and PhysX's contacts have no solref counterpart (docs/risk.md: a mapped PyBullet
    contact stiffness brought the drop closer but the resting sink 20x further, and could not hold at
    nominal); Newton's XPBD has its own contact gains."""
    from crosssim.profiles import load_profile
    from crosssim.runner.simulator import open_engine

    profile = load_profile(name)
    try:
        get_engine(profile.engine)
    except EngineUnavailable as exc:
        pytest.skip(str(exc))
    with pytest.raises(EngineFailure) as err:
        open_engine(profile, boxes[0], Variant.of(contact_timeconst=0.04)).close()
    text = str(err.value)
    assert "\n" not in text and "contact_timeconst" in text and profile.engine in text, text


def test_contact_ladder_and_legged_rehearsal_carry_the_softness():
    """The contact ladder rises 20 -> 40 ms; the legged class's expected gap draws it (0.02 to 0.03 s)."""
    from crosssim.deployment import DEFAULTS
    from crosssim.rehearsal import distribution, draw, fields
    from crosssim.sweep import LADDERS

    assert dict(LADDERS["contact"].axes)["contact_timeconst"][-1] == 0.04
    assert LADDERS["contact"].severity_of("contact_timeconst", 0.03) == pytest.approx(2.5)
    axes = distribution(DEFAULTS["legged"].axes(0.02), LADDERS)
    soft = [a for a in axes if a.name == "contact_timeconst"]
    assert soft and soft[0].family == "contact" and soft[0].expected == 0.03
    values = [draw(fields(axes)["rehearsal"], seed)["contact_timeconst"] for seed in range(50)]
    assert 0.02 <= min(values) and max(values) <= 0.03 and np.std(values) > 0.002
    assert "contact_timeconst" not in {a.name for a in distribution(DEFAULTS["gymnasium"].axes(0.02), LADDERS)}


def _run(job):
    from crosssim.runner.workers import execute_job

    rows, errors = {}, []

    def emit(kind, payload):
        if kind == "row":
            rows[(payload["condition"], payload["episode"])] = payload
        elif kind == "error":
            errors.append(payload)
    execute_job(job, emit)
    return rows, errors


def test_an_engine_without_solref_rehearses_and_sweeps_without_it(good_policy):
    """PyBullet runs a rehearsal drawing the softness, and the contact ladder's rungs, without it (as an
    engine that cannot push drops pushes), while a condition that asks for it outright is refused.
    MuJoCo's rehearsal rows under the same draws differ from a rehearsal without the softness."""
    from crosssim.rehearsal import FAMILY, RealityAxis, fields
    from crosssim.runner.workers import EngineJob, without_softness
    from crosssim.sweep import LADDERS

    card = str(Path(good_policy) / "card.yaml")
    episodes = ((0, 3), (1, 4))
    soft = (RealityAxis("contact_timeconst", 0.08, "contact"),)
    rehearsal = fields(soft)
    ladder = LADDERS["contact"]
    sweep = (("contact", tuple((ladder.condition(k), ladder.fields(k)) for k in range(1, ladder.rungs + 1))),)
    base = dict(card_path=card, episodes=episodes, max_steps=150)
    rows, errors = _run(EngineJob(profile="pybullet", conditions=(("nominal", {}), (FAMILY, rehearsal)), sweeps=sweep,
                                  sweep_episodes=episodes, **base))
    assert not errors, errors
    assert {c for c, _ in rows} >= {"nominal", FAMILY} and any(c.startswith("contact@") for c, _ in rows), set(rows)
    _, errors = _run(EngineJob(profile="pybullet", conditions=(("soft", {"contact_timeconst": 0.08}),), **base))
    assert len(errors) == 1 and "contact_timeconst" in errors[0] and "pybullet" in errors[0], errors
    assert without_softness({"friction_scale": 0.9, **dict.fromkeys(CONTACT_SOFTNESS, 0.03)}) == {"friction_scale": 0.9}
    mujoco, errors = _run(EngineJob(profile="mujoco", conditions=((FAMILY, rehearsal), ("nominal", {})), **base))
    assert not errors
    assert [mujoco[(FAMILY, i)]["ret"] for i, _ in episodes] != [mujoco[("nominal", i)]["ret"] for i, _ in episodes]
