"""Building a PhysX world (SAPIEN scene with one articulation: several trees under the world hang
from one fixed world link) from MuJoCo's compiled model.

See crosssim.engines.physx for the mapping; this module only constructs, it never steps.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

with warnings.catch_warnings():  # SAPIEN warns that it found no Vulkan; the CPU system never uses it
    warnings.simplefilter("ignore", UserWarning)
    import sapien
    import sapien.physx as px

from crosssim.engines.settings import EngineProfile, PhysXSettings, settings_of
from crosssim.errors import EngineFailure
from crosssim.engines.features import bits_touch, body_filtered, body_friction, contact_geoms, geoms_of
from crosssim.scene import element_name, write_mesh_obj

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


def to_pose(pos, quat=(1.0, 0.0, 0.0, 0.0)) -> sapien.Pose:
    return sapien.Pose(np.asarray(pos, dtype=np.float32), np.asarray(quat, dtype=np.float32))


def _axis_frame(anchor, axis) -> sapien.Pose:
    """Joint frame at ``anchor`` whose x axis is ``axis`` (PhysX joints act along/about x)."""
    x = np.asarray(axis, float) / np.linalg.norm(axis)
    helper = np.array([0.0, 0.0, 1.0]) if abs(x[2]) < 0.9 else np.array([1.0, 0.0, 0.0])
    y = np.cross(helper, x)
    y /= np.linalg.norm(y)
    R = np.stack([x, y, np.cross(x, y)], axis=1)
    return to_pose(anchor, _matrix_to_quat(R))


def refuse_unsupported(m, scene: Path) -> None:
    """One clear line for what this adapter cannot build beyond the feature inventory (tendons,
    equalities: crosssim.engines.features; the canonical model refuses ball joints)."""
    roots = [b for b in range(1, m.nbody) if m.body_parentid[b] == 0]
    free = [b for b in roots if any(int(m.jnt_type[j]) in (int(JNT.mjJNT_FREE), int(JNT.mjJNT_BALL))
                                    for j in range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]))]
    if len(roots) > 1 and free:
        raise EngineFailure(f"physx cannot build free body '{element_name(m, mujoco.mjtObj.mjOBJ_BODY, free[-1])}' in "
                            f"{scene.name} ({len(roots)} bodies under the world): the physx engine hangs every tree "
                            "from one fixed world link, so none may float (free objects are built in pybullet)")
    # Ball joints: crosssim.engines.physx_base builds a base of slides and a ball, refuses the rest.


def build_world(m, profile: EngineProfile, mesh_dir: Path) -> tuple[PhysXWorld, np.ndarray, float, np.ndarray]:
    """A new PhysX world holding the model's articulation: (world, PhysX qpos index of each
    canonical joint, floor friction, body material friction). Built step by step: the scene, the
    ground, each body's links and joints with its mass and contact shapes, the articulation, then
    the joints' armature and passive drives."""
    s = settings_of(profile, PhysXSettings)
    scene, system = _new_scene(m, s)
    groups = _collision_groups(m, _parent_filter(m))
    mus = body_friction(m)
    floor_mu = _add_ground(m, scene, mesh_dir, groups, mus)
    # A free joint, or a base of slides and a ball (physx_base; any other ball is refused before).
    free = any(int(m.jnt_type[j]) in (int(JNT.mjJNT_FREE), int(JNT.mjJNT_BALL)) for j in range(m.njnt))
    tree = _Links()
    body_mu = np.full(m.nbody - 1, np.nan)
    root = None
    if not free:  # a fixed root at the world origin carries the first body's joints (or weld)
        root = tree.new_link(None, "world")
        _carrier(root)
        root.joint.type = "fixed"
    for b in range(1, m.nbody):
        link = _body_links(m, b, tree, tree.links_of_body.get(int(m.body_parentid[b]), root), free)
        link.mass = float(m.body_mass[b])
        link.cmass_local_pose = to_pose(m.body_ipos[b], m.body_iquat[b])
        link.inertia = np.asarray(m.body_inertia[b], dtype=np.float32)
        body_mu[b - 1] = _attach_body_shapes(m, b, link, floor_mu, mus, groups, mesh_dir)
        tree.links_of_body[b] = link
    art = _add_articulation(m, scene, tree.entities, free, s)
    qindex, joints = _set_joint_drives(m, art, tree.joint_of)
    world = PhysXWorld(scene=scene, system=system, articulation=art, joints=joints,
                       body_links=[tree.links_of_body[b] for b in range(1, m.nbody)])
    return world, qindex, floor_mu, body_mu


def _new_scene(m, s: PhysXSettings) -> tuple[sapien.Scene, px.PhysxCpuSystem]:
    """A CPU PhysX scene with the model's gravity and timestep and the profile's solver."""
    # Scene settings are global in SAPIEN and read when a system is created.
    px.set_scene_config(gravity=np.asarray(m.opt.gravity, dtype=np.float32),
                        enable_tgs=s.solver == "tgs", enable_enhanced_determinism=True)
    px.set_shape_config(contact_offset=s.contact_offset, rest_offset=s.rest_offset)
    system = px.PhysxCpuSystem()
    scene = sapien.Scene([system])
    system.timestep = float(m.opt.timestep)
    return scene, system


def _add_ground(m, scene: sapien.Scene, mesh_dir: Path, groups: np.ndarray, mus: dict) -> float:
    """The world body's geoms as one static actor; returns the floor's friction (1 without one):
    the world geoms' largest, lowered to the lowest friction a body has against the world (a
    frictionless condim-1 contact: 0) so that every body's material can make the average."""
    world_geoms = [g for g in range(m.ngeom) if m.geom_bodyid[g] == 0 and _collides(m, g)]
    floor_mu = float(max((m.geom_friction[g, 0] for g in world_geoms), default=1.0))
    floor_mu = min(floor_mu, min(mus.values(), default=floor_mu))
    floor_mat = px.PhysxMaterial(floor_mu, floor_mu, 0.0)
    if world_geoms:
        ground = px.PhysxRigidStaticComponent()
        for g in world_geoms:
            for shape in _shapes(m, g, floor_mat, mesh_dir, groups[g]):
                ground.attach(shape)
        entity = sapien.Entity()
        entity.add_component(ground)
        scene.add_entity(entity)
    return floor_mu


class _Links:
    """The articulation's links as they are made: entities in creation order, each body's link,
    each MuJoCo joint's PhysX joint."""

    def __init__(self):
        self.entities: list = []
        self.links_of_body: dict[int, px.PhysxArticulationLinkComponent] = {}
        self.joint_of: dict[int, px.PhysxArticulationJoint] = {}

    def new_link(self, parent, name: str) -> px.PhysxArticulationLinkComponent:
        link = px.PhysxArticulationLinkComponent(parent)
        link.name = name
        entity = sapien.Entity()
        entity.name = name
        entity.add_component(link)
        self.entities.append(entity)
        return link


def _carrier(link) -> None:
    """A link that only carries a joint: as light as PhysX allows."""
    link.mass, link.inertia = CARRIER_MASS, np.full(3, 1e-9, dtype=np.float32)
    link.cmass_local_pose = to_pose(np.zeros(3))


def _body_links(m, b: int, tree: _Links, parent, free: bool):
    """Body ``b``'s link(s) under ``parent``: the floating root, a fixed link for a welded body, or
    one link per joint (carriers, then the body's own); returns the body's link."""
    name = element_name(m, mujoco.mjtObj.mjOBJ_BODY, b)
    body_pose = to_pose(m.body_pos[b], m.body_quat[b])
    if free and b == 1:
        link = tree.new_link(None, name)
        link.joint.type = "undefined"  # floating root
        return link
    jnts = list(range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]))
    if not jnts:
        link = tree.new_link(parent, name)
        link.joint.type = "fixed"
        link.joint.pose_in_parent, link.joint.pose_in_child = body_pose, to_pose(np.zeros(3))
        return link
    prev, link = parent, None
    for k, j in enumerate(jnts):
        last = k == len(jnts) - 1
        link = tree.new_link(prev, name if last else f"{name}/{k}")
        if not last:
            _carrier(link)
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
        tree.joint_of[j] = link.joint
        prev = link
    return link


def _attach_body_shapes(m, b: int, link, floor_mu: float, mus: dict, groups: np.ndarray, mesh_dir: Path) -> float:
    """Body ``b``'s contact shapes on ``link``; returns its material friction (NaN without shapes)."""
    geoms = [g for g in range(m.body_geomadr[b], m.body_geomadr[b] + m.body_geomnum[b]) if _collides(m, g)]
    if not geoms:
        return float("nan")
    # PhysX averages the two materials' coefficients. With the floor at mu_f, a body material of
    # 2 mu - mu_f makes the average mu, the body's friction against the world as MuJoCo combines it
    # (crosssim.engines.features.body_friction: the max, a priority's, a pair's own, 0 for condim 1).
    mu = mus.get(b, max(float(max(m.geom_friction[g, 0] for g in geoms)), floor_mu))
    body_mu = 2 * mu - floor_mu
    mat = px.PhysxMaterial(body_mu, body_mu, 0.0)
    for g in geoms:
        for shape in _shapes(m, g, mat, mesh_dir, groups[g]):
            link.attach(shape)
    return body_mu


def _add_articulation(m, scene: sapien.Scene, entities: list, free: bool, s: PhysXSettings):
    """The links into the scene, undamped and unclamped, as one articulation with the profile's
    solver iterations; returns the articulation."""
    for entity in entities:
        link = entity.find_component_by_type(px.PhysxArticulationLinkComponent)
        link.linear_damping = link.angular_damping = 0.0
        link.max_linear_velocity = link.max_angular_velocity = BIG
        link.disable_gravity = False
    entities[0].pose = to_pose(m.body_pos[1], m.body_quat[1]) if free else to_pose(np.zeros(3))
    for entity in entities:
        scene.add_entity(entity)
    art = entities[0].find_component_by_type(px.PhysxArticulationLinkComponent).articulation
    art.set_solver_position_iterations(s.position_iterations)
    art.set_solver_velocity_iterations(s.velocity_iterations)
    art.set_sleep_threshold(0.0)
    return art


def _set_joint_drives(m, art, joint_of: dict) -> tuple[np.ndarray, list]:
    """Armature, no friction, and MuJoCo's passive spring and damping as each joint's drive;
    returns (PhysX qpos index of each canonical joint, its PhysX joint)."""
    canonical_joints = physx_joints(m)
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
    return qindex, joints


def physx_joints(m) -> list[int]:
    """MuJoCo joints that are PhysX joints: every hinge and slide but a floating root's."""
    free = any(int(m.jnt_type[j]) in (int(JNT.mjJNT_FREE), int(JNT.mjJNT_BALL)) for j in range(m.njnt))
    return [j for j in range(m.njnt) if int(m.jnt_type[j]) in (int(JNT.mjJNT_HINGE), int(JNT.mjJNT_SLIDE))
            and not (free and int(m.jnt_bodyid[j]) == 1)]


def _collides(m, g: int) -> bool:
    """Whether geom ``g`` can touch anything: its bits, or an explicit ``<pair>`` naming it."""
    return bool(m.geom_contype[g] or m.geom_conaffinity[g]) or g in contact_geoms(m)


def _collision_groups(m, ignore: np.ndarray) -> np.ndarray:
    """PhysX collision groups of each geom, (ngeom, 4): MuJoCo's contype and conaffinity (PhysX
    lets two shapes touch when g0 of one meets g1 of the other, as MuJoCo's bits), plus a bit of
    its own per ``<pair>`` (g0 of geom1, g1 of geom2) that no geom's bits use; the ignore bits of
    its body (g2, ``_parent_filter`` and ``<exclude>``) with g3 = 1: shapes sharing an ignore bit
    and g3 never touch."""
    groups = np.zeros((m.ngeom, 4), dtype=np.int64)
    groups[:, 0], groups[:, 1] = m.geom_contype, m.geom_conaffinity
    used = int(np.bitwise_or.reduce(np.concatenate([m.geom_contype, m.geom_conaffinity]).astype(np.int64)))
    free = [1 << k for k in range(32) if not used & (1 << k)]
    if m.npair > len(free):
        raise EngineFailure(f"physx cannot build <pair> contact '{element_name(m, mujoco.mjtObj.mjOBJ_PAIR, len(free))}': "
                            f"{m.npair} pairs and {32 - len(free)} contype/conaffinity bits in use leave no free "
                            "collision bit for it (PhysX has 32)")
    for p in range(m.npair):
        groups[int(m.pair_geom1[p]), 0] |= free[p]
        groups[int(m.pair_geom2[p]), 1] |= free[p]
    groups[:, 2] = ignore[m.geom_bodyid]
    groups[:, 3] = groups[:, 2] != 0
    return groups


def _parent_filter(m) -> np.ndarray:
    """Per body, PhysX ignore-group bits (collision group 2) that keep apart the body pairs MuJoCo
    never collides (crosssim.engines.features.body_filtered: one weld body, a weld body and its
    weld parent, ``<exclude>``) where PhysX would: PhysX filters only a link and its parent link,
    and a body with several joints hangs from its parent through carrier links (Humanoid's thighs,
    three hinges each, overlap the pelvis), two bodies welded to one parent are not adjacent links.
    One bit per such pair whose geoms' bits could touch, shared by both bodies; the world's
    ``<exclude>``s too."""
    ignore = np.zeros(m.nbody, dtype=np.int64)
    pairs = [(b1, b2) for b1 in range(1, m.nbody) for b2 in range(b1 + 1, m.nbody)
             if body_filtered(m, b1, b2) and not _adjacent_links(m, b1, b2)
             and any(bits_touch(m, g1, g2) for g1 in geoms_of(m, b1) for g2 in geoms_of(m, b2))]
    pairs += [(0, int(s) & 0xFFFF) for s in m.exclude_signature[:m.nexclude] if int(s) >> 16 == 0]
    if len(pairs) > 31:
        raise EngineFailure(f"physx cannot build the collision filter of {len(pairs)} body pairs that MuJoCo keeps "
                            f"apart ({element_name(m, mujoco.mjtObj.mjOBJ_BODY, pairs[31][0])} and "
                            f"{element_name(m, mujoco.mjtObj.mjOBJ_BODY, pairs[31][1])} the 32nd): PhysX has 31 ignore bits")
    for k, (b1, b2) in enumerate(pairs):
        ignore[b1] |= 1 << k
        ignore[b2] |= 1 << k
    return ignore


def _adjacent_links(m, b1: int, b2: int) -> bool:
    """Whether PhysX's articulation filters the two bodies itself: a body on at most one joint is
    one link whose parent link is its parent body's."""
    child, parent = (b2, b1) if m.body_parentid[b2] == b1 else (b1, b2)
    return m.body_parentid[child] == parent and m.body_jntnum[child] <= 1


def _shapes(m, g: int, material, mesh_dir: Path, groups) -> list:
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
        path = write_mesh_obj(m, int(m.geom_dataid[g]), mesh_dir)
        shape = px.PhysxCollisionShapeConvexMesh(str(path), np.ones(3, dtype=np.float32), material)
    elif t == GEOM.mjGEOM_HFIELD:  # the world's only (crosssim.engines.physx.cannot_build): a static mesh
        vertices, triangles = _heightfield_mesh(m, int(m.geom_dataid[g]))
        shape = px.PhysxCollisionShapeTriangleMesh(vertices, triangles, np.ones(3, dtype=np.float32), material)
    else:
        name = element_name(m, mujoco.mjtObj.mjOBJ_GEOM, g)
        raise EngineFailure(f"physx: geom type {t} of geom {name} is not supported by the physx engine")
    quat = m.geom_quat[g]
    pose = to_pose(m.geom_pos[g], quat)
    shape.local_pose = pose * to_pose(np.zeros(3), X_TO_Z) if along_z else pose
    shape.set_collision_groups([int(x) for x in groups])
    return [shape]


def _heightfield_mesh(m, h: int) -> tuple[np.ndarray, np.ndarray]:
    """Height field ``h`` as the triangles MuJoCo collides with: ncol samples along x over [-rx, rx],
    nrow along y over [-ry, ry] (data row-major, y rows), elevation data x top; two triangles a
    cell. (MuJoCo's base box below the field is not built: the surface is the same.)"""
    nrow, ncol = int(m.hfield_nrow[h]), int(m.hfield_ncol[h])
    rx, ry, top, _ = map(float, m.hfield_size[h])
    data = np.asarray(m.hfield_data[m.hfield_adr[h]:m.hfield_adr[h] + nrow * ncol], dtype=float).reshape(nrow, ncol)
    x, y = np.meshgrid(np.linspace(-rx, rx, ncol), np.linspace(-ry, ry, nrow))
    vertices = np.stack([x.ravel(), y.ravel(), data.ravel() * top], axis=1).astype(np.float32)
    k = (np.arange(nrow - 1)[:, None] * ncol + np.arange(ncol - 1)[None, :]).ravel()
    triangles = np.concatenate([np.stack([k, k + 1, k + ncol + 1], 1), np.stack([k, k + ncol + 1, k + ncol], 1)])
    return vertices, triangles.astype(np.uint32)


def _matrix_to_quat(R: np.ndarray) -> np.ndarray:
    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(R, dtype=float).ravel())
    return q
