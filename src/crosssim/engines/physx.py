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

import shutil
import tempfile
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

with warnings.catch_warnings():  # SAPIEN warns that it found no Vulkan; the CPU system never uses it
    warnings.simplefilter("ignore", UserWarning)
    import sapien.physx  # noqa: F401  (imported first here, under the filter; physx_build uses it)

from crosssim.engines.audit import AuditRow
from crosssim.engines.capabilities import EngineCapabilities
from crosssim.engines.common import compiled_canonical
from crosssim.engines.contract import EngineBase
from crosssim.engines.features import Use, refuse_unbuilt
from crosssim.engines.mujoco import audit_rows
from crosssim.engines.physx_base import SlideBallBase, from_root, slide_ball_base, to_root
from crosssim.engines.physx_build import JNT, PhysXWorld, build_world, physx_joints, refuse_unsupported, to_pose
from crosssim.engines.physx_hull import refuse_loose_hulls
from crosssim.engines.settings import EngineProfile, PhysXSettings, settings_of
from crosssim.errors import EngineFailure
from crosssim.frame import InitialState, SimFrame, cross3, quat_rotate
from crosssim.scene import CanonicalModel
from crosssim.variant import CompiledModel

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
    cidx: np.ndarray | None = None
    """Canonical index of each PhysX joint (``qindex`` in the same order): every canonical joint
    but the slides of a slide-and-ball base, which the floating root stands for."""
    base: SlideBallBase | None = None
    """The mapping of a base of slides and a ball joint onto the floating root (physx_base)."""


@dataclass(eq=False)
class PhysXState:
    """One state of a PhysXModel, owned by the caller (never the model itself): a world of its own."""

    owner: weakref.ref
    world: PhysXWorld
    torques: np.ndarray
    """Torques applied in the last step [N m or N], canonical joint order."""
    time: float = 0.0


class EnginePhysX(EngineBase):
    """PhysX 5 articulation on the CPU via SAPIEN; joint drives carry only the model's passive
    spring and damping (zero targets), crosssim's torques are joint efforts."""

    name = "physx"
    # Each state is a world of its own (a PhysX system holds one world, and packing one out and
    # back in was measured to change the next step by 1e-8..1e-4 on Hopper: the solver's caches
    # are not in the pack). A world costs ~8 ms to build; stepping states in turn costs nothing,
    # so a lockstep batch is one world per episode (bench/bench_batch_engines.py: 1.9x on Hopper).
    capabilities = EngineCapabilities(reset_into=True, concurrent_states=True, ball_joints=True)
    settings_model = PhysXSettings

    def load(self, compiled: CompiledModel, profile: EngineProfile) -> PhysXModel:
        m = compiled.mj  # the variant is in the model PhysX is built from
        drop = settings_of(profile, PhysXSettings).torsional == "drop"
        refuse_unbuilt(m, compiled.scene, self.name,
                       lambda use: None if use.feature == "condim" and drop else cannot_build(use))
        refuse_unsupported(m, compiled.scene)
        c = compiled_canonical(compiled)
        base = slide_ball_base(m, c, compiled.scene.name)  # or one line why this ball joint is not built
        mesh_dir = Path(tempfile.mkdtemp(prefix="crosssim-physx-"))  # meshes as .obj, written once per model
        try:
            refuse_loose_hulls(m, compiled.scene, mesh_dir, settings_of(profile, PhysXSettings).hull_tolerance)
            world, qindex, floor_mu, body_mu = build_world(m, profile, mesh_dir)
        except BaseException:
            shutil.rmtree(mesh_dir, ignore_errors=True)
            raise
        canonical_joints = [j for j in range(m.njnt) if int(m.jnt_type[j]) in (int(JNT.mjJNT_HINGE),
                                                                                  int(JNT.mjJNT_SLIDE))]
        offset = np.array([m.qpos0[m.jnt_qposadr[j]] for j in canonical_joints])
        cidx = np.array([canonical_joints.index(j) for j in physx_joints(m)], dtype=int)
        return PhysXModel(canonical=c, mj=m, profile=profile, mesh_dir=mesh_dir, world=world, qindex=qindex,
                          joint_offset=offset, floor_mu=floor_mu, body_mu=body_mu, dt=float(world.system.get_timestep()),
                          cidx=cidx, base=base)

    # -- contract ---------------------------------------------------------------------------
    def reset(self, model: PhysXModel, initial: InitialState) -> PhysXState:
        if model.closed:
            raise EngineFailure("physx: this model was closed")
        state = PhysXState(weakref.ref(model), build_world(model.mj, model.profile, model.mesh_dir)[0], np.zeros(model.canonical.joint_count))
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
        q[model.qindex] = (qpos[c.joint_qposadr] - model.joint_offset)[model.cidx]
        qd[model.qindex] = qvel[c.joint_dofadr][model.cidx]
        if c.free_base or model.base is not None:
            pos, quat, lin, ang_body = ((qpos[:3], qpos[3:7] / np.linalg.norm(qpos[3:7]), qvel[:3], qvel[3:6])
                                        if model.base is None else to_root(model.base, qpos, qvel))
            root = state.world.body_links[0]
            art.set_root_pose(to_pose(pos, quat))
            ang = quat_rotate(quat, ang_body)
            com = pos + quat_rotate(quat, np.asarray(root.cmass_local_pose.p, float))
            art.set_root_linear_velocity(np.asarray(lin + cross3(ang, com - pos), dtype=np.float32))
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
        qf[model.qindex] = torques[model.cidx]
        for _ in range(n_substeps):
            art.set_qf(qf)  # held for the step; damping and spring are the drives'
            state.world.system.step()
            state.time += model.dt

    def joint_state(self, model: PhysXModel, state: PhysXState) -> tuple[np.ndarray, np.ndarray]:
        c, art = model.canonical, state.world.articulation
        qpos, qvel = np.zeros(c.nq), np.zeros(c.nv)
        qpos[c.joint_qposadr[model.cidx]] = np.asarray(art.get_qpos(), float)[model.qindex] + model.joint_offset[model.cidx]
        qvel[c.joint_dofadr[model.cidx]] = np.asarray(art.get_qvel(), float)[model.qindex]
        if c.free_base:
            pos, quat, lin, ang = _base(state.world)
            qpos[:3], qpos[3:7], qvel[:3] = pos, quat, lin
            qvel[3:6] = quat_rotate(quat * np.array([1, -1, -1, -1]), ang)
        elif model.base is not None:
            from_root(model.base, *_base(state.world), qpos, qvel)
        return qpos, qvel

    def frame(self, model: PhysXModel, state: PhysXState, *, contacts: bool = False) -> SimFrame:
        qpos, qvel = self.joint_state(model, state)
        pos, quat, lin, ang = _base(state.world)
        wrench = _contact_wrench(model, state.world) if contacts else np.zeros((0, 6))
        return SimFrame(time=state.time, qpos=qpos, qvel=qvel, base_pos=pos, base_quat=quat, base_lin_vel=lin,
                        base_ang_vel=ang, joint_torque=state.torques.copy(), body_ext_wrench=wrench)

    def audit(self, model: PhysXModel) -> list[AuditRow]:
        c, links, joints = model.canonical, model.world.body_links, model.world.joints

        def per_joint(read, rest=0.0):  # canonical order; a slide the floating root stands for has none
            out = np.full(c.joint_count, rest)
            out[model.cidx] = [read(j) for j in joints]
            return out

        lo = per_joint(lambda j: j.get_limits()[0][0], -np.inf) + model.joint_offset
        hi = per_joint(lambda j: j.get_limits()[0][1], np.inf) + model.joint_offset
        # Body-floor friction as PhysX combines it: the average of the two materials.
        body_mu = {c.body_names[k]: 0.5 * (model.body_mu[k] + model.floor_mu) for k in range(len(links))}
        geom_mu = np.array([body_mu.get(b, np.nan) if b != "world" else np.nan for b in c.geom_body])
        got = {
            "timestep": model.world.system.get_timestep(),
            "integrator": 0,  # PhysX integrates semi-implicit Euler
            "body_mass": [link.get_mass() for link in links],
            "body_inertia": [link.get_inertia() for link in links],
            "joint_range": np.stack([np.where(np.isfinite(lo), lo, np.nan), np.where(np.isfinite(hi), hi, np.nan)], 1),
            "joint_damping": per_joint(lambda j: j.get_damping()),
            "joint_armature": per_joint(lambda j: j.get_armature()[0]),
            "joint_frictionloss": None,
            "joint_stiffness": per_joint(lambda j: j.get_stiffness()),
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
        rows.append(AuditRow("gravity_z", "model", float(c.gravity[2]), float(model.world.system.config.gravity[2]),
                             1e-5, "this model's scene gravity (float32 in PhysX)"))
        return rows

    def close(self, model: PhysXModel) -> None:
        if not model.closed:
            model.closed = True
            model.world.scene.clear()
            shutil.rmtree(model.mesh_dir, ignore_errors=True)  # every state's world is built from it until now


CANNOT = {
    "tendon": "SAPIEN's fixed tendons are not reconciled here",
    "equality": "this adapter builds no PhysX constraints besides the articulation's joints",
    "ellipsoid": "PhysX has no ellipsoid shape (an enclosing sphere would be another robot)",
    "condim": "PhysX's torsional patch friction is not MuJoCo's; only sliding friction is built",
    "friction": "PhysX holds one friction material per body here",
    "self_parent": "a PhysX articulation never collides a link with its parent link",
}


def cannot_build(use: Use) -> str | None:
    """Why the physx column cannot build ``use`` (crosssim.engines.features), None where it does:
    pairs between the robot and the world (a collision bit of their own, the pair's friction in the
    body's material), excludes (ignore bits), height fields of the world (a triangle mesh), condim 1
    (friction 0), meshes (convex hulls, as MuJoCo collides them)."""
    if use.feature in ("pair", "hfield") and not use.world:
        return {"pair": "PhysX averages the two bodies' materials, so a robot-robot pair cannot have its own friction",
                "hfield": "a height field is built only on the world body (a static triangle mesh)"}[use.feature]
    return CANNOT.get(use.feature)


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
    mass = np.array([link.get_mass() for link in world.body_links])  # as built: a variant's mass_scale included
    com = (mass[:, None] * np.array(coms)).sum(0) / max(mass.sum(), 1e-12)
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
