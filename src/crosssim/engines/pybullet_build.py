"""Building PyBullet's multibody from MuJoCo's compiled model, step by step (EnginePyBullet._build
calls them in this order, which is the order of Bullet's object ids): server settings, world
bodies, the link tree, the multibody, its link dynamics, its joints.

See crosssim.engines.pybullet for the mapping and what PyBullet's own loadMJCF loses; this module
only constructs, it never steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np
import pybullet

from crosssim.engines.features import body_friction, free_objects, geoms_of, self_contacts
from crosssim.engines.pybullet_ball import free_spherical_motor
from crosssim.engines.settings import PyBulletSettings
from crosssim.errors import EngineFailure
from crosssim.frame import quat_rotate, quat_to_matrix, wxyz_to_xyzw
from crosssim.scene import CanonicalModel, write_mesh_obj

GEOM = mujoco.mjtGeom


def xyzw(q) -> list[float]:
    """A w-x-y-z quaternion in PyBullet's x-y-z-w order."""
    return list(wxyz_to_xyzw(np.asarray(q, dtype=float)))


def configure_server(c: CanonicalModel, m, s: PyBulletSettings, client: int) -> int:
    """Gravity and Bullet's step; returns the Bullet steps per physics step."""
    pb = dict(physicsClientId=client)
    pybullet.setGravity(*c.gravity, **pb)
    # Each physics step is split into Bullet steps no longer than substep_dt (0 or None: not
    # split). Semi-implicit Euler with explicit damping and the armature emulation's one-step
    # lag is too coarse at gymnasium's 10 ms (HalfCheetah, Ant); see docs/engines.md.
    timestep = float(m.opt.timestep)
    bullet_steps = max(1, int(np.ceil(timestep / s.substep_dt - 1e-9))) if s.substep_dt else 1
    pybullet.setPhysicsEngineParameter(
        fixedTimeStep=timestep / bullet_steps,
        numSubSteps=s.substeps,
        numSolverIterations=s.solver_iterations,
        deterministicOverlappingPairs=1,
        **pb,
    )
    return bullet_steps


def add_world_bodies(m, mesh_dir: Path, client: int) -> tuple[list[tuple[int, list[int]]], int | None, float]:
    """World geoms (floor, terrain, rails) as static bodies, one per contype/conaffinity pair so
    that _filter_world_pairs can follow MuJoCo's bits; friction 1 there, see _link_friction.
    Returns ([(body, its geoms)], the floor body or None, the floor's MuJoCo friction)."""
    world_geoms = [g for g in range(m.ngeom) if m.geom_bodyid[g] == 0 and _collides(m, g)]
    worlds: list[tuple[int, list[int]]] = []  # geoms only in pairs have bits (0, 0): a body of their own
    for g in [g for g in world_geoms if int(m.geom_type[g]) == GEOM.mjGEOM_HFIELD]:  # a body each
        worlds.append((_heightfield_body(m, g, client), [g]))
        pybullet.changeDynamics(worlds[-1][0], -1, lateralFriction=1.0, physicsClientId=client)
    world_geoms = [g for g in world_geoms if int(m.geom_type[g]) != GEOM.mjGEOM_HFIELD]
    for bits in sorted({(int(m.geom_contype[g]), int(m.geom_conaffinity[g])) for g in world_geoms}):
        geoms = [g for g in world_geoms if (int(m.geom_contype[g]), int(m.geom_conaffinity[g])) == bits]
        body = pybullet.createMultiBody(0, _shape_array(m, geoms, mesh_dir, client), -1, [0, 0, 0], [0, 0, 0, 1],
                                        physicsClientId=client)
        pybullet.changeDynamics(body, -1, lateralFriction=1.0, physicsClientId=client)
        worlds.append((body, geoms))
    floor = worlds[0][0] if worlds else None
    frictions = [m.geom_friction[g, 0] for g in range(m.ngeom) if m.geom_bodyid[g] == 0 and _collides(m, g)]
    floor_friction = float(max(frictions)) if frictions else 1.0
    return worlds, floor, floor_friction


@dataclass
class LinkTree:
    """The robot's links as createMultiBody takes them, and where each body and joint went."""

    links: dict
    """createMultiBody's per-link lists (``_add_link``)."""
    body_link: np.ndarray
    """Link index carrying each MuJoCo body (-1: the floating base)."""
    body_anchor: dict
    """Body -> (its link, the body frame's offset in that link's frame)."""
    joint_link: dict
    """MuJoCo joint -> the link it moves."""
    base: dict | None
    """The floating base's mass, shape and frames; None for a fixed-base robot."""


_JOINT_TYPES = {int(mujoco.mjtJoint.mjJNT_HINGE): pybullet.JOINT_REVOLUTE,
                int(mujoco.mjtJoint.mjJNT_SLIDE): pybullet.JOINT_PRISMATIC,
                int(mujoco.mjtJoint.mjJNT_BALL): pybullet.JOINT_SPHERICAL}


def link_tree(c: CanonicalModel, m, inertia: dict, mesh_dir: Path, client: int) -> LinkTree:
    """One link per MuJoCo joint (a body with several joints becomes a chain of massless links, the
    last carrying the body), one fixed link per welded body, and the floating base."""
    links: dict = {k: [] for k in ("mass", "shape", "pos", "orn", "ipos", "iorn", "parent", "type", "axis")}
    body_link = np.full(m.nbody, -2, dtype=int)
    body_anchor = {0: (-1, np.zeros(3))}
    joint_link: dict = {}
    roots = [b for b in range(1, m.nbody) if m.body_parentid[b] == 0]
    if c.free_base and len(roots) > 1:  # they would hang from the floating base, the one multibody here
        raise EngineFailure(f"pybullet: {c.path.name} has {len(roots)} bodies under the world and a free joint; "
                            "the pybullet engine builds one multibody, so none may float beside another")
    base = None
    if c.free_base:
        shape = _shape_array(m, _body_geoms(m, 1), mesh_dir, client)
        base = dict(mass=float(m.body_mass[1]), shape=shape, pos=m.body_pos[1], orn=m.body_quat[1],
                    ipos=m.body_ipos[1], iquat=inertia[1][1])
        body_link[1] = -1
        body_anchor[1] = (-1, np.zeros(3))
    objects = set(free_objects(m))  # their own multibodies (crosssim.engines.pybullet_objects)
    for b in range(2 if c.free_base else 1, m.nbody):
        if b in objects:
            continue
        parent_link, parent_off = body_anchor[int(m.body_parentid[b])]
        # The body frame expressed in the parent link's frame (body frames are only translated
        # relative to their link, so rotations compose directly).
        pos, orn = parent_off + m.body_pos[b], m.body_quat[b]
        jnts = list(range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]))
        prev_anchor = np.zeros(3)
        for k, j in enumerate(jnts):
            last, anchor = k == len(jnts) - 1, m.jnt_pos[j]
            _add_link(links,
                      mass=float(m.body_mass[b]) if last else 0.0,
                      shape=_shape_array(m, _body_geoms(m, b), mesh_dir, client, offset=-anchor) if last else -1,
                      pos=(pos + quat_rotate(orn, anchor)) if k == 0 else anchor - prev_anchor,
                      orn=orn if k == 0 else [1, 0, 0, 0],
                      ipos=m.body_ipos[b] - anchor if last else np.zeros(3),
                      iquat=inertia[b][1] if last else [1, 0, 0, 0],
                      parent=parent_link if k == 0 else len(links["mass"]) - 1,
                      jtype=_JOINT_TYPES[int(m.jnt_type[j])], axis=m.jnt_axis[j])
            joint_link[j] = len(links["mass"]) - 1
            prev_anchor = anchor
        if not jnts:  # welded body
            _add_link(links, mass=float(m.body_mass[b]), shape=_shape_array(m, _body_geoms(m, b), mesh_dir, client),
                      pos=pos, orn=orn, ipos=m.body_ipos[b], iquat=inertia[b][1], parent=parent_link,
                      jtype=pybullet.JOINT_FIXED, axis=[0, 0, 1])
        body_link[b] = len(links["mass"]) - 1
        body_anchor[b] = (body_link[b], -prev_anchor)
    return LinkTree(links, body_link, body_anchor, joint_link, base)


def create_robot(tree: LinkTree, client: int) -> int:
    """The multibody: on the floating base, or on a massless fixed base at the world origin; its
    links collide with each other as MuJoCo's bodies do (``_filter_self_pairs`` keeps the rest apart)."""
    pb = dict(physicsClientId=client, flags=pybullet.URDF_USE_SELF_COLLISION)
    if tree.base is not None:
        base = tree.base
        return pybullet.createMultiBody(
            baseMass=base["mass"], baseCollisionShapeIndex=base["shape"],
            basePosition=list(base["pos"]), baseOrientation=xyzw(base["orn"]),
            baseInertialFramePosition=list(base["ipos"]), baseInertialFrameOrientation=xyzw(base["iquat"]),
            **_link_kwargs(tree.links), useMaximalCoordinates=False, **pb)
    return pybullet.createMultiBody(
        baseMass=0.0, baseCollisionShapeIndex=-1, basePosition=[0, 0, 0], baseOrientation=[0, 0, 0, 1],
        **_link_kwargs(tree.links), useMaximalCoordinates=False, **pb)


def set_link_dynamics(m, robot: int, body_link: np.ndarray, inertia: dict, worlds, floor_friction: float,
                       client: int) -> None:
    """Canonical inertias, MuJoCo's collision filter and friction, and no Bullet damping."""
    pb = dict(physicsClientId=client)
    # createMultiBody derives inertias from the shapes; set the canonical ones.
    robot_bodies = [b for b in range(1, m.nbody) if body_link[b] != -2]  # not the free objects
    for b in robot_bodies:
        pybullet.changeDynamics(robot, int(body_link[b]), localInertiaDiagonal=list(inertia[b][0]), **pb)
    _filter_world_pairs(m, worlds, robot, body_link, client)
    _filter_self_pairs(m, robot, body_link, client)
    mus = body_friction(m)
    for b in robot_bodies:
        friction = _link_friction(m, b, mus, floor_friction)
        if friction is not None:
            pybullet.changeDynamics(robot, int(body_link[b]), lateralFriction=friction, **pb)
    # Damping is crosssim's (explicit torques); one parameter per call (docs/engines.md).
    pybullet.changeDynamics(robot, -1, linearDamping=0.0, **pb)
    pybullet.changeDynamics(robot, -1, angularDamping=0.0, **pb)
    for j in range(pybullet.getNumJoints(robot, **pb)):
        pybullet.changeDynamics(robot, j, linearDamping=0.0, **pb)
        pybullet.changeDynamics(robot, j, angularDamping=0.0, **pb)
        pybullet.changeDynamics(robot, j, jointDamping=0.0, **pb)


@dataclass
class Joints:
    """The robot's joints as set_joints left them, canonical joint order."""

    links: np.ndarray
    """PyBullet joint index of each canonical joint."""
    offset: np.ndarray
    """MuJoCo qpos minus PyBullet joint position (MuJoCo's joint ``ref``)."""
    frictionloss: np.ndarray
    limits: np.ndarray
    balls: tuple


def set_joints(c: CanonicalModel, m, robot: int, joint_link: dict, client: int) -> Joints:
    """Motors off (dry friction as capped zero-velocity motors), ball joints free, MuJoCo's limits."""
    pb = dict(physicsClientId=client)
    jidx = [int(m.jnt_qposadr[j]) for j in range(m.njnt)]
    canonical_joints = [j for j in range(m.njnt) if int(m.jnt_type[j]) not in (
        int(mujoco.mjtJoint.mjJNT_FREE), int(mujoco.mjtJoint.mjJNT_BALL))]
    balls = tuple((int(joint_link[j]), int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])) for j in range(m.njnt)
                  if int(m.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_BALL))
    for link, _, _ in balls:
        free_spherical_motor(robot, link, client)
    jl = np.array([joint_link[j] for j in canonical_joints], dtype=int)
    # Native velocity motors hold every joint still unless switched off; where the model has
    # dry joint friction, a zero-velocity motor whose force is capped at it *is* dry friction,
    # solved implicitly by Bullet's constraint solver (crosssim's torques act on top).
    # Damping, armature and dry friction from ``m``: a variant may scale them (crosssim.variant).
    friction = m.dof_frictionloss[c.joint_dofadr].copy()  # always emulated (docs/engines.md): no setting turns it off
    pybullet.setJointMotorControlArray(robot, list(map(int, jl)), pybullet.VELOCITY_CONTROL,
                                       targetVelocities=[0.0] * len(jl), forces=list(map(float, friction)), **pb)
    # MuJoCo's joint limits become PyBullet's (hard limits; MuJoCo's are soft constraints).
    limits = np.full((len(jl), 2), np.nan)
    for k, j in enumerate(canonical_joints):
        if m.jnt_limited[j]:
            limits[k] = m.jnt_range[j] - m.qpos0[jidx[j]]
            pybullet.changeDynamics(robot, int(jl[k]), jointLowerLimit=float(limits[k, 0]),
                                    jointUpperLimit=float(limits[k, 1]), **pb)
    return Joints(jl, np.array([m.qpos0[jidx[j]] for j in canonical_joints]), np.asarray(friction, dtype=float),
                   limits, balls)


def body_inertia(m, b: int, with_armature: bool) -> tuple[np.ndarray, np.ndarray]:
    """(principal moments, orientation w-x-y-z in the body frame) of body ``b``."""
    if not with_armature:
        return m.body_inertia[b].copy(), m.body_iquat[b].copy()
    joints = [j for j in range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b])
              if int(m.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_HINGE) and m.dof_armature[m.jnt_dofadr[j]] > 0]
    if not joints:
        return m.body_inertia[b].copy(), m.body_iquat[b].copy()
    R = quat_to_matrix(m.body_iquat[b])
    tensor = R @ np.diag(m.body_inertia[b]) @ R.T
    for j in joints:
        axis = m.jnt_axis[j] / np.linalg.norm(m.jnt_axis[j])
        tensor += m.dof_armature[m.jnt_dofadr[j]] * np.outer(axis, axis)
    moments, vectors = np.linalg.eigh(tensor)
    if np.linalg.det(vectors) < 0:
        vectors[:, 0] = -vectors[:, 0]
    return moments, _matrix_to_quat(vectors)


def _matrix_to_quat(R: np.ndarray) -> np.ndarray:
    """w, x, y, z of a rotation matrix (Shepperd's method)."""
    t = np.trace(R)
    if t > 0:
        s = 2.0 * np.sqrt(t + 1.0)
        q = [0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s]
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(1.0 + R[i, i] - R[j, j] - R[k, k])
        q = [0.0] * 4
        q[0] = (R[k, j] - R[j, k]) / s
        q[i + 1], q[j + 1], q[k + 1] = 0.25 * s, (R[j, i] + R[i, j]) / s, (R[k, i] + R[i, k]) / s
    q = np.array(q)
    return q / np.linalg.norm(q)


def _add_link(links, *, mass, shape, pos, orn, ipos, iquat, parent, jtype, axis):
    links["mass"].append(mass)
    links["shape"].append(shape)
    links["pos"].append(list(map(float, pos)))
    links["orn"].append(xyzw(orn))
    links["ipos"].append(list(map(float, ipos)))
    links["iorn"].append(xyzw(iquat))
    links["parent"].append(int(parent) + 1)  # createMultiBody counts the base as 0
    links["type"].append(jtype)
    links["axis"].append(list(map(float, axis)))


def _link_kwargs(links) -> dict:
    n = len(links["mass"])
    return dict(
        linkMasses=links["mass"], linkCollisionShapeIndices=links["shape"], linkVisualShapeIndices=[-1] * n,
        linkPositions=links["pos"], linkOrientations=links["orn"],
        linkInertialFramePositions=links["ipos"], linkInertialFrameOrientations=links["iorn"],
        linkParentIndices=links["parent"], linkJointTypes=links["type"], linkJointAxis=links["axis"],
    )


def _collides(m, g: int) -> bool:
    """Whether geom ``g`` can touch anything: its bits, or an explicit ``<pair>`` naming it."""
    return bool(m.geom_contype[g] or m.geom_conaffinity[g]) or g in _paired(m)


def _paired(m) -> set[int]:
    return {int(g) for g in m.pair_geom1[:m.npair]} | {int(g) for g in m.pair_geom2[:m.npair]}


def _mj_pair(m, g1: int, g2: int) -> bool:
    """MuJoCo's dynamic filter: two geoms may touch when either's contype meets the other's conaffinity."""
    return bool((m.geom_contype[g1] & m.geom_conaffinity[g2]) or (m.geom_contype[g2] & m.geom_conaffinity[g1]))


def _filter_world_pairs(m, worlds: list[tuple[int, list[int]]], robot: int, body_link: np.ndarray,
                        client: int) -> None:
    """Switch off each world-body/link pair whose geoms MuJoCo never lets touch. Bullet collides
    every shape by default: gymnasium's cart-poles (contype 0 everywhere) had their cart and pole
    inside the rail from the first step, thrown at Bullet's 100 rad/s velocity clamp, and the
    penetration left in the contact cache made each episode's first step depend on the one before.
    Per link, a pair collides when any geom of the link may touch any geom of the world body
    (world bodies are split by their bits, links are not: a link mixing bits is approximate). An
    explicit ``<pair>`` lets its two geoms touch whatever their bits say; an ``<exclude>`` of the
    world and a body keeps them apart whatever the bits and pairs say (MuJoCo's order)."""
    pairs = {(int(a), int(b)) for a, b in zip(m.pair_geom1[:m.npair], m.pair_geom2[:m.npair])}
    pairs |= {(b, a) for a, b in pairs}
    excluded = {int(s) & 0xFFFF for s in m.exclude_signature[:m.nexclude] if int(s) >> 16 == 0}
    for world, geoms in worlds:
        for b in range(1, m.nbody):
            if body_link[b] == -2:  # a free object: crosssim.engines.pybullet_objects filters its pairs
                continue
            own = _body_geoms(m, b)
            if own and (b in excluded or not any(_mj_pair(m, gw, g) or (gw, g) in pairs for gw in geoms for g in own)):
                pybullet.setCollisionFilterPair(world, robot, -1, int(body_link[b]), 0, physicsClientId=client)


def _filter_self_pairs(m, robot: int, body_link: np.ndarray, client: int) -> None:
    """Switch off every link pair whose bodies MuJoCo never lets touch (crosssim.engines.features:
    the body filter, then the bits). A body pair MuJoCo lets touch keeps Bullet's self-collision
    (the inventory refuses a pair where only some geoms may touch, and a body with its parent,
    which a Bullet multibody never collides)."""
    touching = {(b1, b2) for b1, b2, _, _ in self_contacts(m)}
    bodies = [b for b in range(1, m.nbody) if geoms_of(m, b) and body_link[b] != -2]  # -2: a free object's own body
    for k, b1 in enumerate(bodies):
        for b2 in bodies[k + 1:]:
            if (b1, b2) not in touching:
                pybullet.setCollisionFilterPair(robot, robot, int(body_link[b1]), int(body_link[b2]), 0,
                                                physicsClientId=client)


def _body_geoms(m, b: int) -> list[int]:
    return [g for g in range(m.body_geomadr[b], m.body_geomadr[b] + m.body_geomnum[b]) if _collides(m, g)]


def _link_friction(m, b: int, mus: dict, floor_friction: float) -> float | None:
    """The link's friction: MuJoCo's for its contacts with the world (crosssim.engines.features:
    max(mu_a, mu_b) or the higher priority's, a pair's own, 0 for condim 1), as Bullet multiplies
    it by the world bodies' 1. One per link: the inventory refuses a body whose contacts differ."""
    if not _body_geoms(m, b):
        return None
    return mus.get(b, floor_friction)


def _heightfield_body(m, g: int, client: int) -> int:
    """World geom ``g``'s height field as a static Bullet height field. MuJoCo's field spans
    [-rx, rx] x [-ry, ry] with ncol samples along x and nrow along y (data row-major, y rows),
    elevation data x top above the geom frame; Bullet's is centred on its samples' mid-height, so
    the body sits that much higher. (MuJoCo's base box below the field has no Bullet counterpart:
    the surface is the same, a body can only pass below it from the side.)"""
    h = int(m.geom_dataid[g])
    nrow, ncol = int(m.hfield_nrow[h]), int(m.hfield_ncol[h])
    rx, ry, top, _ = map(float, m.hfield_size[h])
    data = np.asarray(m.hfield_data[m.hfield_adr[h]:m.hfield_adr[h] + nrow * ncol], dtype=float)
    shape = pybullet.createCollisionShape(
        pybullet.GEOM_HEIGHTFIELD, meshScale=[2 * rx / (ncol - 1), 2 * ry / (nrow - 1), top],
        heightfieldData=list(map(float, data)), numHeightfieldRows=ncol, numHeightfieldColumns=nrow,
        physicsClientId=client)
    mid = quat_rotate(m.geom_quat[g], np.array([0.0, 0.0, 0.5 * (data.min() + data.max()) * top]))
    return pybullet.createMultiBody(0, shape, -1, list(map(float, m.geom_pos[g] + mid)), xyzw(m.geom_quat[g]),
                                    physicsClientId=client)


def _shape_array(m, geoms: list[int], mesh_dir: Path, client: int, offset=np.zeros(3)) -> int:
    """One PyBullet compound collision shape for MuJoCo geoms, poses in the link frame."""
    if not geoms:
        return -1
    kw = dict(shapeTypes=[], radii=[], halfExtents=[], lengths=[], fileNames=[], meshScales=[], planeNormals=[],
              collisionFramePositions=[], collisionFrameOrientations=[])
    for g in geoms:
        t, size = int(m.geom_type[g]), m.geom_size[g]
        entry = dict(radius=0.0, half=[0.0] * 3, length=0.0, file="", normal=[0, 0, 1])
        if t == GEOM.mjGEOM_PLANE:
            kind = pybullet.GEOM_PLANE
        elif t == GEOM.mjGEOM_SPHERE:
            kind, entry["radius"] = pybullet.GEOM_SPHERE, float(size[0])
        elif t == GEOM.mjGEOM_CAPSULE:
            kind, entry["radius"], entry["length"] = pybullet.GEOM_CAPSULE, float(size[0]), 2 * float(size[1])
        elif t == GEOM.mjGEOM_CYLINDER:
            kind, entry["radius"], entry["length"] = pybullet.GEOM_CYLINDER, float(size[0]), 2 * float(size[1])
        elif t == GEOM.mjGEOM_BOX:
            kind, entry["half"] = pybullet.GEOM_BOX, list(map(float, size))
        elif t == GEOM.mjGEOM_ELLIPSOID:  # Bullet has no ellipsoid: the enclosing-radius sphere
            kind, entry["radius"] = pybullet.GEOM_SPHERE, float(max(size))
        elif t == GEOM.mjGEOM_MESH:
            kind, entry["file"] = pybullet.GEOM_MESH, str(write_mesh_obj(m, int(m.geom_dataid[g]), mesh_dir))
        else:
            raise EngineFailure(f"pybullet: geom type {t} of geom {g} is not supported")
        kw["shapeTypes"].append(kind)
        kw["radii"].append(entry["radius"])
        kw["halfExtents"].append(entry["half"])
        kw["lengths"].append(entry["length"])
        kw["fileNames"].append(entry["file"])
        kw["meshScales"].append([1.0, 1.0, 1.0])
        kw["planeNormals"].append(entry["normal"])
        kw["collisionFramePositions"].append(list(map(float, m.geom_pos[g] + offset)))
        kw["collisionFrameOrientations"].append(xyzw(m.geom_quat[g]))
    return pybullet.createCollisionShapeArray(**kw, physicsClientId=client)


def implicit_damping(m, c: CanonicalModel, robot: int, joints: Joints, bullet_steps: int, client: int) -> np.ndarray:
    """Joint damping [N m s/rad] the adapter applies as explicit torque -d qd: MuJoCo's own, except
    where the explicit step would be unstable (dt d / (M_jj + armature) > 0.5 at the model's first
    pose: Fetch's base slides hold it in place with 1e11): there d / (1 + 2 dt d / (M_jj + armature)),
    at most (M_jj + armature) / 2 dt, which halves the joint's velocity every step (the implicit
    step's d / (1 + dt d / I) stops it in one, and coupled joints then overshoot: Fetch's base flew off
    in Push)."""
    d = m.dof_damping[c.joint_dofadr].copy()
    dt = float(m.opt.timestep) / bullet_steps
    if c.free_base or joints.balls or not len(d) or not (d > 0).any():  # the mass matrix here is the joints' alone
        return d
    pb = dict(physicsClientId=client)
    movable = [j for j in range(pybullet.getNumJoints(robot, **pb))
               if pybullet.getJointInfo(robot, j, **pb)[2] != pybullet.JOINT_FIXED]
    q = [pybullet.getJointState(robot, j, **pb)[0] for j in movable]
    M = np.array(pybullet.calculateMassMatrix(robot, q, **pb))
    inertia = np.array([M[movable.index(int(link)), movable.index(int(link))] for link in joints.links])
    inertia = inertia + m.dof_armature[c.joint_dofadr]
    stiff = dt * d / inertia > 0.5
    d[stiff] = d[stiff] / (1.0 + 2.0 * dt * d[stiff] / inertia[stiff])  # at most I / 2 dt: halves qd per step
    return d
