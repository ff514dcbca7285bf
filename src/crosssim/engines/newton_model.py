"""Building and reconciling the Newton model for EngineNewton, and reading it back (audit).

Measured on gymnasium's models with Newton 1.8's MJCF importer (docs/engines.md, "Newton"):
``settotalmass`` is ignored (HalfCheetah 21.2 kg instead of 14.0), the joints of one body are
merged into one D6 joint whose anchor is the *first* joint's position (Hopper's torso would pitch
about a point 1.25 m below it), ``<option solver="PGS">`` is rejected, Newton's own contact
models average the two friction coefficients where MuJoCo takes the larger, and MJCF motors
become MuJoCo actuators. Each is set back to the canonical model here.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import mujoco
import numpy as np
import warp as wp

import newton
from crosssim.engines.audit import AuditRow
from crosssim.engines.common import compiled_canonical
from crosssim.engines.features import bits_touch, body_filtered, refuse_unbuilt
from crosssim.contacts import geom_world_friction
from crosssim.engines.mujoco import audit_rows, floor_contact_friction
from crosssim.engines.newton_ball import BALL, ball_coordinates, skip_carrier, split_base
from crosssim.engines.settings import MUJOCO_SOLVERS, EngineProfile, NewtonSettings, settings_of
from crosssim.errors import CrossSimError
from crosssim.frame import quat_to_matrix
from crosssim.scene import CanonicalModel
from crosssim.variant import CompiledModel

INTEGRATORS = {0: "euler", 1: "rk4", 2: "implicit", 3: "implicitfast"}
UNLIMITED = 1.0e10  # Newton's "no limit" sentinel


@dataclass
class NewtonModel:
    canonical: CanonicalModel
    profile: EngineProfile
    nm: Any
    """The finalized ``newton.Model``."""
    solver_name: str
    solver: Any
    pipeline: Any
    """``newton.CollisionPipeline`` for Newton's own solvers; None for SolverMuJoCo."""
    contacts: Any
    dt: float
    """crosssim physics step [s]."""
    substeps: int
    """Solver steps per physics step."""
    capture: bool
    """Replay each physics step as a captured Warp graph."""
    body_index: np.ndarray
    """Newton body index of each canonical body."""
    q_index: np.ndarray
    """Newton joint coordinate of each canonical joint."""
    qd_index: np.ndarray
    """Newton joint dof of each canonical joint (where its torque goes)."""
    joint_offset: np.ndarray
    """Canonical qpos minus Newton joint coordinate (MuJoCo's joint ``ref``)."""
    body_com: np.ndarray
    """Centre of mass of each Newton body in its body frame [m]."""
    free_q: int = -1
    free_qd: int = -1
    balls: tuple = ()
    """(qpos address, dof address, Newton q start, qd start) of each ball joint of the base
    (crosssim.engines.newton_ball)."""
    shape_geom: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    """MuJoCo geom of each Newton shape (-1: none)."""
    floor_mu: float = 1.0
    notes: dict = field(default_factory=dict)
    passive: tuple | None = None
    """Warp arrays (q index, dof index, damping, stiffness, rest position) for XPBD's passive forces."""
    loaded: Any = None
    """``weakref`` to the NewtonState whose warm start the solver holds now (EngineNewton._load)."""
    spare: list = field(default_factory=list)
    """Buffers (with their captured graphs) of dropped states, for the next reset (NewtonBuffers)."""
    compiled: Any = None
    """The compiled model this was built from: a lockstep batch imports it again as N worlds
    (crosssim.engines.newton_worlds)."""

    @property
    def cpu_backend(self) -> bool:
        return self.solver_name == "mujoco-c"

    @property
    def maximal(self) -> bool:
        """Solvers that integrate body poses; joint coordinates come from inverse kinematics."""
        return self.solver_name in ("xpbd", "semi-implicit")

    @property
    def explicit_passive(self) -> bool:
        """XPBD ignores joint damping and springs: the adapter applies them as joint forces
        computed from the joint state before every solver step (``passive`` holds the arrays)."""
        return self.passive is not None

    def new_control(self):
        """A control of this model with every native actuator input at zero."""
        control = self.nm.control()
        _switch_off_actuators(self.nm, control)
        return control

    def save_solver_memory(self) -> dict | None:
        """What the solver carries from one step to the next (MuJoCo's warm start), copied."""
        if self.solver_name == "mujoco-c":
            return {"qacc_warmstart": self.solver.mj_data.qacc_warmstart.copy()}
        if self.solver_name == "mujoco-warp":
            return {"qacc_warmstart": self.solver.mjw_data.qacc_warmstart.numpy().copy()}
        return None  # Newton's own solvers keep nothing between steps

    def load_solver_memory(self, memory: dict | None) -> None:
        """Put back ``save_solver_memory``'s copy; None: forget warm starts (a fresh episode)."""
        if self.solver_name == "mujoco-c":
            warm = self.solver.mj_data.qacc_warmstart
            warm[:] = 0.0 if memory is None else memory["qacc_warmstart"]
        elif self.solver_name == "mujoco-warp":
            warm = self.solver.mjw_data.qacc_warmstart
            warm.zero_() if memory is None else warm.assign(memory["qacc_warmstart"])

    def contact_wrench(self, state) -> np.ndarray:
        from crosssim.engines.newton_contacts import contact_wrench

        return contact_wrench(self, state)


def build_model(compiled: CompiledModel, profile: EngineProfile) -> NewtonModel:
    c = compiled_canonical(compiled)
    s = settings_of(profile, NewtonSettings)  # docs/engines.md, "Newton"
    m = compiled.mj  # canonical, plus the variant (timestep, perturbations, calibration)
    solver_name = s.solver
    # SolverMuJoCo takes the importer's pairs, excludes, height fields, tendons, equalities, condim
    # and per-geom friction to MuJoCo(-Warp) as they are; Newton's own solvers collide every shape
    # with its own contact model and the floor-friction reconciliation below.
    own = solver_name not in MUJOCO_SOLVERS
    refuse_unbuilt(m, compiled.scene, f"newton ({solver_name})", lambda use: _cannot_build(use, own))
    builder = import_builder(compiled)
    if own:
        _filter_like_mujoco(builder, m)
    nm = builder.finalize(device="cpu")
    notes: dict[str, str] = {}

    body_index = _match_bodies(nm, m)
    balls = ball_coordinates(nm, m, body_index)
    _fix_merged_joint_anchors(nm, m, body_index)
    q_index, qd_index = _match_joints(nm, m, c, body_index)
    joint_offset = np.array([m.qpos0[a] for a in c.joint_qposadr])
    _set_inertia(nm, m, body_index)
    _set_joint_parameters(nm, m, c, q_index, qd_index, joint_offset)
    if solver_name not in MUJOCO_SOLVERS:
        limit = s.joint_limit.model_dump(exclude_none=True) if s.joint_limit else {}
        _set_limit_gains(nm, m, qd_index, limit, armature=solver_name == "featherstone")
    nm.set_gravity(tuple(float(g) for g in c.gravity))
    _switch_off_actuators(nm, None)  # the model's part; each state's control: new_control()
    shape_geom = _match_shapes(nm, m, body_index)
    floor_mu = _set_friction(nm, m, shape_geom, solver_name)
    if solver_name in MUJOCO_SOLVERS:
        _set_solref(nm, m, shape_geom)
    else:
        contact = s.contact if s.contact in (None, "mujoco") else s.contact.model_dump(exclude_none=True, by_alias=True)
        _refuse_underived_softness(compiled, solver_name, contact)
        _set_contact_parameters(nm, m, c, contact or {})

    free_q = free_qd = -1
    if c.free_base:
        j = int(np.flatnonzero(nm.joint_child.numpy() == body_index[0])[0])
        free_q, free_qd = int(nm.joint_q_start.numpy()[j]), int(nm.joint_qd_start.numpy()[j])

    dt = float(m.opt.timestep)
    # ``substep_dt`` bounds the solver step [s] whatever the scene's timestep (Ant 0.01 s, Hopper 0.002 s).
    substeps = s.substeps
    if s.substep_dt is not None:
        substeps = max(substeps, int(np.ceil(dt / s.substep_dt - 1e-9)))
    solver, pipeline, contacts = _make_solver(nm, m, solver_name, s.solver_args, notes)
    capture = s.capture and solver_name != "mujoco-c"
    passive = None
    if solver_name == "xpbd" and s.passive_torques:
        arrays = (q_index, qd_index, m.dof_damping[c.joint_dofadr], c.joint_stiffness, c.joint_springref - joint_offset)
        passive = tuple(wp.array(np.asarray(a), dtype=int if k < 2 else float, device=nm.device)
                        for k, a in enumerate(arrays))
    return NewtonModel(
        canonical=c, profile=profile, nm=nm, solver_name=solver_name, solver=solver, pipeline=pipeline,
        contacts=contacts, dt=dt, substeps=substeps, capture=capture, body_index=body_index,
        q_index=q_index, qd_index=qd_index, joint_offset=joint_offset, body_com=nm.body_com.numpy().astype(float),
        free_q=free_q, free_qd=free_qd, balls=balls, shape_geom=shape_geom, floor_mu=floor_mu, notes=notes, passive=passive,
        compiled=compiled)


OWN_CANNOT = {
    "pair": "Newton's own contact model does not take a pair's parameters; run solver mujoco-warp",
    "hfield": "not checked against MuJoCo in Newton's own collision pipeline; run solver mujoco-warp",
    "tendon": "Newton's own solvers have no tendons; run solver mujoco-warp",
    "equality": "Newton's own solvers do not take MuJoCo's equality constraints; run solver mujoco-warp",
    "ellipsoid": "not checked against MuJoCo in Newton's own collision pipeline; run solver mujoco-warp",
    "condim": "Newton's own contact model has sliding friction only; run solver mujoco-warp",
    "frictionless": "Newton's own contact model has no frictionless contact; run solver mujoco-warp",
    "friction": "the floor-friction reconciliation of Newton's own solvers gives a body one friction",
    "self_parent": "Newton's importer filters a body's contacts with its parent",
}
"""What Newton's own solvers (featherstone, xpbd, semi-implicit) cannot build (crosssim.engines.features)."""


def _cannot_build(use, own: bool) -> str | None:
    """Why Newton cannot build ``use`` (crosssim.engines.features); ``own``: one of Newton's own solvers."""
    if use.feature == "exclude" and use.world:
        return WORLD_EXCLUDE
    if use.feature == "self_parent":
        return OWN_CANNOT["self_parent"]
    return OWN_CANNOT.get(use.feature) if own else None


WORLD_EXCLUDE = "Newton's importer skips an <exclude> naming the world body (measured: the box stayed on the floor)"


def import_builder(compiled: CompiledModel):
    """Newton's own import of the scene (a ``ModelBuilder``), before any reconciliation."""
    scene, c = compiled.scene, compiled_canonical(compiled)
    builder = newton.ModelBuilder()
    # <option> is taken from the canonical model in build_model (Newton rejects solver="PGS").
    source, resolver = (str(scene), None) if not c.ball_joints else split_base(scene, c.root_body)
    # Sites only where a tendon wraps one (a spatial tendon through sites was built without them: 1.7
    # rad off MuJoCo in 0.5 s); MuJoCo's equality constraints kept as such for SolverMuJoCo (converted
    # to loop joints, a connect or weld left a body with two parent joints, which no adapter maps).
    sites = bool(compiled.mj.nwrap) and bool((compiled.mj.wrap_type == mujoco.mjtWrap.mjWRAP_SITE).any())
    builder.add_mjcf(source, parse_mujoco_options=False, parse_visuals=False, parse_sites=sites,
                     convert_mjc_equality_constraints=False, path_resolver=resolver)
    return builder


def _filter_like_mujoco(builder, m) -> None:
    """Newton's own collision pipeline collides robot shapes by its own rule (a body with its
    parent filtered, the rest by collision groups): measured, it collided two arms welded to one
    hub that MuJoCo keeps apart. Every robot shape pair MuJoCo never lets touch (its body filter,
    then the bits; crosssim.engines.features) becomes a filter pair, before the model is built."""
    body_index = _match_bodies(builder, m)
    collide = (np.asarray(builder.shape_flags, dtype=int) & int(newton.ShapeFlags.COLLIDE_SHAPES)) != 0
    shape_geom = _shape_geoms(np.asarray(builder.shape_body, dtype=int), collide, m, body_index)
    robot = [(s, int(g)) for s, g in enumerate(shape_geom) if g >= 0 and m.geom_bodyid[g] != 0]
    for k, (s1, g1) in enumerate(robot):
        for s2, g2 in robot[k + 1:]:
            b1, b2 = int(m.geom_bodyid[g1]), int(m.geom_bodyid[g2])
            if b1 != b2 and (body_filtered(m, b1, b2) or not bits_touch(m, g1, g2)):
                builder.add_shape_collision_filter_pair(s1, s2)


def _match_bodies(nm, m) -> np.ndarray:
    """Newton's importer walks the MJCF tree in MuJoCo's order; check it by name (``nm``: the
    model or its builder)."""
    labels = [str(label).rsplit("/", 1)[-1] for label in nm.body_label]
    index = skip_carrier(labels)  # a split ball-jointed base has one body more (newton_ball)
    if len(index) != m.nbody - 1:
        raise CrossSimError(f"newton: {len(index)} bodies imported, MuJoCo compiles {m.nbody - 1}")
    for b in range(1, m.nbody):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b)
        if name is not None and labels[index[b - 1]] != name:
            raise CrossSimError(f"newton: body {b} is {labels[index[b - 1]]!r}, MuJoCo's is {name!r}")
    return np.array(index, dtype=int)


def _body_joint(nm, body: int) -> int:
    found = np.flatnonzero(nm.joint_child.numpy() == body)
    if len(found) != 1:
        raise CrossSimError(f"newton: body {nm.body_label[body]} has {len(found)} parent joints")
    return int(found[0])


def _fix_merged_joint_anchors(nm, m, body_index) -> None:
    """A body's MJCF joints become one D6 joint anchored at the first joint's ``pos``; MuJoCo
    rotates each hinge about its own anchor. Slides do not depend on the anchor, so anchoring the
    D6 at the hinges' common anchor is exact when every slide precedes every hinge."""
    X_p, X_c = nm.joint_X_p.numpy(), nm.joint_X_c.numpy()
    changed = False
    for b in range(1, m.nbody):
        jnts = list(range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]))
        if len(jnts) < 2:
            continue
        types = [int(m.jnt_type[j]) for j in jnts]
        if BALL in types:  # split by newton_ball: the slides' carrier needs no anchor, the ball has its own
            continue
        hinges = [j for j, t in zip(jnts, types) if t == mujoco.mjtJoint.mjJNT_HINGE]
        first_hinge = types.index(int(mujoco.mjtJoint.mjJNT_HINGE)) if hinges else len(types)
        if any(t == mujoco.mjtJoint.mjJNT_SLIDE for t in types[first_hinge:]):
            raise CrossSimError(f"newton: body {b} has a slide joint after a hinge; Newton's D6 joint applies "
                                "translations first, so this MJCF cannot be represented")
        anchors = np.array([m.jnt_pos[j] for j in hinges]) if hinges else np.array([m.jnt_pos[jnts[0]]])
        if np.abs(anchors - anchors[0]).max() > 1e-9:
            raise CrossSimError(f"newton: body {b} has hinges with different anchors; one D6 joint cannot hold them")
        j = _body_joint(nm, int(body_index[b - 1]))
        shift = anchors[0] - X_c[j, :3]
        R = quat_to_matrix(np.array([X_p[j, 6], *X_p[j, 3:6]]))
        X_p[j, :3] += R @ shift
        X_c[j, :3] = anchors[0]
        changed = True
    if changed:
        nm.joint_X_p.assign(X_p)
        nm.joint_X_c.assign(X_c)


def _match_joints(nm, m, c: CanonicalModel, body_index) -> tuple[np.ndarray, np.ndarray]:
    """Canonical joint -> Newton coordinate and dof. Newton orders a merged joint's dofs
    linear first, then angular, each in MJCF order."""
    q_start, qd_start, axes = nm.joint_q_start.numpy(), nm.joint_qd_start.numpy(), nm.joint_axis.numpy()
    joint_ids = [j for j in range(m.njnt) if int(m.jnt_type[j]) not in (int(mujoco.mjtJoint.mjJNT_FREE), BALL)]
    q_index, qd_index = [], []
    for j in joint_ids:
        b = int(m.jnt_bodyid[j])
        jnts = list(range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]))
        slides = [i for i in jnts if m.jnt_type[i] == mujoco.mjtJoint.mjJNT_SLIDE]
        hinges = [i for i in jnts if m.jnt_type[i] == mujoco.mjtJoint.mjJNT_HINGE]
        local = (slides + hinges).index(j)
        nj = _body_joint(nm, int(body_index[b - 1]))
        if any(int(m.jnt_type[i]) == BALL for i in jnts):  # the slides are the carrier's (newton_ball)
            nj = _body_joint(nm, int(nm.joint_parent.numpy()[nj]))
        dof = int(qd_start[nj]) + local
        axis = m.jnt_axis[j] / np.linalg.norm(m.jnt_axis[j])
        if np.abs(axes[dof] / np.linalg.norm(axes[dof]) - axis).max() > 1e-5:
            raise CrossSimError(f"newton: joint {c.joint_names[len(q_index)]} axis {axes[dof]} differs from {axis}")
        q_index.append(int(q_start[nj]) + local)
        qd_index.append(dof)
    return np.array(q_index, dtype=int), np.array(qd_index, dtype=int)


def _set_inertia(nm, m, body_index) -> None:
    """Masses, centres of mass and inertia tensors (about the COM, body frame) from MuJoCo."""
    mass, com = nm.body_mass.numpy().copy(), nm.body_com.numpy().copy()
    inertia = nm.body_inertia.numpy().copy()
    for k, nb in enumerate(body_index):
        R = quat_to_matrix(m.body_iquat[k + 1])
        mass[nb], com[nb] = m.body_mass[k + 1], m.body_ipos[k + 1]
        inertia[nb] = R @ np.diag(m.body_inertia[k + 1]) @ R.T
    nm.body_mass.assign(mass)
    nm.body_inv_mass.assign(np.where(mass > 0, 1.0 / np.where(mass > 0, mass, 1.0), 0.0))
    nm.body_com.assign(com)
    nm.body_inertia.assign(inertia)
    nm.body_inv_inertia.assign(np.array([np.linalg.inv(i) if np.linalg.det(i) > 0 else np.zeros((3, 3))
                                         for i in inertia]))


def _set_joint_parameters(nm, m, c: CanonicalModel, q_index, qd_index, offset) -> None:
    """Joint parameters; damping, armature and dry friction from ``m``, which a (calibrated)
    profile may have scaled (``crosssim.variant``)."""
    arrays = {name: getattr(nm, name).numpy().copy() for name in (
        "joint_armature", "joint_damping", "joint_friction", "joint_stiffness", "joint_rest_q",
        "joint_limit_lower", "joint_limit_upper")}
    dofs = c.joint_dofadr
    arrays["joint_armature"][qd_index] = m.dof_armature[dofs]
    arrays["joint_damping"][qd_index] = m.dof_damping[dofs]
    arrays["joint_friction"][qd_index] = m.dof_frictionloss[dofs]
    arrays["joint_stiffness"][qd_index] = c.joint_stiffness
    arrays["joint_rest_q"][q_index] = c.joint_springref - offset
    lo = np.where(c.joint_limited, c.joint_range[:, 0] - offset, -UNLIMITED)
    hi = np.where(c.joint_limited, c.joint_range[:, 1] - offset, UNLIMITED)
    arrays["joint_limit_lower"][qd_index], arrays["joint_limit_upper"][qd_index] = lo, hi
    for name, value in arrays.items():
        getattr(nm, name).assign(value)


def _set_limit_gains(nm, m, qd_index, override: dict, *, armature: bool) -> None:
    """Penalty joint limits (Featherstone, semi-implicit) as stiff as MuJoCo's soft limits.

    MuJoCo makes a limit a mass-spring-damper per unit effective inertia, k = 1 / (dmax
    timeconst dampratio)^2 and b = 2 / (dmax timeconst) from solreflimit / solimplimit; times the
    dof's effective inertia at qpos0 (1 / dof_invweight0) that is a joint stiffness and damping.
    Newton's defaults (1e4 N m/rad, 10 N m s/rad whatever the inertia) start Ant's ankles, which
    begin 0.5 rad outside their range, violently enough to throw it 20 m high.
    """
    if not armature:  # the solver has no armature: the dof's inertia without it
        m = copy.copy(m)
        m.dof_armature[:] = 0.0
        mujoco.mj_setConst(m, mujoco.MjData(m))
    joints = [j for j in range(m.njnt) if int(m.jnt_type[j]) not in (int(mujoco.mjtJoint.mjJNT_FREE), BALL)]
    ke, kd = nm.joint_limit_ke.numpy().copy(), nm.joint_limit_kd.numpy().copy()
    for k, j in enumerate(joints):
        timeconst, dampratio = float(m.jnt_solref[j, 0]), float(m.jnt_solref[j, 1])
        dmax = float(m.jnt_solimp[j, 1])
        inertia = 1.0 / float(m.dof_invweight0[m.jnt_dofadr[j]])
        ke[qd_index[k]] = float(override.get("ke", inertia / (dmax * timeconst * dampratio) ** 2))
        kd[qd_index[k]] = float(override.get("kd", inertia * 2.0 / (dmax * timeconst)))
    nm.joint_limit_ke.assign(ke)
    nm.joint_limit_kd.assign(kd)


def _switch_off_actuators(nm, control=None) -> None:
    """Only crosssim's torques act: no PD targets, MJCF motors with zero gain."""
    for name in ("joint_target_ke", "joint_target_kd"):
        getattr(nm, name).zero_()
    nm.joint_target_mode.zero_()
    ns = getattr(nm, "mujoco", None)
    for name in ("actuator_gainprm", "actuator_biasprm"):
        if ns is not None and getattr(ns, name, None) is not None:
            getattr(ns, name).zero_()
    if getattr(control, "mujoco", None) is not None and getattr(control.mujoco, "ctrl", None) is not None:
        control.mujoco.ctrl.zero_()


def _collides_mj(m, g: int) -> bool:
    return bool(m.geom_contype[g] or m.geom_conaffinity[g])


def _match_shapes(nm, m, body_index) -> np.ndarray:
    """MuJoCo geom of each colliding Newton shape: the k-th colliding geom of the same body."""
    collide = (nm.shape_flags.numpy() & int(newton.ShapeFlags.COLLIDE_SHAPES)) != 0
    return _shape_geoms(nm.shape_body.numpy(), collide, m, body_index)


def _shape_geoms(shape_body, collide, m, body_index) -> np.ndarray:
    """MuJoCo geom of each colliding shape (-1 for the others), from each shape's Newton body."""
    newton_to_mj_body = {int(nb): b + 1 for b, nb in enumerate(body_index)}
    per_body: dict[int, list[int]] = {}
    for g in range(m.ngeom):
        if _collides_mj(m, g):
            per_body.setdefault(int(m.geom_bodyid[g]), []).append(g)
    seen: dict[int, int] = {}
    out = np.full(len(shape_body), -1, dtype=int)
    for s, nb in enumerate(shape_body):
        if not collide[s]:
            continue
        b = 0 if nb < 0 else newton_to_mj_body[int(nb)]
        k = seen.get(b, 0)
        geoms = per_body.get(b, [])
        if k < len(geoms):
            out[s] = geoms[k]
        seen[b] = k + 1
    return out


def _set_friction(nm, m, shape_geom, solver_name: str) -> float:
    """MuJoCo takes max(mu_a, mu_b) for a contact, Newton's own contact models the mean: keep
    the floor's coefficient and give each robot shape 2 max(mu, floor) - floor, so that every
    robot-floor contact gets MuJoCo's friction."""
    mu = nm.shape_material_mu.numpy().copy()
    world = [g for g in range(m.ngeom) if m.geom_bodyid[g] == 0 and _collides_mj(m, g)]
    floor = float(max((m.geom_friction[g, 0] for g in world), default=0.0))
    for s, g in enumerate(shape_geom):
        if g < 0:
            continue
        mu[s] = m.geom_friction[g, 0]
        if solver_name not in MUJOCO_SOLVERS and m.geom_bodyid[g] != 0:
            mu[s] = 2.0 * max(mu[s], floor) - floor
    nm.shape_material_mu.assign(mu)
    return floor


def _refuse_underived_softness(compiled: CompiledModel, solver_name: str, contact) -> None:
    """Newton's own solvers take a variant's contact softness only through ``contact: mujoco`` (ke /
    kd derived from solref, as at nominal); with Newton's own or stated gains it would be ignored."""
    from crosssim.errors import EngineFailure
    from crosssim.variant import CONTACT_SOFTNESS

    derived = contact == "mujoco" or (isinstance(contact, dict) and contact.get("from") == "mujoco")
    soft = [k for k in CONTACT_SOFTNESS if getattr(compiled.variant, k) is not None]
    if soft and not derived:
        raise EngineFailure(f"newton ({solver_name}): {', '.join(soft)} needs contact gains derived from MuJoCo's solref "
                            "(settings.contact: mujoco) or solver mujoco-warp; this profile's contact gains ignore it")


def _set_solref(nm, m, shape_geom) -> None:
    """Every shape's contact solref from the compiled model, passed to MuJoCo(-Warp) as it is (raw).
    Newton's importer reads solref from the MJCF file, so without this a variant's contact softness
    (crosssim.variant, ``contact_timeconst``) would not reach SolverMuJoCo; at nominal it changes
    nothing (the importer's values are the compiled ones)."""
    from newton._src.solvers.mujoco.constants import SOLREF_MODE_RAW

    if not (np.asarray(shape_geom) >= 0).any():  # nothing collides (a contact-free arm): no solref to set
        return
    attrs = getattr(nm, "mujoco", None)
    if attrs is None or getattr(attrs, "solref", None) is None or getattr(attrs, "solref_mode", None) is None:
        raise CrossSimError("newton: this Newton has no model.mujoco.solref; contact softness cannot reach SolverMuJoCo")
    solref, mode = attrs.solref.numpy().copy(), attrs.solref_mode.numpy().copy()
    for s, g in enumerate(shape_geom):
        if g >= 0:
            solref[s], mode[s] = m.geom_solref[g], SOLREF_MODE_RAW
    attrs.solref.assign(solref)
    attrs.solref_mode.assign(mode)


def _set_contact_parameters(nm, m, c: CanonicalModel, contact: dict | str) -> dict:
    """Penalty contact stiffness / damping / friction gain of Newton's own solvers.

    ``contact: mujoco`` derives them from MuJoCo's contact softness: solref (time constant,
    damping ratio) and solimp's dmax make a contact a mass-spring-damper per unit mass, k = 1 /
    (dmax timeconst dampratio)^2, b = 2 / (dmax timeconst); the robot's whole mass resting on one
    contact turns that into ke = M k, kd = kf = M b. A mapping sets ke / kd / kf / ka directly
    (``from: mujoco`` in it starts from the derived values).
    """
    if isinstance(contact, dict) and contact.get("from") == "mujoco":  # derived ke / kd, other keys kept
        contact = {**_set_contact_parameters(nm, m, c, "mujoco"), **{k: v for k, v in contact.items() if k != "from"}}
    if contact == "mujoco":
        robot = [g for g in range(m.ngeom) if m.geom_bodyid[g] != 0 and _collides_mj(m, g)]
        timeconst = float(np.mean(m.geom_solref[robot, 0]))
        dampratio = float(np.mean(m.geom_solref[robot, 1]))
        dmax = float(np.mean(m.geom_solimp[robot, 1]))
        mass = float(m.body_mass[1:].sum())
        kd = 2.0 * mass / (dmax * timeconst)
        # MuJoCo's friction constraints share the normal direction's impedance: kf = kd.
        contact = {"ke": mass / (dmax * timeconst * dampratio) ** 2, "kd": kd, "kf": kd}
    elif not isinstance(contact, dict):
        raise CrossSimError(f"newton: settings.contact is 'mujoco' or a mapping of ke/kd/kf/ka, not {contact!r}")
    for key in ("ke", "kd", "kf", "ka"):
        if key in contact:
            getattr(nm, f"shape_material_{key}").fill_(float(contact[key]))
    return contact


def _make_solver(nm, m, name: str, solver_args: dict, notes: dict):
    """Newton solver ``name`` for ``nm`` (``solver_args``: the profile's, passed on as they are);
    with a collision pipeline and its contacts for Newton's own solvers, None for SolverMuJoCo."""
    args = dict(solver_args)
    if name in MUJOCO_SOLVERS:
        opt = m.opt
        solver_type = {0: None, 1: "cg", 2: "newton"}[int(opt.solver)]
        if solver_type is None:
            notes["solver"] = "MuJoCo's PGS solver is not available through Newton; Newton solver used"
            solver_type = "newton"
        kwargs = dict(use_mujoco_cpu=name == "mujoco-c", integrator=INTEGRATORS[int(opt.integrator)],
                      solver=solver_type, iterations=int(opt.iterations), ls_iterations=int(opt.ls_iterations),
                      cone=int(opt.cone), impratio=float(opt.impratio), tolerance=float(opt.tolerance),
                      ls_tolerance=float(opt.ls_tolerance))
        kwargs.update(args)
        return newton.solvers.SolverMuJoCo(nm, **kwargs), None, None
    cls = {"featherstone": newton.solvers.SolverFeatherstone, "xpbd": newton.solvers.SolverXPBD,
           "semi-implicit": newton.solvers.SolverSemiImplicit}[name]
    solver = cls(nm, **args)
    pipeline = newton.CollisionPipeline(nm)
    return solver, pipeline, pipeline.contacts()


# -- audit --------------------------------------------------------------------------------------
def audit_newton(model: NewtonModel) -> list[AuditRow]:
    """Parameters read back from the Newton model arrays (what the solver is handed)."""
    c, nm, name = model.canonical, model.nm, model.solver_name
    nb = model.body_index
    inertia = nm.body_inertia.numpy()[nb]
    # Expressed in MuJoCo's principal frame, so a wrong frame shows up as well as a wrong value.
    principal = np.array([np.diag(quat_to_matrix(q).T @ i @ quat_to_matrix(q)) for q, i in zip(c.body_iquat, inertia)])
    off = model.joint_offset
    lo = nm.joint_limit_lower.numpy()[model.qd_index] + off
    hi = nm.joint_limit_upper.numpy()[model.qd_index] + off
    mu = nm.shape_material_mu.numpy()
    floor = max((mu[s] for s, g in enumerate(model.shape_geom) if g >= 0 and c.geom_body[g] == "world"), default=0.0)
    geom_mu = np.full(len(c.geom_body), np.nan)
    for s, g in enumerate(model.shape_geom):
        if g >= 0:
            geom_mu[g] = max(mu[s], floor) if name in MUJOCO_SOLVERS else 0.5 * (mu[s] + floor)
    if name in MUJOCO_SOLVERS and model.compiled is not None:  # MuJoCo combines them: priority, pairs, condim
        handed = copy.copy(model.compiled.mj)
        for s, g in enumerate(model.shape_geom):
            if g >= 0:
                handed.geom_friction[g, 0] = mu[s]
        geom_mu = floor_contact_friction(geom_mu, c, geom_world_friction(handed))
    got = {
        "timestep": model.dt,
        "integrator": _integrator(model),
        "body_mass": nm.body_mass.numpy()[nb],
        "body_inertia": principal,
        "joint_range": np.stack([lo, hi], axis=1),
        "joint_damping": nm.joint_damping.numpy()[model.qd_index],
        "joint_armature": nm.joint_armature.numpy()[model.qd_index] if name not in ("xpbd", "semi-implicit") else None,
        "joint_frictionloss": nm.joint_friction.numpy()[model.qd_index] if name in MUJOCO_SOLVERS else None,
        "joint_stiffness": nm.joint_stiffness.numpy()[model.qd_index],
        "geom_friction": geom_mu,
        "actuator_gear": c.actuator_gear,
    }
    notes = {
        "timestep": f"{model.substeps} solver step(s) per physics step" if model.substeps > 1 else "",
        "integrator": {"featherstone": "Featherstone integrates semi-implicit Euler only",
                       "xpbd": "XPBD is a position-based integrator (reported as Euler)",
                       "semi-implicit": "semi-implicit Euler only"}.get(name, "passed to SolverMuJoCo from the canonical model"),
        "joint_range": ("MuJoCo soft limits" if name in MUJOCO_SOLVERS else
                        "penalty limits (joint_limit_ke/kd)" if name != "xpbd" else "hard positional limits"),
        "joint_damping": "applied by the adapter as explicit torque -d*qd (XPBD ignores joint damping)" if name == "xpbd" else "",
        "joint_stiffness": "applied by the adapter as explicit torque (XPBD ignores joint springs)" if name == "xpbd" else "",
        "joint_armature": f"Newton's {name} solver has no joint armature" if name in ("xpbd", "semi-implicit") else "",
        "joint_frictionloss": f"Newton's {name} solver has no dry joint friction" if name not in MUJOCO_SOLVERS else "",
        "geom_friction": ("body-floor contact: max of the two (MuJoCo)" if name in MUJOCO_SOLVERS else
                          "body-floor contact: Newton averages the two; robot shapes set to 2 max(mu, floor) - floor"),
        "actuator_gear": "crosssim applies gear x ctrl itself (MJCF actuators switched off)",
        **model.notes,
    }
    return audit_rows(c, got, {k: v for k, v in notes.items() if v})


def _integrator(model: NewtonModel) -> int:
    if model.solver_name == "mujoco-c":
        return int(model.solver.mj_model.opt.integrator)
    if model.solver_name == "mujoco-warp":
        value = model.solver.mjw_model.opt.integrator
        return int(value.numpy().ravel()[0]) if hasattr(value, "numpy") else int(value)
    return 0
