"""EnginePyBullet: Bullet's Featherstone multibody, built from MuJoCo's compiled model.

PyBullet's own ``loadMJCF`` was measured to drop actuators, damping, armature and the timestep,
to recompute masses from its own density (Ant 182 kg instead of 0.91 kg), to put every link's
centre of mass at the body origin (HalfCheetah's thigh COM moves by 0.1 m) and to ignore joint
``ref`` (Hopper's torso starts at z = 2.5 m instead of 1.25 m). Those changes cannot all be
undone through ``changeDynamics`` (inertial frames are fixed at load time), so this adapter
reconciles at the root: it builds the multibody with ``createMultiBody`` from the canonical
model (bodies, inertial frames, joint anchors and axes, collision geoms; the steps are
crosssim.engines.pybullet_build), then reads every parameter back from PyBullet for the audit.
See docs/engines.md.

A PyBullet server holds one world, so the adapter's state (``PyBulletState``) is crosssim's own:
the simulated time, the torques last applied, and, while another state of the same model is in
the server, a Bullet ``saveState`` snapshot of this one. See ``EnginePyBullet._load``. A lockstep
batch runs on ``worlds_model``: one server per episode (crosssim.engines.pybullet_worlds).
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np
import pybullet

from crosssim.engines.audit import AuditRow
from crosssim.engines.capabilities import EngineCapabilities
from crosssim.engines.common import compiled_canonical
from crosssim.engines.contract import EngineBase
from crosssim.engines.features import Use, refuse_unbuilt
from crosssim.engines.mujoco import audit_rows
from crosssim.engines.pybullet_ball import check_balls, put_balls, read_balls
from crosssim.engines.pybullet_build import (_shape_array, add_world_bodies, body_inertia, configure_server, create_robot,
                                             implicit_damping, link_tree, set_joints, set_link_dynamics, xyzw)
from crosssim.engines.pybullet_objects import build_objects, damp_objects, put_objects, read_objects
from crosssim.engines.pybullet_worlds import PyBulletWorlds
from crosssim.engines.settings import EngineProfile, PyBulletSettings, settings_of
from crosssim.errors import EngineFailure
from crosssim.frame import InitialState, SimFrame, cross3, quat_rotate, quat_to_matrix, xyzw_to_wxyz
from crosssim.scene import CanonicalModel
from crosssim.variant import CompiledModel

GEOM = mujoco.mjtGeom


@dataclass
class PyBulletModel:
    canonical: CanonicalModel
    client: int
    robot: int
    profile: EngineProfile
    joint_link: np.ndarray
    """PyBullet joint index of each canonical joint."""
    joint_offset: np.ndarray
    """MuJoCo qpos minus PyBullet joint position (MuJoCo's joint ``ref``)."""
    body_link: np.ndarray
    """PyBullet link index of each canonical body (-1: the floating base)."""
    base_ipos: np.ndarray
    base_iquat: np.ndarray
    root_offset: np.ndarray
    """Root body frame origin in its PyBullet link frame (fixed-base robots)."""
    damping: np.ndarray
    link_mass: np.ndarray
    armature: str
    """'emulate' (mass-matrix compensation, fixed-base robots) or 'ignore'."""
    frictionloss: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """Dry friction torque per canonical joint as applied (zero-velocity motors)."""
    joint_armature: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """Armature per canonical joint as simulated (emulated or folded into inertia)."""
    limits: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    """Joint limits set in PyBullet (its own coordinates), NaN where unlimited."""
    floor: int | None = None
    snapshot: int = -1
    """Bullet snapshot of the world as built, restored at every reset: contact caches and solver
    warm starts never carry over from one episode to the next."""
    dt: float = 0.0
    """Bullet step [s] PyBullet was configured with: the physics step over ``bullet_steps``."""
    bullet_steps: int = 1
    """Bullet steps per crosssim physics step (profile ``substep_dt``)."""
    loaded: weakref.ref | None = None
    """The PyBulletState whose values are in the server now (weak: a state the caller dropped
    need not be saved when another one is loaded)."""
    saved: list = field(default_factory=list)
    """(weakref to a state, its snapshot id) for every state now kept as a snapshot; the
    snapshots of states their owners dropped are removed from the server at the next save."""
    balls: tuple = ()
    """(PyBullet link, qpos address, dof address) of each ball joint of the base: a spherical
    joint whose motor is switched off (crosssim.engines.pybullet_ball)."""
    source: tuple | None = None
    """(compiled model, profile) it was loaded from: ``worlds_model`` builds a batch's servers alike."""
    objects: list = field(default_factory=list)
    """Free objects, each its own multibody (crosssim.engines.pybullet_objects)."""


@dataclass(eq=False)
class PyBulletState:
    """One state of a PyBulletModel, owned by the caller (never the model itself)."""

    owner: weakref.ref
    """The model this state belongs to (a state of another model is refused)."""
    torques: np.ndarray
    """Torques applied in the last step [N m or N], canonical joint order."""
    time: float = 0.0
    """Simulated time since reset [s]."""
    constraint_force: np.ndarray | None = None
    """Generalized constraint force of the last physics step (contacts, joint limits, dry
    friction) [N m or N], PyBullet joint order; None after a reset. Armature emulation keeps
    it so that constraint forces see the rotor inertia (``_armature_compensation``)."""
    snapshot: int = -1
    """Bullet saveState id holding this state while another state is in the server; -1 while
    this state is the loaded one."""


class EnginePyBullet(EngineBase):
    """PyBullet in DIRECT mode (one physics server per model), velocity motors off."""

    name = "pybullet"
    # Interleaved states of one model are kept apart by restoring snapshots: correct (the contract
    # suite checks it), but each switch costs a save and a restore; a lockstep batch therefore runs
    # on ``worlds_model``, one server per episode, where nothing is switched.
    capabilities = EngineCapabilities(reset_into=True, concurrent_states=True, push=True, ball_joints=True,
                                      worlds=True)

    settings_model = PyBulletSettings

    def load(self, compiled: CompiledModel, profile: EngineProfile) -> PyBulletModel:
        s = settings_of(profile, PyBulletSettings)
        refuse_unbuilt(compiled.mj, compiled.scene, self.name,
                       lambda use: None if use.feature == "condim" and s.torsional == "drop" else cannot_build(use))
        c = compiled_canonical(compiled)
        m = compiled.mj  # the variant (perturbation, calibration) is in the model PyBullet is built from
        client = pybullet.connect(pybullet.DIRECT)
        # Mesh .obj files are read when their collision shapes are created, all inside _build.
        mesh_dir = Path(tempfile.mkdtemp(prefix="crosssim-pb-"))
        try:
            model = self._build(c, m, client, profile, mesh_dir)
            model.source = (compiled, profile)
            return model
        except Exception:
            pybullet.disconnect(client)
            raise
        finally:
            shutil.rmtree(mesh_dir, ignore_errors=True)

    def _build(self, c: CanonicalModel, m, client: int, profile: EngineProfile, mesh_dir: Path) -> PyBulletModel:
        """The multibody of ``m`` in server ``client``, step by step: server settings, world bodies,
        the robot's links and joints, their dynamics, then its joints' motors and limits. The order
        of the server calls is the order of Bullet's object ids: keep it."""
        s = settings_of(profile, PyBulletSettings)
        bullet_steps = configure_server(c, m, s, client)
        worlds, floor, floor_friction = add_world_bodies(m, mesh_dir, client)
        armature = s.armature
        if armature == "auto":
            armature = "inertia" if c.free_base or c.ball_joints else "emulate"
        check_balls(m, c, armature)
        # Principal inertia and its frame per body; with armature as inertia, each hinge's rotor
        # inertia joins the body's tensor about the joint axis (re-diagonalised).
        inertia = {b: body_inertia(m, b, armature == "inertia") for b in range(1, m.nbody)}
        tree = link_tree(c, m, inertia, mesh_dir, client)
        robot = create_robot(tree, client)
        set_link_dynamics(m, robot, tree.body_link, inertia, worlds, floor_friction, client)
        joints = set_joints(c, m, robot, tree.joint_link, client)
        link_mu = {b: pybullet.getDynamicsInfo(robot, int(tree.body_link[b]), physicsClientId=client)[1]
                   for b in range(1, m.nbody) if tree.body_link[b] != -2}
        objects = build_objects(m, client, robot, tree.body_link, worlds, inertia,
                                lambda geoms: _shape_array(m, geoms, mesh_dir, client), link_mu, c.path)
        model = PyBulletModel(
            canonical=c, client=client, robot=robot, profile=profile, joint_link=joints.links,
            joint_offset=joints.offset,
            body_link=tree.body_link[1:].copy(),
            base_ipos=m.body_ipos[1].copy(), base_iquat=np.asarray(inertia[1][1], dtype=float).copy(),
            root_offset=np.asarray(tree.body_anchor[1][1], dtype=float).copy(),
            damping=implicit_damping(m, c, robot, joints, bullet_steps, client),
            joint_armature=m.dof_armature[c.joint_dofadr].copy(),
            link_mass=np.array([m.body_mass[b] for b in range(1, m.nbody)]),
            armature=armature,
            frictionloss=joints.frictionloss,
            floor=floor,
            limits=joints.limits,
            balls=joints.balls,
            objects=objects,
        )
        model.snapshot = pybullet.saveState(physicsClientId=client)
        model.dt = float(pybullet.getPhysicsEngineParameters(physicsClientId=client)["fixedTimeStep"])
        model.bullet_steps = bullet_steps
        return model

    def worlds_ready(self, model: PyBulletModel) -> bool:
        """A batch gets a server per episode, built as this one was: only where that is cheap. A
        robot with mesh collision shapes (the G1: 1.6 s per server, most of it Bullet's hull of each
        mesh) runs one episode at a time; a server would cost more than batching saves."""
        if model.source is None:
            return False
        m = model.source[0].mj
        return not bool(np.any(m.geom_type == int(GEOM.mjGEOM_MESH)))

    def worlds_model(self, model: PyBulletModel, n: int) -> PyBulletWorlds | None:
        """``n`` servers built as ``model``'s was, one per episode of a lockstep batch (None where
        ``worlds_ready`` says a server costs too much)."""
        if not self.worlds_ready(model):
            return None
        members = []
        try:
            for _ in range(n):
                members.append(self.load(*model.source))
        except Exception:
            for m in members:
                self.close(m)
            raise
        return PyBulletWorlds(model, members)

    # -- contract ---------------------------------------------------------------------------
    def reset(self, model: PyBulletModel, initial: InitialState) -> PyBulletState:
        if isinstance(model, PyBulletWorlds):
            return self.reset(model.take(), initial)
        self._save_loaded(model)  # another live state keeps its values
        return self._put(model, PyBulletState(weakref.ref(model), np.zeros(model.canonical.joint_count)), initial)

    def reset_into(self, model: PyBulletModel, state: PyBulletState, initial: InitialState) -> PyBulletState:
        """Reuse ``state`` (the caller is done with it): its snapshot, if any, is dropped."""
        model = _member(model, state)
        self._check(model, state)
        self._drop_snapshot(model, state)
        if not self._is_loaded(model, state):
            self._save_loaded(model)
        state.torques, state.time, state.constraint_force = np.zeros(model.canonical.joint_count), 0.0, None
        return self._put(model, state, initial)

    def _put(self, model: PyBulletModel, state: PyBulletState, initial: InitialState) -> PyBulletState:
        """Load the built world into the server, set ``initial`` on it; ``state`` is the loaded one."""
        c, pb = model.canonical, dict(physicsClientId=model.client)
        qpos, qvel = np.asarray(initial.qpos, float), np.asarray(initial.qvel, float)
        pybullet.restoreState(stateId=model.snapshot, **pb)
        if c.free_base:
            pos, quat = qpos[:3], qpos[3:7] / np.linalg.norm(qpos[3:7])
            com = pos + quat_rotate(quat, model.base_ipos)
            com_quat = _quat_mul(quat, model.base_iquat)
            pybullet.resetBasePositionAndOrientation(model.robot, list(com), xyzw(com_quat), **pb)
            ang_world = quat_rotate(quat, qvel[3:6])
            lin_com = qvel[:3] + cross3(ang_world, com - pos)
            pybullet.resetBaseVelocity(model.robot, list(lin_com), list(ang_world), **pb)
        for k, link in enumerate(model.joint_link):
            pybullet.resetJointState(model.robot, int(link), float(qpos[c.joint_qposadr[k]] - model.joint_offset[k]),
                                     float(qvel[c.joint_dofadr[k]]), **pb)
        put_balls(model, qpos, qvel)
        put_objects(model.objects, qpos, qvel, model.client)
        model.loaded = weakref.ref(state)
        return state

    def _is_loaded(self, model: PyBulletModel, state: PyBulletState) -> bool:
        return model.loaded is not None and model.loaded() is state

    def _save_loaded(self, model: PyBulletModel) -> None:
        """Snapshot the state now in the server, if its owner still holds it."""
        for ref, snapshot in [e for e in model.saved if e[0]() is None]:  # owners dropped these
            pybullet.removeState(snapshot, physicsClientId=model.client)
            model.saved.remove((ref, snapshot))
        current = model.loaded() if model.loaded is not None else None
        if current is not None:
            current.snapshot = pybullet.saveState(physicsClientId=model.client)
            model.saved.append((weakref.ref(current), current.snapshot))
        model.loaded = None

    def _drop_snapshot(self, model: PyBulletModel, state: PyBulletState) -> None:
        if state.snapshot >= 0:
            pybullet.removeState(state.snapshot, physicsClientId=model.client)
            model.saved = [e for e in model.saved if e[1] != state.snapshot]
            state.snapshot = -1

    def _check(self, model: PyBulletModel, state: PyBulletState) -> None:
        if not isinstance(state, PyBulletState) or state.owner() is not model:
            raise EngineFailure(f"pybullet: {type(state).__name__} is not a state of this model; use reset(model, ...)")

    def _load(self, model: PyBulletModel, state: PyBulletState) -> None:
        """Make ``state`` the one in the server before it is read or stepped.

        Bullet keeps one world per server, and a model is one server. Several states of a model
        therefore take turns: the state leaving the server is saved (saveState keeps positions,
        velocities and the contact cache), the one arriving is restored from its snapshot and
        continues exactly as if it had been alone. One state at a time (every crossval episode)
        never saves or restores anything.
        """
        if self._is_loaded(model, state):
            return
        self._check(model, state)
        if state.snapshot < 0:
            raise EngineFailure("pybullet: this state's model was closed")
        self._save_loaded(model)
        pybullet.restoreState(stateId=state.snapshot, physicsClientId=model.client)
        self._drop_snapshot(model, state)
        model.loaded = weakref.ref(state)

    def push(self, model: PyBulletModel, state: PyBulletState, velocity: np.ndarray) -> None:
        """A uniform velocity added to the whole base moves its centre of mass by the same amount."""
        model = _member(model, state)
        if not model.canonical.free_base:  # a base on joints (slides, a ball) has no base velocity to reset
            raise EngineFailure("pybullet: pushes need a free-joint base; this robot's base moves on joints")
        self._load(model, state)
        pb = dict(physicsClientId=model.client)
        lin, ang = pybullet.getBaseVelocity(model.robot, **pb)
        pybullet.resetBaseVelocity(model.robot, list(np.asarray(lin) + velocity), list(ang), **pb)

    def step(self, model: PyBulletModel, state: PyBulletState, torques: np.ndarray, n_substeps: int = 1) -> None:
        model = _member(model, state)
        self._load(model, state)
        pb, c = dict(physicsClientId=model.client), model.canonical
        links = list(map(int, model.joint_link))
        torques = np.asarray(torques, dtype=float)
        state.torques = torques.copy()
        emulate = model.armature == "emulate" and model.joint_armature.any()
        q, qd = self._joint_arrays(model)
        for _ in range(n_substeps * model.bullet_steps):
            tau = torques - model.damping * qd - c.joint_stiffness * (q - c.joint_springref)
            if emulate:
                tau, M, h = self._armature_compensation(model, state, q, qd, tau)
            pybullet.setJointMotorControlArray(model.robot, links, pybullet.TORQUE_CONTROL, forces=list(tau), **pb)
            damp_objects(model.objects, model.client)
            pybullet.stepSimulation(**pb)
            state.time += model.dt
            qd_before = qd
            q, qd = self._joint_arrays(model)
            if emulate:  # what the constraints added this step: M qdd = tau' - h + f
                state.constraint_force = M @ ((qd - qd_before) / model.dt) - tau + h

    def _joint_arrays(self, model: PyBulletModel) -> tuple[np.ndarray, np.ndarray]:
        states = pybullet.getJointStates(model.robot, list(map(int, model.joint_link)), physicsClientId=model.client)
        if states is None:  # no joint besides a free base (a box): PyBullet answers None, not []
            return np.zeros(0), np.zeros(0)
        q = np.array([s[0] for s in states]) + model.joint_offset
        qd = np.array([s[1] for s in states])
        return q, qd

    def _armature_compensation(self, model, state, q, qd, tau):
        """Torques that make PyBullet's accelerations those of M + diag(armature); also M and h.

        Wanted (MuJoCo): (M + A) qdd = tau - h + f, f the constraint forces (contacts, limits,
        dry friction). PyBullet: M qdd = tau' - h + f. So tau' = h - f + M (M + A)^-1 (tau - h + f).
        Bullet solves f inside its step, so the last step's f stands in for it: exact without
        constraints; under a sustained load (standing, pushing off) the static torque reaches
        the ground in full. Without the f terms a joint held tau M (M + A)^-1 statically, 1/15
        of the policy's torque on Hopper, whose armature (1 kg m^2) dwarfs its links' inertia:
        its agents fell within 0.9 s (docs/engines.md). Fixed-base robots only: a floating base
        has no joint torque to carry the compensation of its six base coordinates.
        """
        pb = dict(physicsClientId=model.client)
        pq = list(q - model.joint_offset)
        M = np.array(pybullet.calculateMassMatrix(model.robot, pq, **pb))
        h = np.array(pybullet.calculateInverseDynamics(model.robot, pq, list(qd), [0.0] * len(pq), **pb))
        A = np.diag(model.joint_armature)
        f = state.constraint_force if state.constraint_force is not None else np.zeros(len(pq))
        return h - f + M @ np.linalg.solve(M + A, tau - h + f), M, h

    def joint_state(self, model: PyBulletModel, state: PyBulletState) -> tuple[np.ndarray, np.ndarray]:
        model = _member(model, state)
        self._load(model, state)
        c = model.canonical
        q, qd = self._joint_arrays(model)
        qpos, qvel = np.zeros(c.nq), np.zeros(c.nv)
        qpos[c.joint_qposadr], qvel[c.joint_dofadr] = q, qd
        read_balls(model, qpos, qvel)
        read_objects(model.objects, qpos, qvel, model.client)
        if c.free_base:
            base = self._base(model)
            qpos[:3], qpos[3:7], qvel[:3] = base[0], base[1], base[2]
            qvel[3:6] = quat_to_matrix(base[1]).T @ base[3]
        return qpos, qvel

    def _base(self, model: PyBulletModel):
        """Root body frame pose and velocity (PyBullet reports the COM frame)."""
        pb = dict(physicsClientId=model.client)
        com, com_orn = pybullet.getBasePositionAndOrientation(model.robot, **pb)
        lin, ang = pybullet.getBaseVelocity(model.robot, **pb)
        com_quat = xyzw_to_wxyz(com_orn)
        quat = _quat_mul(com_quat, _quat_conj(model.base_iquat))
        pos = np.asarray(com) - quat_rotate(quat, model.base_ipos)
        ang = np.asarray(ang)
        lin = np.asarray(lin) + cross3(ang, pos - np.asarray(com))
        return pos, quat, lin, ang

    def frame(self, model: PyBulletModel, state: PyBulletState, *, contacts: bool = False) -> SimFrame:
        model = _member(model, state)
        c, pb = model.canonical, dict(physicsClientId=model.client)
        qpos, qvel = self.joint_state(model, state)
        if c.free_base:
            pos, quat, lin, ang = self._base(model)
        else:
            link = int(model.body_link[0])
            st = pybullet.getLinkState(model.robot, link, computeLinkVelocity=1, computeForwardKinematics=1, **pb)
            quat = xyzw_to_wxyz(st[5])
            # The root's link frame sits on its last joint anchor; recover the body frame.
            pos = np.asarray(st[4]) + quat_rotate(quat, model.root_offset)
            com = np.asarray(st[0])
            ang = np.asarray(st[7])
            lin = np.asarray(st[6]) + cross3(ang, pos - com)
        wrench = self._contact_wrench(model) if contacts else np.zeros((0, 6))
        return SimFrame(time=state.time, qpos=qpos, qvel=qvel, base_pos=pos, base_quat=quat,
                        base_lin_vel=lin, base_ang_vel=ang, joint_torque=state.torques.copy(),
                        body_ext_wrench=wrench)

    def _contact_wrench(self, model: PyBulletModel) -> np.ndarray:
        """Contact wrench per body, MuJoCo cfrc_ext convention (about the robot COM)."""
        c, pb = model.canonical, dict(physicsClientId=model.client)
        com = self._robot_com(model)
        out = np.zeros((len(c.body_names), 6))
        index = {int(link): k for k, link in enumerate(model.body_link)}
        for pt in pybullet.getContactPoints(bodyA=model.robot, **pb):
            k = index.get(int(pt[3]))
            if k is None:
                continue
            normal = np.asarray(pt[7])  # on B, pointing towards A: the force on the robot
            force = pt[9] * normal + pt[10] * np.asarray(pt[11]) + pt[12] * np.asarray(pt[13])
            where = np.asarray(pt[5])
            out[k, 3:] += force
            out[k, :3] += cross3(where - com, force)
        return out

    def _robot_com(self, model: PyBulletModel) -> np.ndarray:
        pb = dict(physicsClientId=model.client)
        total, acc = 0.0, np.zeros(3)
        for k, link in enumerate(model.body_link):
            if link == -2:  # a free object, not the robot
                continue
            if link == -1:
                p = pybullet.getBasePositionAndOrientation(model.robot, **pb)[0]
            else:
                p = pybullet.getLinkState(model.robot, int(link), **pb)[0]
            acc += model.link_mass[k] * np.asarray(p)
            total += model.link_mass[k]
        return acc / max(total, 1e-12)

    def audit(self, model: PyBulletModel) -> list[AuditRow]:
        model = model.base if isinstance(model, PyBulletWorlds) else model
        c, pb = model.canonical, dict(physicsClientId=model.client)
        objects = {c.body_names[o.body - 1]: o.multibody for o in model.objects}
        dyn = [pybullet.getDynamicsInfo(objects.get(c.body_names[k], model.robot), -1 if link == -2 else int(link), **pb)
               for k, link in enumerate(model.body_link)]
        floor_mu = 1.0
        if model.floor is not None:
            floor_mu = pybullet.getDynamicsInfo(model.floor, -1, **pb)[1]
        # Effective friction of a body-floor contact: Bullet multiplies the two coefficients.
        body_mu = {c.body_names[k]: d[1] * floor_mu for k, d in enumerate(dyn)}
        geom_mu = np.array([body_mu.get(b, np.nan) if b != "world" else np.nan for b in c.geom_body])
        # getJointInfo keeps the createMultiBody limits (none); report what changeDynamics set,
        # whose enforcement tests/test_pybullet.py checks by driving joints into their stops.
        lo, hi = model.limits[:, 0] + model.joint_offset, model.limits[:, 1] + model.joint_offset
        armature_note = {
            "emulate": "PyBullet has no armature; emulated by mass-matrix torque compensation (exact without contact)",
            "inertia": "PyBullet has no armature; added to the body's inertia about the joint axis (exact on the "
                       "joint's own diagonal, also adds a(axis_i.axis_j)^2 to ancestors' and the base's inertia)",
            "ignore": "PyBullet has no armature; ignored by this profile",
        }[model.armature]
        got = {
            "timestep": pybullet.getPhysicsEngineParameters(**pb)["fixedTimeStep"] * model.bullet_steps,
            "integrator": 0,  # Bullet's multibody integrator is semi-implicit Euler, always
            "body_mass": [d[0] for d in dyn],
            "body_inertia": [d[2] for d in dyn],
            "joint_range": np.stack([lo, hi], axis=1),
            "joint_damping": model.damping,
            "joint_armature": None if model.armature == "ignore" else np.where(
                np.array(c.joint_type) == "hinge", model.joint_armature, np.nan) if model.armature == "inertia"
            else model.joint_armature,
            "joint_frictionloss": model.frictionloss,
            "joint_stiffness": c.joint_stiffness,
            "geom_friction": geom_mu,
            "actuator_gear": c.actuator_gear,  # crosssim applies gear x ctrl itself
        }
        notes = {
            "integrator": "Bullet integrates semi-implicit Euler only",
            "timestep": (f"{model.bullet_steps} Bullet steps of {model.dt:.6g} s per physics step (substep_dt)"
                         if model.bullet_steps > 1 else ""),
            "body_inertia": ("includes rotor inertia (armature) folded in about each hinge axis"
                             if model.armature == "inertia" else ""),
            "joint_damping": "applied by the adapter as explicit torque -d*qd (MuJoCo integrates it implicitly); "
                             "where dt d / (M_jj + armature) > 0.5 (Fetch's base slides, 1e11) d / (1 + 2 dt d / "
                             "(M_jj + armature)) at the model's first pose (halves qd per step)",
            "joint_stiffness": "applied by the adapter as explicit torque -k*(q - springref)",
            "joint_armature": armature_note,
            "joint_frictionloss": "emulated as a zero-velocity motor capped at the friction torque",
            "geom_friction": "body-floor contact: Bullet multiplies coefficients, MuJoCo takes the max; floor set to 1",
            "actuator_gear": "crosssim applies gear x ctrl itself",
        }
        return audit_rows(c, got, notes)

    def close(self, model: PyBulletModel) -> None:
        if isinstance(model, PyBulletWorlds):  # the batch's own servers; the model it was made from stays open
            for member in model.members:
                self.close(member)
            return
        model.loaded, model.saved = None, []
        try:
            pybullet.disconnect(model.client)
        except pybullet.error:
            pass


CANNOT = {
    "tendon": "Bullet's multibody has no tendons",
    "equality": "this adapter builds no Bullet constraints besides the joints",
    "ellipsoid": "Bullet has no ellipsoid shape (an enclosing sphere would be another robot)",
    "condim": "Bullet's torsional and rolling friction are not MuJoCo's; only sliding friction is built",
    "friction": "Bullet holds one friction coefficient per link",
    "self_partial": "Bullet filters collisions per link pair, and MuJoCo lets only some of these geoms touch",
    "self_parent": "a Bullet multibody never collides a link with its parent link",
}


def cannot_build(use: Use) -> str | None:
    """Why the pybullet column cannot build ``use`` (crosssim.engines.features), None where it does:
    pairs and excludes between the robot and the world (collision filter pairs, the pair's own
    friction on the link), height fields of the world, condim 1 (friction 0), meshes (convex
    hulls, as MuJoCo collides them), self-collision of body pairs whose geoms may all touch."""
    if use.feature in ("pair", "exclude", "hfield") and not use.world:
        return {"pair": "the multibody is built without self-collision, so only robot-world pairs are built",
                "exclude": None, "hfield": "a height field is built only on the world body"}[use.feature]
    return CANNOT.get(use.feature)


def _member(model, state):
    """The server ``state`` lives in: ``model`` itself, or a batch's member (pybullet_worlds)."""
    return model.member(state) if isinstance(model, PyBulletWorlds) else model


def _quat_mul(a, b) -> np.ndarray:
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([
        w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
        w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
        w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
        w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
    ])


def _quat_conj(q) -> np.ndarray:
    return np.array([q[0], -q[1], -q[2], -q[3]])
