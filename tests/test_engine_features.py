"""The feature inventory at load (issue #35): every MJCF feature a scene uses is built as MuJoCo
builds it, or the column is refused in one line naming the feature, the element and the engine
(crosssim.engines.features). One small scene per feature, run in every engine column: where the
column builds the feature, the scene behaves as in MuJoCo; where it cannot, the load is refused.

Shown failing on the code before this change (main at 05cf1c3, checked out in a worktree): the
pair and exclude cases in pybullet and physx (the box fell through the floor / rested on it),
the height field in pybullet and physx (refused as "geom type 1 ... not supported"), frictionless
condim 1 in pybullet and physx (the box stopped), tendon, equality, ellipsoid, condim 4 and
friction-variant refusals in pybullet (built without a word; physx too for the last three), the
unnamed base in physx (``KeyError: None``).

Shown failing on f124364 (this branch's base, src exported beside it) for the second part: two arms
of one robot passing through each other in pybullet; an arm colliding with a body welded to its
parent in physx, newton-featherstone and newton-xpbd; the self-collision refusals (partial bits,
a body and its parent) in pybullet, physx and newton-mujoco-warp; every sensor test (camera frame
sensors read zeros, the other kinds were refused; the refusal's wording changed); Newton's
tendon and equality cases in newton-mujoco-warp (a spatial tendon 1.7 rad off, a connect and a weld
dying at load, every contact-free scene dying on the missing solref); the PhysX hull refusal."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from crosssim.engines import get_engine
from crosssim.errors import EngineFailure, EngineUnavailable
from crosssim.frame import InitialState
from crosssim.profiles import load_profile
from crosssim.scene import canonical_model
from crosssim.variant import compile_model

ENGINES = ("mujoco", "pybullet", "physx", "newton-mujoco-warp")
FLOOR = '<geom name="floor" type="plane" size="5 5 0.1" {floor}/>'
BOX = """<mujoco><option timestep="0.002"/><worldbody>{world}
<body name="box" pos="0 0 {z}"><freejoint/><geom name="box_geom" type="box" size="0.1 0.1 0.02" mass="1" {box}/></body>
</worldbody>{extra}</mujoco>"""


def _open(engine: str, path: Path):
    profile = load_profile(engine)
    try:
        e = get_engine(profile.engine)
    except EngineUnavailable as exc:
        pytest.skip(str(exc))
    return e, e.load(compile_model(path), profile)


def _scene(tmp_path: Path, name: str, xml: str) -> Path:
    path = tmp_path / f"{name}.xml"  # one file per scene: canonical models are cached by path
    path.write_text(xml)
    return path


def _run(engine: str, path: Path, steps: int = 250, vx: float = 0.0) -> np.ndarray:
    """(x, z) of the base every 10 steps under zero torques."""
    e, model = _open(engine, path)
    c = canonical_model(path)
    qvel = np.zeros(c.nv)
    qvel[0] = vx
    state, rows = e.reset(model, InitialState(c.qpos0.copy(), qvel)), []
    try:
        for k in range(steps):
            e.step(model, state, np.zeros(c.joint_count), 1)
            if k % 10 == 9:
                f = e.frame(model, state)
                rows.append([f.base_pos[0], f.base_pos[2]])
    finally:
        e.close(model)
    return np.array(rows)


def _refused(engine: str, path: Path) -> str:
    with pytest.raises(EngineFailure) as err:
        _open(engine, path)
    text = str(err.value)
    assert "\n" not in text
    return text


# -- contacts through <pair> and <exclude> -------------------------------------------------------
PAIR = BOX.format(world=FLOOR.format(floor='contype="0" conaffinity="0"'), z=0.02,
                  box='contype="0" conaffinity="0"', extra='<contact><pair name="box_floor" geom1="box_geom" '
                  'geom2="floor" condim="3" friction="0.5 0.5 0.005 0.0001 0.0001"/></contact>')


@pytest.mark.parametrize("engine", ENGINES)
def test_a_box_rests_on_the_floor_through_a_pair_alone(tmp_path, engine):
    """Every geom contype/conaffinity 0: only the pair touches. Old pybullet and physx: it fell."""
    got = _run(engine, _scene(tmp_path, "pair", PAIR))
    assert np.abs(got[:, 1] - 0.02).max() < 5e-4, got[:, 1]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_pair_slides_with_its_own_friction(tmp_path, engine):
    """2 m/s on the pair's mu 0.5 (the geoms' own: 1): stops after v^2 / 2 mu g = 0.41 m."""
    got = _run(engine, _scene(tmp_path, "pair_slide", PAIR), steps=300, vx=2.0)
    assert abs(got[-1, 0] - 0.408) < 0.01, got[-1]


def test_a_pair_between_two_robot_bodies_is_refused_where_not_built(tmp_path):
    xml = """<mujoco><worldbody><geom name="floor" type="plane" size="5 5 0.1"/>
      <body name="a" pos="0 0 1"><joint name="h" type="hinge"/><geom name="ga" size="0.1"/>
      <body name="b" pos="0 0 -0.3"><joint name="h2" type="hinge"/><geom name="gb" size="0.1"/></body></body>
      </worldbody><contact><pair geom1="ga" geom2="gb"/></contact></mujoco>"""
    path = _scene(tmp_path, "robot_pair", xml)
    for engine in ("pybullet", "physx"):
        assert _refused(engine, path).startswith(f"{engine} cannot build <pair> contact 'pair_0' (geoms ga and gb, "
                                                 "condim 3, friction 1) in robot_pair.xml: ")


EXCLUDE = BOX.format(world=FLOOR.format(floor=""), z=0.02, box="",
                     extra='<contact><exclude body1="world" body2="box"/></contact>')


@pytest.mark.parametrize("engine", ENGINES[:3])
def test_an_excluded_floor_lets_the_box_fall(tmp_path, engine):
    """<exclude body1="world" body2="box">: MuJoCo lets it fall through; old pybullet and physx held it."""
    got = _run(engine, _scene(tmp_path, "exclude", EXCLUDE))
    assert got[-1, 1] < -0.2, got[:, 1]


def test_newton_refuses_an_exclude_of_the_world(tmp_path):
    """Newton 1.8's importer skips it (the box stayed on the floor): refused, not run."""
    text = _refused("newton-mujoco-warp", _scene(tmp_path, "exclude", EXCLUDE))
    assert text.startswith("newton (mujoco-warp) cannot build <exclude> contact 'exclude_0' (bodies world and box) in "
                           "exclude.xml: Newton's importer skips"), text


# -- height fields -------------------------------------------------------------------------------
HFIELD = """<mujoco><option timestep="0.002"/>
<asset><hfield name="steps" nrow="5" ncol="9" size="2 1 0.4 0.1" elevation="{data}"/></asset>
<worldbody><geom name="terrain" type="hfield" hfield="steps" pos="0.3 -0.2 0.05"/>
<body name="ball" pos="{x} {y} {z}"><freejoint/><geom name="ball_geom" type="sphere" size="0.1" mass="1"/></body>
</worldbody></mujoco>"""
PLATEAU = np.where((np.arange(9)[None, :] >= 5) & (np.arange(5)[:, None] >= 3), 1.0, 0.25)
"""5 rows x 9 columns (x from -2 to 2), high on 4 x 2 samples. MJCF's ``elevation`` lists rows from
+y down (MuJoCo compiles the first row listed as y = +1), so the plateau is where x >= 0.5 and
y <= -0.5; the rest, normalised, is 0."""
SPOTS = {"high": (1.25, -0.75), "x mirrored": (-1.25, -0.75), "y mirrored": (1.25, 0.5), "low": (-1.25, 0.5)}
"""Where the ball is dropped, in the field's frame: a transposed or flipped field misplaces the plateau."""


@pytest.mark.parametrize("engine", ENGINES)
def test_a_ball_rests_on_a_height_field_at_its_height(tmp_path, engine):
    """A sphere dropped on a field of two plateaus rests at the field's height under it plus its
    radius: 0.05 + top x (normalised sample) + 0.1 m, the sample read from MuJoCo's compiled field.
    Old pybullet and physx refused the scene ("geom type 1 ... not supported")."""
    data = " ".join(f"{v:g}" for v in PLATEAU.ravel())
    for spot, (x, y) in SPOTS.items():
        high = spot == "high"
        path = _scene(tmp_path, spot.replace(" ", "_"), HFIELD.format(data=data, x=x + 0.3, y=y - 0.2, z=0.7))
        m = compile_model(path).mj
        row, col = round((y + 1) / 0.5), round((x + 2) / 0.5)
        sample = m.hfield_data[row * 9 + col]  # the compiled field's sample under the ball (rows: y up)
        known = 0.05 + 0.4 * float(sample) + 0.1
        got = _run(engine, path, steps=400)
        assert abs(got[-1, 1] - known) < 2e-3, (spot, got[-1, 1], known)
        assert (known > 0.4) == high


# -- what pybullet and physx refuse --------------------------------------------------------------
ARM = """<mujoco><worldbody><geom name="floor" type="plane" size="5 5 0.1"/>
<body name="a" pos="0 0 1"><joint name="h" type="hinge"/><geom name="ga" size="0.1" {ga}/>
<body name="b" pos="0 0 -0.3"><joint name="h2" type="hinge"/><geom name="gb" size="0.1" {gb}/></body></body>
</worldbody>{extra}</mujoco>"""
REFUSED = {  # feature: (scene, start of the line after "<engine> cannot build ")
    "tendon": (ARM.format(ga="", gb="", extra='<tendon><fixed name="t" stiffness="5"><joint joint="h" coef="1"/>'
                          '<joint joint="h2" coef="1"/></fixed></tendon>'),
               "tendon 't' (with a limit, spring, damping or friction) in tendon.xml: "),
    "equality": (ARM.format(ga="", gb="", extra='<equality><joint name="couple" joint1="h" joint2="h2"/></equality>'),
                 "equality constraint 'couple' (type joint) in equality.xml: "),
    "ellipsoid": (ARM.format(ga='type="ellipsoid"', gb="", extra="").replace('size="0.1" type', 'size="0.1 0.2 0.05" type'),
                  "ellipsoid collision geom 'ga' (semi-axes 0.1 0.2 0.05) in ellipsoid.xml: "),
    "condim": (ARM.format(ga='condim="4"', gb="", extra=""),
               "torsional or rolling friction (condim 4 or 6) of geom 'ga' (condim 4 against floor) in condim.xml: "),
    "friction": (ARM.format(ga="", gb="", extra="").replace('<geom name="ga" size="0.1" />',
                                                            '<geom name="ga" size="0.1"/><geom size="0.05" pos="0.2 0 0" '
                                                            'friction="2"/>'),
                 "friction of the contacts of body 'a' (sliding friction 1, 2 against the world) in friction.xml: "),
}


@pytest.mark.parametrize("engine", ["pybullet", "physx"])
@pytest.mark.parametrize("feature", list(REFUSED))
def test_a_feature_the_engine_cannot_build_refuses_the_column(tmp_path, engine, feature):
    xml, line = REFUSED[feature]
    text = _refused(engine, _scene(tmp_path, feature, xml))
    assert text.startswith(f"{engine} cannot build {line}"), text


@pytest.mark.parametrize("feature", list(REFUSED))
def test_mujoco_builds_what_the_others_refuse(tmp_path, feature):
    e, model = _open("mujoco", _scene(tmp_path, feature, REFUSED[feature][0]))
    e.close(model)


@pytest.mark.parametrize("feature", ["pair", "tendon", "equality", "condim"])
def test_newtons_own_solvers_refuse_what_only_mujoco_warp_builds(tmp_path, feature):
    """Newton's own solvers refuse before compiling anything (newton-featherstone here)."""
    xml = PAIR if feature == "pair" else REFUSED[feature][0]
    text = _refused("newton-featherstone", _scene(tmp_path, feature, xml))
    assert text.startswith("newton (featherstone) cannot build ") and "run solver mujoco-warp" in text, text


@pytest.mark.parametrize("engine", ENGINES)
def test_frictionless_condim_1_slides_on(tmp_path, engine):
    """condim 1 on both geoms: MuJoCo's contact has no friction; old pybullet and physx stopped the box."""
    xml = BOX.format(world=FLOOR.format(floor='condim="1"'), z=0.02, box='condim="1"', extra="")
    got = _run(engine, _scene(tmp_path, "frictionless", xml), steps=200, vx=1.0)
    assert abs(got[-1, 0] - 0.4) < 0.01, got[-1]  # 1 m/s for 0.4 s


# -- unnamed elements ----------------------------------------------------------------------------
UNNAMED = """<mujoco><option timestep="0.005"/><worldbody><geom name="floor" type="plane" size="5 5 0.1"/>
<body pos="0 0 0.3"><joint type="slide" axis="1 0 0"/><joint type="slide" axis="0 1 0"/>
<joint type="slide" axis="0 0 1"/><joint type="ball"/><geom type="box" size="0.1 0.1 0.05" mass="5"/>
<body name="leg" pos="0 0 -0.1"><joint name="hip" type="hinge" axis="0 1 0" damping="1" stiffness="200"/>
<geom type="capsule" fromto="0 0 0 0 0 -0.15" size="0.03" mass="0.5"/></body></body></worldbody>
<actuator><motor name="hip" joint="hip" gear="10"/></actuator></mujoco>"""


@pytest.mark.parametrize("engine", ENGINES)
def test_unnamed_base_joints_are_named_alike_everywhere(tmp_path, engine):
    """humanoid-gym's XBot-L has an unnamed slide-and-ball base: physx died with ``KeyError: None``.
    Names are crosssim.scene.element_name's, the same in the canonical model and every audit."""
    path = _scene(tmp_path, "unnamed", UNNAMED)
    c = canonical_model(path)
    assert c.joint_names == ("joint_0", "joint_1", "joint_2", "hip") and c.ball_joints == ("joint_3",)
    assert c.root_body == "body_1"
    e, model = _open(engine, path)
    try:
        items = {r.item for r in e.audit(model) if r.quantity in ("joint_damping", "body_mass")}
    finally:
        e.close(model)
    assert items == {"joint_0", "joint_1", "joint_2", "hip", "body_1", "leg"}
    got, ref = _run(engine, path, steps=100), _run("mujoco", path, steps=100)
    assert np.abs(got - ref).max() < 0.02, np.abs(got - ref).max()


# -- a Hopper whose only contacts are explicit pairs ---------------------------------------------
def pair_only_hopper(folder: Path) -> Path:
    """gymnasium's hopper.xml with every geom's contype/conaffinity 0 and one <pair> per robot geom
    with the floor, stating what MuJoCo combines for the ordinary scene: condim and friction by the
    max, solref and solimp mixed by solmix, the larger margin."""
    from crosssim.scene import load_mujoco_model, resolve_scene

    src = resolve_scene("gymnasium:hopper.xml")
    m = load_mujoco_model(src)
    f = m.geom("floor").id
    pairs = []
    for g in range(m.ngeom):
        if m.geom_bodyid[g] == 0:
            continue
        mix = m.geom_solmix[g] / (m.geom_solmix[g] + m.geom_solmix[f])
        mu = np.maximum(m.geom_friction[g], m.geom_friction[f])
        solref, solimp = mix * m.geom_solref[g] + (1 - mix) * m.geom_solref[f], mix * m.geom_solimp[g] + (1 - mix) * m.geom_solimp[f]
        pairs.append(f'<pair name="{m.geom(g).name}_floor" geom1="{m.geom(g).name}" geom2="floor" '
                     f'condim="{max(m.geom_condim[g], m.geom_condim[f])}" friction="{mu[0]:g} {mu[0]:g} {mu[1]:g} '
                     f'{mu[2]:g} {mu[2]:g}" solref="{solref[0]:g} {solref[1]:g}" solimp="'
                     + " ".join(f"{x:g}" for x in solimp) + f'" margin="{max(m.geom_margin[g], m.geom_margin[f]):g}"/>')
    xml = src.read_text().replace('conaffinity="1" condim="1" contype="1"', 'conaffinity="0" condim="1" contype="0"')
    xml = xml.replace('<geom conaffinity="1" condim="3" name="floor"', '<geom conaffinity="0" contype="0" condim="3" name="floor"')
    xml = xml.replace("</worldbody>", "</worldbody><contact>" + "".join(pairs) + "</contact>")
    path = folder / "hopper_pairs.xml"
    path.write_text(xml)
    return path


HOPPER_POLICY = Path(__file__).resolve().parents[1] / "policies" / "hopper-ppo-150k-dr-s0" / "card.yaml"


def _returns(engine: str, card, scene: Path | None, episodes: int) -> np.ndarray:
    import dataclasses

    from crosssim.policies.load import load_policy
    from crosssim.runner.harness import Harness
    from crosssim.runner.rollout import run_episode
    from crosssim.runner.simulator import open_engine

    h = Harness.from_card(card if scene is None else dataclasses.replace(card, robot=str(scene)))
    policy = load_policy(card, obs_size=h.obs_size, action_size=h.action_size)
    sim = open_engine(load_profile(engine), h.scene, base=h.model_variant)
    try:
        return np.array([run_episode(sim, h, policy, episode=k, seed=k).ret for k in range(episodes)])
    finally:
        sim.close()


@pytest.mark.skipif(not HOPPER_POLICY.exists(), reason="policies/hopper-ppo-150k-dr-s0 not trained (make policies)")
@pytest.mark.parametrize("engine", ENGINES)
def test_pair_only_hopper_returns_what_the_ordinary_scene_returns(tmp_path, engine):
    """hopper-ppo-150k-dr-s0, 3 episodes (seeds 0-2): the pair-only scene's mean return within 10 %
    (docs/engines.md, "Agreement across columns") of the engine's own ordinary scene. Issue #35
    measured before: pybullet 43 against 632, physx 43 against 597 (5 episodes). Measured after
    (2026-12, 5 episodes, ordinary / pairs): mujoco 642.9 / 641.3, pybullet 632.4 / 632.4, physx
    596.9 / 596.9, newton-mujoco-warp 642.9 / 641.3."""
    from crosssim.card import load_card

    card = load_card(HOPPER_POLICY)
    _open(engine, _scene(tmp_path, "probe", PAIR))  # skips where the engine is not installed
    ordinary, pairs = _returns(engine, card, None, 3), _returns(engine, card, pair_only_hopper(tmp_path), 3)
    assert abs(pairs.mean() - ordinary.mean()) <= 0.1 * ordinary.mean(), (ordinary, pairs)


# -- self-collision ------------------------------------------------------------------------------
ARMS = """<mujoco><option timestep="0.002"/><worldbody>
<body name="hub" pos="0 0 1"><joint name="hub_y" type="slide" axis="0 1 0"/>
<geom name="hub_geom" type="box" size="0.2 0.05 0.05" mass="5" contype="0" conaffinity="0"/>
<body name="a" pos="-0.1 0 0"><joint name="ha" type="hinge" axis="0 1 0"/>
<geom name="ga" type="capsule" fromto="0 0 0 0 0 -0.4" size="0.03" mass="1" {ga}/></body>
<body name="b" pos="0.1 0 0">{hb}<geom name="gb" type="capsule" fromto="0 0 0 0 0 -0.4" size="0.03" mass="1"/></body>
</body></worldbody></mujoco>"""
"""One robot: two arms hanging from a hub (on a slide no force acts along). Arm a starts lifted
1.2 rad to the left and swings through vertical into arm b: in MuJoCo it stops at -0.51 rad and
knocks b to -0.48 rad; passing through, it reaches -1.2 rad."""
HINGE_B = '<joint name="hb" type="hinge" axis="0 1 0"/>'
SELF_ENGINES = ENGINES + ("newton-featherstone", "newton-xpbd")


def _arms(engine: str, path: Path) -> np.ndarray:
    """Angles of arms a and b over 0.6 s, arm a released at 1.2 rad, zero torques."""
    e, model = _open(engine, path)
    c = canonical_model(path)
    qpos = c.qpos0.copy()
    qpos[c.joint_qposadr[1]] = 1.2
    state, out = e.reset(model, InitialState(qpos, np.zeros(c.nv))), []
    try:
        for _ in range(300):
            e.step(model, state, np.zeros(c.joint_count), 1)
            out.append(e.joint_state(model, state)[0][c.joint_qposadr[1:]])
    finally:
        e.close(model)
    return np.array(out)


@pytest.mark.parametrize("engine", SELF_ENGINES)
def test_two_arms_of_one_robot_collide(tmp_path, engine):
    """Arm a is stopped by arm b and knocks it aside (MuJoCo -0.51 / -0.48 rad, pybullet -0.56,
    physx -0.63 / -0.51, newton-featherstone's penalty contact -0.35 / -2.1, newton-xpbd -0.51 /
    -0.33). Old pybullet built
    the multibody without self-collision: a swung through b to -1.2 rad and b never moved."""
    got = _arms(engine, _scene(tmp_path, "arms", ARMS.format(ga="", hb=HINGE_B)))
    assert got[:, 0].min() > -0.7 and got[:, 1].min() < -0.3, got.min(0)


@pytest.mark.parametrize("engine", SELF_ENGINES)
def test_arms_whose_bits_do_not_meet_pass_through(tmp_path, engine):
    """contype/conaffinity 2 against 1: MuJoCo never lets the arms touch; every engine alike."""
    got = _arms(engine, _scene(tmp_path, "arms_bits", ARMS.format(ga='contype="2" conaffinity="2"', hb=HINGE_B)))
    assert got[:, 0].min() < -1.1, got.min(0)


@pytest.mark.parametrize("engine", SELF_ENGINES)
def test_an_arm_passes_through_a_body_welded_to_its_parent(tmp_path, engine):
    """Arm b without a joint is welded to the hub, arm a's parent: MuJoCo's filterparent keeps
    them apart (crosssim.engines.features.body_filtered). Old physx, newton-featherstone and
    newton-xpbd collided them (a stopped at -0.36 rad): they filter adjacent links only."""
    got = _arms(engine, _scene(tmp_path, "arms_weld", ARMS.format(ga="", hb="")))
    assert got[:, 0].min() < -1.1, got.min(0)


def test_self_collision_per_link_refused_where_only_some_geoms_touch(tmp_path):
    """Arm a with a second geom whose bits meet nothing of b's: Bullet filters per link pair."""
    xml = ARMS.format(ga='/><geom name="ga2" type="sphere" size="0.05" pos="0 0 -0.2" contype="2" conaffinity="2"',
                      hb=HINGE_B)
    text = _refused("pybullet", _scene(tmp_path, "arms_partial", xml))
    assert text.startswith("pybullet cannot build self-collision of some geoms of the bodies 'a, b' (1 of 2 geom "
                           "pairs may touch: ga-gb) in arms_partial.xml: Bullet filters"), text
    assert _arms("physx", _scene(tmp_path, "arms_partial", xml))[:, 0].min() > -0.7  # per shape in PhysX


@pytest.mark.parametrize("engine", ["pybullet", "physx", "newton-mujoco-warp"])
def test_a_body_colliding_with_its_parent_is_refused(tmp_path, engine):
    """<flag filterparent="disable"/>: MuJoCo collides arm a with the hub (given bits); every
    other engine's articulation filters a link and its parent link."""
    xml = ARMS.format(ga="", hb=HINGE_B).replace('contype="0" conaffinity="0"', "").replace(
        '<option timestep="0.002"/>', '<option timestep="0.002"><flag filterparent="disable"/></option>')
    text = _refused(engine, _scene(tmp_path, "arms_parent", xml))
    assert "cannot build self-collision of a body with its parent, 'hub, a' (" in text, text


# -- sensors the card's terms read ---------------------------------------------------------------
SENSED = """<mujoco><option timestep="0.002"/><worldbody><geom name="floor" type="plane" size="5 5 0.1"/>
<camera name="world_cam" pos="0 -2 1" xyaxes="1 0 0 0 1 1"/>
<body name="base" pos="0 0 0.3"><freejoint/><geom type="box" size="0.1 0.1 0.05" mass="2"/><site name="imu" pos="0.05 0 0"/>
<camera name="head" pos="0.1 0 0.02"/><camera name="follow" mode="trackcom" pos="0 -1 0.3"/>
<body name="leg" pos="0 0 -0.05"><joint name="hip" type="hinge" axis="0 1 0" damping="0.1"/>
<geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02" mass="0.3"/><site name="foot" pos="0 0 -0.22" zaxis="0 0 -1"/>
</body></body></worldbody>
<tendon><fixed name="hip_tendon"><joint joint="hip" coef="2"/></fixed></tendon>
<actuator><motor name="hip_motor" joint="hip" gear="3"/></actuator>
<sensor><framepos objtype="camera" objname="head"/><framequat name="head_quat" objtype="camera" objname="head"/>
<framepos name="follow_pos" objtype="camera" objname="follow"/><framexaxis name="follow_x" objtype="camera" objname="follow"/>
<framepos name="foot_in_cam" objtype="site" objname="foot" reftype="camera" refname="world_cam"/>
<framelinvel name="head_vel" objtype="camera" objname="head"/><gyro name="gyro" site="imu"/>
<velocimeter name="vel" site="imu"/><jointpos name="hip_pos" joint="hip"/><jointvel name="hip_vel" joint="hip"/>
<subtreecom name="com" body="base"/><subtreelinvel name="com_vel" body="base"/><subtreeangmom name="momentum" body="base"/>
<tendonpos name="tendon_len" tendon="hip_tendon"/><tendonvel name="tendon_vel" tendon="hip_tendon"/>
<actuatorpos name="motor_pos" actuator="hip_motor"/><actuatorvel name="motor_vel" actuator="hip_motor"/>
<magnetometer name="compass" site="imu"/><rangefinder name="range" site="foot"/><clock name="clock"/>
</sensor></mujoco>"""
"""Every sensor kind crosssim reads from state (crosssim.sensors.SUPPORTED) but ball joints' (in
test_ball_sensors_read_as_mujoco_reads_them): camera frames, tendons and actuators among them."""


def _sensor_gaps(engine: str, path: Path) -> dict[str, float]:
    """Each sensor read from ``engine``'s frame after 0.2 s of random torques, against mj_forward's
    sensordata at that frame's state and time: {sensor: largest difference}."""
    import mujoco

    from crosssim.sensors import SensorReader

    reader = SensorReader(path)
    for name in reader.types:
        reader.check(name, path.name)  # what the harness does with a card's sensor: terms
    e, model = _open(engine, path)
    c, rng = canonical_model(path), np.random.default_rng(0)
    state = e.reset(model, InitialState(c.qpos0.copy(), rng.normal(0, 0.5, c.nv)))
    try:
        for _ in range(100):
            e.step(model, state, rng.normal(0, 1, c.joint_count), 1)
        frame = e.frame(model, state)
    finally:
        e.close(model)
    m = reader.m
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:], d.time = frame.qpos, frame.qvel, frame.time
    mujoco.mj_forward(m, d)
    assert frame.time > 0.19 and np.abs(frame.qvel).max() > 0.01  # the engine's own state, moved
    return {name: float(np.abs(reader.read(name, frame) - d.sensordata[m.sensor_adr[s]:m.sensor_adr[s] + m.sensor_dim[s]]).max())
            for name, (s, _) in reader.types.items()}


@pytest.mark.parametrize("engine", ENGINES)
def test_sensors_read_from_each_engines_state_as_mujoco_reads_them(tmp_path, engine):
    """Old code read a camera's frame sensors as zeros (no mj_camlight: 0.14-2 m off) and refused
    tendon and actuator sensors, subtree, magnetometer, rangefinder and clock sensors."""
    gaps = _sensor_gaps(engine, _scene(tmp_path, "sensed", SENSED))
    assert "sensor_0" in gaps and max(gaps.values()) < 1e-9, gaps  # unnamed: named as everywhere


def test_ball_sensors_read_as_mujoco_reads_them(tmp_path):
    """A base of three slides and a ball (the only ball joints crosssim builds): ballquat and
    ballangvel of the ball, in every column that builds the base (physx as its floating root)."""
    xml = UNNAMED.replace('<joint type="ball"/>', '<joint name="ball" type="ball"/>').replace("</body></body></worldbody>", '<site name="tip" pos="0 0 -0.15"/></body></body></worldbody>'
                          ).replace("</mujoco>", '<sensor><ballquat name="q" joint="ball"/><ballangvel name="w" '
                                    'joint="ball"/><framepos name="tip" objtype="site" objname="tip"/></sensor></mujoco>')
    for engine in ENGINES:
        gaps = _sensor_gaps(engine, _scene(tmp_path, f"ball_sensed_{engine}", xml))
        assert max(gaps.values()) < 1e-9, (engine, gaps)


@pytest.mark.parametrize("kind", ["accelerometer", "touch", "force"])
def test_a_sensor_no_engine_computes_from_state_is_refused_in_one_line(tmp_path, kind):
    from crosssim.errors import CardError
    from crosssim.sensors import SensorReader

    path = _scene(tmp_path, kind, SENSED.replace("<clock name=\"clock\"/>", f'<{kind} name="probe" site="foot"/>'))
    with pytest.raises(CardError) as err:
        SensorReader(path).check("probe", "card.yaml")
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"card.yaml: observation term sensor:probe is a {kind} sensor, "
                                                "which needs accelerations or constraint or contact forces"), text


# -- Newton: tendons and equality constraints, per solver column ---------------------------------
LINKS = """<mujoco><option timestep="0.002"/><worldbody><site name="top" pos="0.6 0 1.5"/>
<body name="a" pos="0 0 1"><joint name="h" type="hinge" axis="0 1 0" damping="0.05"/>
<geom name="ga" type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1" contype="0" conaffinity="0"/>
<body name="b" pos="0.3 0 0"><joint name="h2" type="hinge" axis="0 1 0"/>
<geom name="gb" type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1" contype="0" conaffinity="0"/>
<site name="tip" pos="0.3 0 0"/></body></body>
<body name="c" pos="0.5 0 1.2"><joint name="hc" type="hinge" axis="0 1 0"/>
<geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.5" contype="0" conaffinity="0"/></body>
</worldbody>{extra}</mujoco>"""
"""A two-link arm falling from horizontal and a third link beside it, no contacts; each case adds
one tendon or equality constraint that MuJoCo simulates."""
COUPLED = {
    "tendon_spring": '<tendon><fixed name="t" stiffness="5" damping="0.5"><joint joint="h" coef="1"/>'
                     '<joint joint="h2" coef="1"/></fixed></tendon>',
    "tendon_limit": '<tendon><fixed name="t" limited="true" range="-0.3 0.3"><joint joint="h" coef="1"/>'
                    '<joint joint="h2" coef="-1"/></fixed></tendon>',
    "tendon_spatial": '<tendon><spatial name="t" stiffness="20"><site site="tip"/><site site="top"/></spatial></tendon>',
    "equality_joint": '<equality><joint name="e" joint1="h2" joint2="h" polycoef="0 -0.5 0 0 0"/></equality>',
    "equality_connect": '<equality><connect name="e" body1="b" body2="c" anchor="0.3 0 0"/></equality>',
    "equality_weld": '<equality><weld name="e" body1="c" body2="b"/></equality>',
}


def _joint_path(engine: str, path: Path) -> np.ndarray:
    e, model = _open(engine, path)
    c = canonical_model(path)
    state, out = e.reset(model, InitialState(c.qpos0.copy(), np.zeros(c.nv))), []
    try:
        for _ in range(250):
            e.step(model, state, np.zeros(c.joint_count), 1)
            out.append(e.joint_state(model, state)[0][c.joint_qposadr])
    finally:
        e.close(model)
    return np.array(out)


@pytest.mark.parametrize("case", list(COUPLED))
def test_newton_mujoco_warp_builds_tendons_and_equalities_as_mujoco(tmp_path, case):
    """0.5 s against MuJoCo, worst joint: 0 rad for every case but the connect (3.4e-3 rad, float32).
    Old code: the spatial tendon was built without its sites (1.7 rad off, no word), the connect
    and the weld became Newton loop joints and the load died on "body ... has 2 parent joints"; and
    before that every case died on "no model.mujoco.solref" (nothing in the scene collides)."""
    path = _scene(tmp_path, case, LINKS.format(extra=COUPLED[case]))
    gap = np.abs(_joint_path("newton-mujoco-warp", path) - _joint_path("mujoco", path)).max()
    assert gap < 0.01, gap


@pytest.mark.parametrize("engine", ["newton-featherstone", "newton-xpbd"])
@pytest.mark.parametrize("case", list(COUPLED))
def test_newtons_own_solvers_refuse_tendons_and_equalities(tmp_path, engine, case):
    text = _refused(engine, _scene(tmp_path, case, LINKS.format(extra=COUPLED[case])))
    solver = engine.removeprefix("newton-")
    label = "tendon 't'" if case.startswith("tendon") else "equality constraint 'e'"
    assert text.startswith(f"newton ({solver}) cannot build {label} (") and "run solver mujoco-warp" in text, text


# -- PhysX's convex hull of a mesh ---------------------------------------------------------------
def _ball_mesh_scene(tmp_path: Path, name: str, vertices: int, radius: float) -> Path:
    """A ball made of a mesh of ``vertices`` points spread evenly over a sphere (all on its hull),
    dropped from 1 cm onto the floor."""
    k = np.arange(vertices) + 0.5
    phi, theta = np.arccos(1 - 2 * k / vertices), np.pi * (1 + 5 ** 0.5) * k
    v = radius * np.stack([np.cos(theta) * np.sin(phi), np.sin(theta) * np.sin(phi), np.cos(phi)], 1)
    xml = (f'<mujoco><option timestep="0.002"/><asset><mesh name="ball" vertex="{" ".join(f"{x:.6f}" for x in v.ravel())}"/>'
           f'</asset><worldbody><geom name="floor" type="plane" size="5 5 0.1"/><body name="b" pos="0 0 {radius + 0.01}">'
           '<freejoint/><geom name="ball_geom" type="mesh" mesh="ball" mass="1"/></body></worldbody></mujoco>')
    return _scene(tmp_path, name, xml)


def test_physx_refuses_a_mesh_whose_cooked_hull_is_off_mujocos():
    """2,000 hull vertices on a 0.1 m sphere: PhysX's cooking keeps 129 and its hull lies 3.3 mm
    inside MuJoCo's (over settings.hull_tolerance, 2 mm). Old physx built it and the ball rested
    lower than MuJoCo's without a word."""
    import tempfile

    path = _ball_mesh_scene(Path(tempfile.mkdtemp()), "dense_ball", 2000, 0.1)
    text = _refused("physx", path)
    assert text.startswith("physx cannot build mesh collision geom 'ball_geom' (mesh ball, a hull of 2000 vertices in "
                           "MuJoCo) in dense_ball.xml: PhysX's cooking keeps 129 of them (255 at most), 3.3 mm off"), text


def test_physx_builds_a_mesh_its_cooking_keeps_and_it_rests_as_in_mujoco(tmp_path):
    """100 hull vertices: PhysX keeps them; the ball rests at MuJoCo's height (0.1953 m) within 0.5 mm."""
    path = _ball_mesh_scene(tmp_path, "ball", 100, 0.2)
    got, ref = _run("physx", path, steps=300), _run("mujoco", path, steps=300)
    assert abs(got[-1, 1] - ref[-1, 1]) < 5e-4, (got[-1], ref[-1])


def test_hull_gap_measures_both_ways():
    from crosssim.engines.physx_hull import hull_gap

    cube = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    assert hull_gap(cube, 0.9 * cube) == pytest.approx((0.1, 0.0))
    assert hull_gap(cube, 1.2 * cube) == pytest.approx((0.0, 0.2))
