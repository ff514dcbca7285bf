"""EnginePhysX: PhysX 5 (through SAPIEN 3) on the CPU, built from MuJoCo's compiled model.

PhysX 5 is the physics of Isaac Sim, Isaac Lab's default backend and Isaac Gym, where many
legged policies are trained. Like the PyBullet adapter, this one does not use an importer: it
builds one reduced-coordinate articulation from the canonical model (body frames, inertial
frames, joint anchors and axes, collision geoms), then reads every parameter back from PhysX
for the audit. See docs/engines.md.

The scene holds only a PhysX CPU system (no render system, so no GPU or display is needed).
Mapping, per MuJoCo body: one articulation link per joint (a body with several joints, e.g.
Hopper's rootx/rootz/rooty, becomes a chain whose first links are massless carriers of
``CARRIER_MASS`` kg) and a fixed link for a welded body; every link frame is the MuJoCo body
frame, so body poses read straight off the links. Joint axes are the x axis of PhysX's joint
frame. Joint damping and stiffness are a PhysX joint drive with zero target (solved implicitly,
as MuJoCo's Euler integrator treats damping); crosssim's torques are joint efforts (``qf``).

A PhysX system holds one world, so a state (``PhysXState``) is crosssim's own: time, the last
torques, and, while another state of the model is loaded, the system's packed bytes.
"""

from __future__ import annotations

import tempfile
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np
import sapien
import sapien.physx as px

from crosssim.engines.base import AuditRow, EngineBase, EngineCapabilities, EngineProfile
from crosssim.engines.mujoco import audit_rows
from crosssim.errors import EngineFailure
from crosssim.frame import InitialState, SimFrame, cross3, quat_rotate
from crosssim.scene import CanonicalModel, canonical_model
from crosssim.variant import CompiledModel

GEOM = mujoco.mjtGeom
JNT = mujoco.mjtJoint
CARRIER_MASS = 1e-6
"""Mass [kg] (and inertia 1e-9 kg m^2) of links that only carry a joint: PhysX needs mass > 0."""
X_TO_Z = (np.sqrt(0.5), 0.0, -np.sqrt(0.5), 0.0)
"""Rotation taking PhysX's x-aligned capsules, cylinders and plane normals onto MuJoCo's z axis."""
BIG = 1e10


@dataclass
class PhysXWorld:
    """One PhysX scene holding the articulation (and the floor) built from the model."""

    scene: sapien.Scene
    system: px.PhysxCpuSystem
    articulation: px.PhysxArticulation
    joints: list
    """PhysX joint of each canonical joint."""
    body_links: list
    """PhysX link of each canonical body (its frame is the body frame)."""


@dataclass
class PhysXModel:
    canonical: CanonicalModel
    mj: mujoco.MjModel
    """The compiled model (variant applied) every world of this model is built from."""
    profile: EngineProfile
    mesh_dir: Path
    world: PhysXWorld
    """The world as built at load, read by ``audit``; states have worlds of their own."""
    qindex: np.ndarray
    """Index into PhysX's qpos of each canonical joint."""
    joint_offset: np.ndarray
    """MuJoCo qpos minus PhysX joint position (MuJoCo's joint ``ref``)."""
    floor_mu: float
    body_mu: np.ndarray
    """Friction of each body's material as set (NaN: no collision geom)."""
    dt: float
    closed: bool = False


@dataclass(eq=False)
class PhysXState:
    """One state of a PhysXModel, owned by the caller (never the model itself): a world of its own."""

    owner: weakref.ref
    world: PhysXWorld
    torques: np.ndarray
    """Torques applied in the last step [N m or N], canonical joint order."""
    time: float = 0.0


def _pose(pos, quat=(1.0, 0.0, 0.0, 0.0)) -> sapien.Pose:
    return sapien.Pose(np.asarray(pos, dtype=np.float32), np.asarray(quat, dtype=np.float32))


def _axis_frame(anchor, axis) -> sapien.Pose:
    """Joint frame at ``anchor`` whose x axis is ``axis`` (PhysX joints act along/about x)."""
    x = np.asarray(axis, float) / np.linalg.norm(axis)
    helper = np.array([0.0, 0.0, 1.0]) if abs(x[2]) < 0.9 else np.array([1.0, 0.0, 0.0])
    y = np.cross(helper, x)
    y /= np.linalg.norm(y)
    R = np.stack([x, y, np.cross(x, y)], axis=1)
    return _pose(anchor, _matrix_to_quat(R))


class EnginePhysX(EngineBase):
    """PhysX 5 articulation on the CPU via SAPIEN; joint drives carry only the model's passive
    spring and damping (zero targets), crosssim's torques are joint efforts."""

    name = "physx"
    # Each state is a world of its own (a PhysX system holds one world, and packing one out and
    # back in was measured to change the next step by 1e-8..1e-4 on Hopper: the solver's caches
    # are not in the pack). A world costs ~8 ms to build; stepping states in turn costs nothing.
    capabilities = EngineCapabilities(reset_into=True, concurrent_states=False)
    settings_keys = frozenset({"solver", "position_iterations", "velocity_iterations", "contact_offset"})

    def load(self, compiled: CompiledModel, profile: EngineProfile) -> PhysXModel:
        c = canonical_model(compiled.scene)
        m = compiled.mj  # the variant is in the model PhysX is built from
        _refuse_unsupported(m, compiled.scene)
        solver = str(profile.settings.get("solver", "tgs")).lower()
        if solver not in ("tgs", "pgs"):
            raise EngineFailure(f"physx profile: solver must be tgs or pgs, not {solver!r}")
        mesh_dir = Path(tempfile.mkdtemp(prefix="crosssim-physx-"))  # meshes as .obj, written once per model
        world, qindex, floor_mu, body_mu = _build(m, profile, mesh_dir)
        canonical_joints = [j for j in range(m.njnt) if int(m.jnt_type[j]) != int(JNT.mjJNT_FREE)]
        offset = np.array([m.qpos0[m.jnt_qposadr[j]] for j in canonical_joints])
        return PhysXModel(canonical=c, mj=m, profile=profile, mesh_dir=mesh_dir, world=world, qindex=qindex,
                          joint_offset=offset, floor_mu=floor_mu, body_mu=body_mu, dt=float(world.system.get_timestep()))

    # -- contract ---------------------------------------------------------------------------
    def reset(self, model: PhysXModel, initial: InitialState) -> PhysXState:
        if model.closed:
            raise EngineFailure("physx: this model was closed")
        state = PhysXState(weakref.ref(model), _build(model.mj, model.profile, model.mesh_dir)[0], np.zeros(model.canonical.joint_count))
        return self._put(model, state, initial)

    def reset_into(self, model: PhysXModel, state: PhysXState, initial: InitialState) -> PhysXState:
        """A fresh world for ``state``: reusing the old one would keep its solver caches."""
        self._check(model, state)
        fresh = self.reset(model, initial)
        state.world, state.torques, state.time = fresh.world, fresh.torques, fresh.time
        return state

    def _put(self, model: PhysXModel, state: PhysXState, initial: InitialState) -> PhysXState:
        c, art = model.canonical, state.world.articulation
        qpos, qvel = np.asarray(initial.qpos, float), np.asarray(initial.qvel, float)
        q, qd = np.zeros(art.dof), np.zeros(art.dof)
        q[model.qindex] = qpos[c.joint_qposadr] - model.joint_offset
        qd[model.qindex] = qvel[c.joint_dofadr]
        if c.free_base:
            pos, quat = qpos[:3], qpos[3:7] / np.linalg.norm(qpos[3:7])
            root = state.world.body_links[0]
            art.set_root_pose(_pose(pos, quat))
            ang = quat_rotate(quat, qvel[3:6])
            com = pos + quat_rotate(quat, np.asarray(root.cmass_local_pose.p, float))
            art.set_root_linear_velocity(np.asarray(qvel[:3] + cross3(ang, com - pos), dtype=np.float32))
            art.set_root_angular_velocity(np.asarray(ang, dtype=np.float32))
        art.set_qpos(q.astype(np.float32))
        art.set_qvel(qd.astype(np.float32))
        art.set_qf(np.zeros(art.dof, dtype=np.float32))
        return state

    def _check(self, model: PhysXModel, state: PhysXState) -> None:
        if not isinstance(state, PhysXState) or state.owner() is not model:
            raise EngineFailure(f"physx: {type(state).__name__} is not a state of this model; use reset(model, ...)")

    def step(self, model: PhysXModel, state: PhysXState, torques: np.ndarray, n_substeps: int = 1) -> None:
        self._check(model, state)
        torques = np.asarray(torques, dtype=float)
        state.torques = torques.copy()
        art = state.world.articulation
        qf = np.zeros(art.dof, dtype=np.float32)
        qf[model.qindex] = torques
        for _ in range(n_substeps):
            art.set_qf(qf)  # held for the step; damping and spring are the drives'
            state.world.system.step()
            state.time += model.dt

    def joint_state(self, model: PhysXModel, state: PhysXState) -> tuple[np.ndarray, np.ndarray]:
        c, art = model.canonical, state.world.articulation
        qpos, qvel = np.zeros(c.nq), np.zeros(c.nv)
        qpos[c.joint_qposadr] = np.asarray(art.get_qpos(), float)[model.qindex] + model.joint_offset
        qvel[c.joint_dofadr] = np.asarray(art.get_qvel(), float)[model.qindex]
        if c.free_base:
            pos, quat, lin, ang = _base(state.world)
            qpos[:3], qpos[3:7], qvel[:3] = pos, quat, lin
            qvel[3:6] = quat_rotate(quat * np.array([1, -1, -1, -1]), ang)
        return qpos, qvel

    def frame(self, model: PhysXModel, state: PhysXState, *, contacts: bool = False) -> SimFrame:
        qpos, qvel = self.joint_state(model, state)
        pos, quat, lin, ang = _base(state.world)
        wrench = _contact_wrench(model, state.world) if contacts else np.zeros((0, 6))
        return SimFrame(time=state.time, qpos=qpos, qvel=qvel, base_pos=pos, base_quat=quat, base_lin_vel=lin,
                        base_ang_vel=ang, joint_torque=state.torques.copy(), body_ext_wrench=wrench)

    def audit(self, model: PhysXModel) -> list[AuditRow]:
        c, links, joints = model.canonical, model.world.body_links, model.world.joints
        lo = np.array([j.get_limits()[0][0] for j in joints]) + model.joint_offset
        hi = np.array([j.get_limits()[0][1] for j in joints]) + model.joint_offset
        # Body-floor friction as PhysX combines it: the average of the two materials.
        body_mu = {c.body_names[k]: 0.5 * (model.body_mu[k] + model.floor_mu) for k in range(len(links))}
        geom_mu = np.array([body_mu.get(b, np.nan) if b != "world" else np.nan for b in c.geom_body])
        got = {
            "timestep": model.world.system.get_timestep(),
            "integrator": 0,  # PhysX integrates semi-implicit Euler
            "body_mass": [link.get_mass() for link in links],
            "body_inertia": [link.get_inertia() for link in links],
            "joint_range": np.stack([np.where(np.isfinite(lo), lo, np.nan), np.where(np.isfinite(hi), hi, np.nan)], 1),
            "joint_damping": [j.get_damping() for j in joints],
            "joint_armature": [j.get_armature()[0] for j in joints],
            "joint_frictionloss": None,
            "joint_stiffness": [j.get_stiffness() for j in joints],
            "geom_friction": geom_mu,
            "actuator_gear": c.actuator_gear,
        }
        notes = {
            "integrator": "PhysX integrates semi-implicit Euler only",
            "joint_damping": "PhysX joint drive with zero stiffness and zero target velocity (implicit)",
            "joint_stiffness": "PhysX joint drive towards the spring reference",
            "joint_frictionloss": "PhysX joint friction is a coefficient on the joint's constraint force, not "
                                  "MuJoCo's dry friction torque: not represented",
            "geom_friction": "body-floor contact: PhysX averages the two materials; body materials are set so the "
                             "average equals MuJoCo's max",
            "actuator_gear": "crosssim applies gear x ctrl itself",
        }
        rows = audit_rows(c, got, notes)
        rows.append(AuditRow("gravity_z", "model", float(c.gravity[2]), float(px.get_scene_config().gravity[2]),
                             1e-5, "scene gravity (float32 in PhysX)"))
        return rows

    def close(self, model: PhysXModel) -> None:
        if not model.closed:
            model.closed = True
            model.world.scene.clear()


def _base(world: PhysXWorld):
    """Root body frame pose and velocity (PhysX reports the COM velocity)."""
    link = world.body_links[0]
    pose = link.get_entity_pose()
    pos, quat = np.asarray(pose.p, float), np.asarray(pose.q, float)
    quat = quat / np.linalg.norm(quat)
    com = pos + quat_rotate(quat, np.asarray(link.cmass_local_pose.p, float))
    ang = np.asarray(link.get_angular_velocity(), float)
    lin = np.asarray(link.get_linear_velocity(), float) + cross3(ang, pos - com)
    return pos, quat, lin, ang


def _contact_wrench(model: PhysXModel, world: PhysXWorld) -> np.ndarray:
    """Contact wrench per body, MuJoCo cfrc_ext convention (about the robot COM)."""
    c = model.canonical
    index = {id(link): k for k, link in enumerate(world.body_links)}
    coms = []
    for link in world.body_links:
        pose = link.get_entity_pose()
        coms.append(np.asarray(pose.p, float) + quat_rotate(np.asarray(pose.q, float),
                                                            np.asarray(link.cmass_local_pose.p, float)))
    com = (c.body_mass[:, None] * np.array(coms)).sum(0) / max(c.body_mass.sum(), 1e-12)
    out = np.zeros((len(c.body_names), 6))
    for contact in world.system.get_contacts():
        for side, sign in ((0, 1.0), (1, -1.0)):  # the impulse acts on body 0; body 1 gets the opposite
            k = index.get(id(contact.bodies[side]))
            if k is None:
                continue
            for point in contact.points:
                force = sign * np.asarray(point.impulse, float) / model.dt
                out[k, 3:] += force
                out[k, :3] += cross3(np.asarray(point.position, float) - com, force)
    return out


def _refuse_unsupported(m, scene: Path) -> None:
    """One clear line for what this adapter cannot build (the canonical model refuses ball joints)."""
    if m.neq:
        raise EngineFailure(f"physx: {scene.name} has {m.neq} equality constraint(s); not supported by the physx engine")
    if m.ntendon:
        raise EngineFailure(f"physx: {scene.name} has {m.ntendon} tendon(s); not supported by the physx engine")
    roots = [b for b in range(1, m.nbody) if m.body_parentid[b] == 0]
    if len(roots) > 1:
        raise EngineFailure(f"physx: {scene.name} has {len(roots)} bodies under the world; the physx engine "
                            "builds one articulation (one tree)")
    for j in range(m.njnt):
        if int(m.jnt_type[j]) == int(JNT.mjJNT_BALL):
            name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) or str(j)
            raise EngineFailure(f"physx: ball joints not supported (joint {name} in {scene.name})")


def _build(m, profile: EngineProfile, mesh_dir: Path) -> tuple[PhysXWorld, np.ndarray, float, np.ndarray]:
    """A new PhysX world holding the model's articulation: (world, PhysX qpos index of each
    canonical joint, floor friction, body material friction)."""
    s = profile.settings
    # Scene settings are global in SAPIEN and read when a system is created.
    px.set_scene_config(gravity=np.asarray(m.opt.gravity, dtype=np.float32),
                        enable_tgs=str(s.get("solver", "tgs")).lower() == "tgs", enable_enhanced_determinism=True)
    px.set_shape_config(contact_offset=float(s.get("contact_offset", 0.01)), rest_offset=0.0)
    system = px.PhysxCpuSystem()
    scene = sapien.Scene([system])
    system.timestep = float(m.opt.timestep)
    world_geoms = [g for g in range(m.ngeom) if m.geom_bodyid[g] == 0 and _collides(m, g)]
    floor_mu = float(max((m.geom_friction[g, 0] for g in world_geoms), default=1.0))
    floor_mat = px.PhysxMaterial(floor_mu, floor_mu, 0.0)
    if world_geoms:
        ground = px.PhysxRigidStaticComponent()
        for g in world_geoms:
            for shape in _shapes(m, g, floor_mat, mesh_dir):
                ground.attach(shape)
        entity = sapien.Entity()
        entity.add_component(ground)
        scene.add_entity(entity)

    free = any(int(m.jnt_type[j]) == int(JNT.mjJNT_FREE) for j in range(m.njnt))
    links_of_body: dict[int, px.PhysxArticulationLinkComponent] = {}
    joint_of: dict[int, px.PhysxArticulationJoint] = {}
    entities, body_mu = [], np.full(m.nbody - 1, np.nan)

    def new_link(parent, name):
        link = px.PhysxArticulationLinkComponent(parent)
        link.name = name
        entity = sapien.Entity()
        entity.name = name
        entity.add_component(link)
        entities.append(entity)
        return link

    def carrier(link):
        link.mass, link.inertia = CARRIER_MASS, np.full(3, 1e-9, dtype=np.float32)
        link.cmass_local_pose = _pose(np.zeros(3))

    root = None
    if not free:  # a fixed root at the world origin carries the first body's joints (or weld)
        root = new_link(None, "world")
        carrier(root)
        root.joint.type = "fixed"
    for b in range(1, m.nbody):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b) or f"body{b}"
        parent = links_of_body.get(int(m.body_parentid[b]), root)
        jnts = [j for j in range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b])
                if not (free and b == 1 and int(m.jnt_type[j]) == int(JNT.mjJNT_FREE))]
        body_pose = _pose(m.body_pos[b], m.body_quat[b])
        if free and b == 1:
            link = new_link(None, name)
            link.joint.type = "undefined"  # floating root
        elif not jnts:
            link = new_link(parent, name)
            link.joint.type = "fixed"
            link.joint.pose_in_parent, link.joint.pose_in_child = body_pose, _pose(np.zeros(3))
        else:
            prev, link = parent, None
            for k, j in enumerate(jnts):
                last = k == len(jnts) - 1
                link = new_link(prev, name if last else f"{name}/{k}")
                if not last:
                    carrier(link)
                frame = _axis_frame(m.jnt_pos[j], m.jnt_axis[j])
                link.joint.type = {int(JNT.mjJNT_HINGE): "revolute_unwrapped", int(JNT.mjJNT_SLIDE): "prismatic"}[
                    int(m.jnt_type[j])]
                # Links of one body share the body frame; joint k sits on its anchor in that frame.
                link.joint.pose_in_parent = body_pose * frame if k == 0 else frame
                link.joint.pose_in_child = frame
                link.joint.name = f"j{j}"
                # Limits decide the joint's PhysX motion type, which is fixed once in the scene.
                lo, hi = (m.jnt_range[j] - m.qpos0[m.jnt_qposadr[j]]) if m.jnt_limited[j] else (-np.inf, np.inf)
                link.joint.set_limits(np.array([[lo, hi]], dtype=np.float32))
                joint_of[j] = link.joint
                prev = link
        link.mass = float(m.body_mass[b])
        link.cmass_local_pose = _pose(m.body_ipos[b], m.body_iquat[b])
        link.inertia = np.asarray(m.body_inertia[b], dtype=np.float32)
        geoms = [g for g in range(m.body_geomadr[b], m.body_geomadr[b] + m.body_geomnum[b]) if _collides(m, g)]
        if geoms:
            # PhysX averages the two materials' coefficients; MuJoCo takes the max. With the floor
            # at mu_f, a body material of 2 max(mu_b, mu_f) - mu_f makes the average that max.
            mu = float(max(m.geom_friction[g, 0] for g in geoms))
            body_mu[b - 1] = 2 * max(mu, floor_mu) - floor_mu
            mat = px.PhysxMaterial(body_mu[b - 1], body_mu[b - 1], 0.0)
            for g in geoms:
                for shape in _shapes(m, g, mat, mesh_dir):
                    link.attach(shape)
        links_of_body[b] = link

    for entity in entities:
        link = entity.find_component_by_type(px.PhysxArticulationLinkComponent)
        link.linear_damping = link.angular_damping = 0.0
        link.max_linear_velocity = link.max_angular_velocity = BIG
        link.disable_gravity = False
    entities[0].pose = _pose(m.body_pos[1], m.body_quat[1]) if free else _pose(np.zeros(3))
    for entity in entities:
        scene.add_entity(entity)
    art = entities[0].find_component_by_type(px.PhysxArticulationLinkComponent).articulation
    art.set_solver_position_iterations(int(s.get("position_iterations", 4)))
    art.set_solver_velocity_iterations(int(s.get("velocity_iterations", 1)))
    art.set_sleep_threshold(0.0)

    canonical_joints = [j for j in range(m.njnt) if int(m.jnt_type[j]) != int(JNT.mjJNT_FREE)]
    active = [jt.name for jt in art.get_active_joints()]
    qindex = np.array([active.index(f"j{j}") for j in canonical_joints], dtype=int)
    offset = np.array([m.qpos0[m.jnt_qposadr[j]] for j in canonical_joints])
    joints = [joint_of[j] for j in canonical_joints]
    for k, j in enumerate(canonical_joints):
        jt, dof = joints[k], int(m.jnt_dofadr[j])
        jt.set_armature(np.array([m.dof_armature[dof]], dtype=np.float32))
        jt.set_friction(0.0)
        jt.set_max_velocity(BIG)
        # Passive spring and damping as a drive: implicit in PhysX, as damping is in MuJoCo's Euler.
        jt.set_drive_properties(float(m.jnt_stiffness[j]), float(m.dof_damping[dof]), mode="force")
        jt.set_drive_target(float(m.qpos_spring[m.jnt_qposadr[j]] - offset[k]))
        jt.set_drive_velocity_target(0.0)
    world = PhysXWorld(scene=scene, system=system, articulation=art, joints=joints,
                       body_links=[links_of_body[b] for b in range(1, m.nbody)])
    return world, qindex, floor_mu, body_mu


def _collides(m, g: int) -> bool:
    return bool(m.geom_contype[g] or m.geom_conaffinity[g])


def _shapes(m, g: int, material, mesh_dir: Path) -> list:
    """PhysX collision shapes of MuJoCo geom ``g``, posed in its body frame."""
    t, size = int(m.geom_type[g]), m.geom_size[g]
    along_z = False
    if t == GEOM.mjGEOM_PLANE:
        shape, along_z = px.PhysxCollisionShapePlane(material), True
    elif t == GEOM.mjGEOM_SPHERE:
        shape = px.PhysxCollisionShapeSphere(float(size[0]), material)
    elif t == GEOM.mjGEOM_CAPSULE:
        shape, along_z = px.PhysxCollisionShapeCapsule(float(size[0]), float(size[1]), material), True
    elif t == GEOM.mjGEOM_CYLINDER:
        shape, along_z = px.PhysxCollisionShapeCylinder(float(size[0]), float(size[1]), material), True
    elif t == GEOM.mjGEOM_BOX:
        shape = px.PhysxCollisionShapeBox(np.asarray(size, dtype=np.float32), material)
    elif t == GEOM.mjGEOM_ELLIPSOID:  # PhysX has no ellipsoid: the enclosing sphere, as PyBullet does
        shape = px.PhysxCollisionShapeSphere(float(max(size)), material)
    elif t == GEOM.mjGEOM_MESH:
        path = _write_obj(m, int(m.geom_dataid[g]), mesh_dir)
        shape = px.PhysxCollisionShapeConvexMesh(str(path), np.ones(3, dtype=np.float32), material)
    else:
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or str(g)
        raise EngineFailure(f"physx: geom type {t} of geom {name} is not supported by the physx engine")
    quat = m.geom_quat[g]
    pose = _pose(m.geom_pos[g], quat)
    shape.local_pose = pose * _pose(np.zeros(3), X_TO_Z) if along_z else pose
    shape.set_collision_groups([int(m.geom_contype[g]), int(m.geom_conaffinity[g]), 0, 0])
    shape.rest_offset = 0.0
    return [shape]


def _write_obj(m, mesh: int, folder: Path) -> Path:
    path = folder / f"mesh{mesh}.obj"
    if not path.exists():
        v0, nv = m.mesh_vertadr[mesh], m.mesh_vertnum[mesh]
        f0, nf = m.mesh_faceadr[mesh], m.mesh_facenum[mesh]
        lines = [f"v {x:.9g} {y:.9g} {z:.9g}" for x, y, z in m.mesh_vert[v0:v0 + nv]]
        lines += [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in m.mesh_face[f0:f0 + nf]]
        path.write_text("\n".join(lines) + "\n")
    return path


def _matrix_to_quat(R: np.ndarray) -> np.ndarray:
    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(R, dtype=float).ravel())
    return q
