"""EngineNewton: NVIDIA Newton (the physics engine of Isaac Lab 3) on Warp, one column per solver.

The profile picks the solver (``settings.solver``): ``mujoco-warp`` (SolverMuJoCo on MuJoCo-Warp
kernels, what Isaac Lab 3 runs), ``mujoco-c`` (SolverMuJoCo on MuJoCo's C library),
``featherstone``, ``xpbd`` or ``semi-implicit``. The MJCF goes through Newton's own importer
(``ModelBuilder.add_mjcf``); what that importer changes is then reconciled against the canonical
model (crosssim.engines.newton_model, see docs/engines.md): masses and inertias (``settotalmass``
is ignored), the anchor of joints Newton merges into one D6 joint, joint parameters, contact
friction, gravity, native actuators (switched off: crosssim's torques enter as
``control.joint_f``). ``audit`` reads every parameter back from the Newton model arrays.

Warp compiles its kernels once (about 75 s) into ``$WARP_CACHE_PATH``; when that is unset this
module points it at ``~/.cache/crosssim/warp`` before Warp is imported.
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path

os.environ.setdefault("WARP_CACHE_PATH", str(Path.home() / ".cache" / "crosssim" / "warp"))

import numpy as np  # noqa: E402
import warp as wp  # noqa: E402

# Warp logs every kernel-module load to stdout; crosssim's output is its own.
wp.config.log_level = wp.LOG_WARNING

import newton  # noqa: E402

from crosssim.engines import newton_worlds as worlds  # noqa: E402
from crosssim.engines.audit import AuditRow  # noqa: E402
from crosssim.engines.capabilities import EngineCapabilities  # noqa: E402
from crosssim.engines.contract import EngineBase  # noqa: E402
from crosssim.engines.newton_ball import put_balls, read_balls  # noqa: E402
from crosssim.engines.newton_model import NewtonModel, audit_newton, build_model  # noqa: E402
from crosssim.engines.newton_worlds import NewtonWorlds, WorldState  # noqa: E402
from crosssim.engines.settings import EngineProfile, NewtonSettings  # noqa: E402
from crosssim.errors import EngineFailure  # noqa: E402
from crosssim.frame import InitialState, SimFrame, cross3, quat_rotate, quat_to_matrix, xyzw_to_wxyz  # noqa: E402
from crosssim.variant import CompiledModel  # noqa: E402


class NewtonBuffers:
    """The Warp arrays one state steps on, and the graph captured on these very arrays.

    Capturing a physics step costs about 0.35 s on CPU (Hopper, MuJoCo-Warp), a tenth of an
    episode; so the buffers of a state its owner dropped go back to the model (``spare``) and the
    next ``reset`` takes them, graph included. Only buffers no live state refers to are reused.
    """

    def __init__(self, model: NewtonModel):
        nm = model.nm
        self.s0, self.s1 = nm.state(), nm.state()
        self.control = model.new_control()
        self.joint_f = np.zeros(nm.joint_dof_count)
        self.tau = wp.zeros(model.canonical.joint_count, dtype=float, device=nm.device)
        """crosssim's torques, where a kernel adds passive joint torques to them (XPBD)."""
        self.graph = None


class NewtonState:
    """One state of a NewtonModel, owned by the caller (never kept on the model): Newton's state
    pair (a solver reads one and writes the other), the control it steps under, the solver's
    warm start while another state steps, crosssim's clock and last torques."""

    def __init__(self, model: NewtonModel):
        self.owner = weakref.ref(model)
        self.buffers = model.spare.pop() if model.spare else NewtonBuffers(model)
        # Give the buffers back when this state is dropped (CPython: as soon as its owner lets go).
        weakref.finalize(self, model.spare.append, self.buffers).atexit = False
        self.s0, self.s1, self.control = self.buffers.s0, self.buffers.s1, self.buffers.control
        self.solver_memory: dict | None = None
        """The solver's warm start for this state while another state of the model steps; None:
        a fresh start (zeros)."""
        self.time = 0.0
        """Simulated time since reset [s]."""
        self.torques = np.zeros(model.canonical.joint_count)
        """Torques applied in the last step [N m or N], canonical joint order."""
        self.ik_stale = False
        self.joints: tuple[np.ndarray, np.ndarray] | None = None
        """(qpos, qvel) in canonical layout, read once per physics step (stepper and frame both ask)."""


class EngineNewton(EngineBase):
    """Newton on Warp's CPU device; one model, one world, any number of states; a lockstep batch
    is N worlds of one model (``worlds_model``, crosssim.engines.newton_worlds)."""

    name = "newton"
    # A state's buffers carry its own graph: resetting one in place skips a new capture. States of
    # one single-world model swap the solver's warm start (see _load): correct, not free. A lockstep
    # batch runs as the worlds of one model instead (SolverMuJoCo on Warp; with other solvers
    # worlds_ready says no and episodes run one at a time), one solver step for every episode.
    capabilities = EngineCapabilities(reset_into=True, concurrent_states=True, ball_joints=True, worlds=True,
                                      contact_softness=True)
    settings_model = NewtonSettings

    def load(self, compiled: CompiledModel, profile: EngineProfile) -> NewtonModel:
        return build_model(compiled, profile)

    def worlds_ready(self, model: NewtonModel) -> bool:
        return worlds.available(model)

    def worlds_model(self, model: NewtonModel, n: int) -> NewtonWorlds | None:
        """``n`` worlds of ``model`` stepped as one (None: this solver runs states one at a time)."""
        self._open(model)
        return worlds.build_worlds(model, n)

    def reset(self, model: NewtonModel, initial: InitialState) -> NewtonState:
        if isinstance(model, NewtonWorlds):
            return self._put_world(model, worlds.new_state(model), initial)
        self._open(model)
        return self._put(model, NewtonState(model), initial)

    @staticmethod
    def _open(model: NewtonModel) -> None:
        if model.solver is None:  # close() dropped it: one clear line, not an AttributeError on None
            raise EngineFailure("newton: this model was closed")

    def reset_into(self, model: NewtonModel, state: NewtonState, initial: InitialState) -> NewtonState:
        self._check(model, state)
        if isinstance(model, NewtonWorlds):
            return self._put_world(model, state, initial)
        return self._put(model, state, initial)

    @staticmethod
    def _coordinates(model: NewtonModel, initial: InitialState) -> tuple[np.ndarray, np.ndarray]:
        """Newton joint coordinates and dofs (one world) of ``initial``."""
        c = model.canonical
        qpos, qvel = np.asarray(initial.qpos, float), np.asarray(initial.qvel, float)
        q = model.nm.joint_q.numpy().copy()
        qd = np.zeros(model.nm.joint_dof_count)
        q[model.q_index] = qpos[c.joint_qposadr] - model.joint_offset
        qd[model.qd_index] = qvel[c.joint_dofadr]
        if c.free_base:
            q[model.free_q:model.free_q + 7], qd[model.free_qd:model.free_qd + 6] = _free_to_newton(model, qpos, qvel)
        put_balls(model.balls, qpos, qvel, q, qd)
        return q, qd

    def _put_world(self, model: NewtonWorlds, state: WorldState, initial: InitialState) -> WorldState:
        return worlds.put(model, state, *self._coordinates(model.base, initial))

    def _put(self, model: NewtonModel, state: NewtonState, initial: InitialState) -> NewtonState:
        c = model.canonical
        q, qd = self._coordinates(model, initial)
        for s in (state.s0, state.s1):
            s.joint_q.assign(q)
            s.joint_qd.assign(qd)
            s.clear_forces()
            newton.eval_fk(model.nm, s.joint_q, s.joint_qd, s)
        state.solver_memory = None  # an episode's numbers depend on its seed alone: no warm start
        if model.loaded is not None and model.loaded() is state:
            model.load_solver_memory(None)
        state.time, state.ik_stale, state.joints = 0.0, False, None
        state.torques = np.zeros(c.joint_count)
        return state

    def _check(self, model: NewtonModel, state: NewtonState) -> None:
        kind = WorldState if isinstance(model, NewtonWorlds) else NewtonState
        if not isinstance(state, kind) or state.owner() is not model:
            raise EngineFailure(f"newton: {type(state).__name__} is not a state of this model; use reset(model, ...)")

    def _load(self, model: NewtonModel, state: NewtonState) -> None:
        """Give the solver ``state``'s warm start before stepping it.

        The state pair lives in ``state``, but SolverMuJoCo keeps MuJoCo's warm start (last
        accelerations) inside the solver; stepping two states in turn would start each from the
        other's. The leaving state's warm start is saved with it, the arriving one's restored,
        so each continues exactly as if alone. One state at a time swaps nothing.
        """
        if model.loaded is not None and model.loaded() is state:
            return
        self._check(model, state)
        current = model.loaded() if model.loaded is not None else None
        if current is not None:
            current.solver_memory = model.save_solver_memory()
        model.load_solver_memory(state.solver_memory)
        state.solver_memory = None
        model.loaded = weakref.ref(state)

    def step(self, model: NewtonModel, state: NewtonState, torques: np.ndarray, n_substeps: int = 1) -> None:
        if isinstance(model, NewtonWorlds):  # run with the other worlds at the first read (newton_worlds)
            self._check(model, state)
            return worlds.record_step(model, state, torques, n_substeps)
        self._open(model)
        self._load(model, state)
        torques = np.asarray(torques, dtype=float)
        state.torques = torques.copy()
        if model.explicit_passive:  # the graph adds XPBD's missing damping and springs each solver step
            state.buffers.tau.assign(torques)
        else:
            state.buffers.joint_f[model.qd_index] = torques
            state.control.joint_f.assign(state.buffers.joint_f)
        for _ in range(n_substeps):
            if model.capture and not model.cpu_backend:
                if state.buffers.graph is None:  # recording launches nothing; the replay below runs it
                    with wp.ScopedCapture(device=model.nm.device) as capture:
                        self._physics_step(model, state)
                    state.buffers.graph = capture.graph
                wp.capture_launch(state.buffers.graph)
            else:
                self._physics_step(model, state)
            state.time += model.dt
        state.ik_stale, state.joints = model.maximal, None

    def _physics_step(self, model: NewtonModel, state: NewtonState) -> None:
        """One crosssim physics step: ``substeps`` solver steps; the result always ends in ``s0``
        so that a captured graph replays on the same buffers."""
        h = model.dt / model.substeps
        a, b = state.s0, state.s1
        for _ in range(model.substeps):
            a.clear_forces()
            if model.explicit_passive:
                newton.eval_ik(model.nm, a, a.joint_q, a.joint_qd)
                wp.launch(_passive_joint_f, dim=len(model.qd_index), device=model.nm.device,
                          inputs=[a.joint_q, a.joint_qd, *model.passive, state.buffers.tau],
                          outputs=[state.control.joint_f])
            if model.pipeline is not None:
                model.pipeline.collide(a, model.contacts)
            model.solver.step(a, b, state.control, model.contacts, h)
            a, b = b, a
        if a is not state.s0:
            for name in ("joint_q", "joint_qd", "body_q", "body_qd"):
                wp.copy(getattr(state.s0, name), getattr(a, name))

    def _refresh_joints(self, model: NewtonModel, state: NewtonState) -> None:
        if state.ik_stale:  # maximal-coordinate solvers move bodies; recover joint coordinates
            newton.eval_ik(model.nm, state.s0, state.s0.joint_q, state.s0.joint_qd)
            state.ik_stale = False

    def joint_state(self, model: NewtonModel, state: NewtonState) -> tuple[np.ndarray, np.ndarray]:
        self._check(model, state)
        if state.joints is None:
            state.joints = self._read_joints(model, state)
        return state.joints

    def _read_joints(self, model: NewtonModel, state: NewtonState) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(model, NewtonWorlds):
            q, qd, _, _ = worlds.world_arrays(model, state)
            return _canonical_joints(model.base, q, qd)
        self._refresh_joints(model, state)
        return _canonical_joints(model, state.s0.joint_q.numpy(), state.s0.joint_qd.numpy())

    def frame(self, model: NewtonModel, state: NewtonState, *, contacts: bool = False) -> SimFrame:
        qpos, qvel = self.joint_state(model, state)
        if isinstance(model, NewtonWorlds):
            _, _, X, V = worlds.world_arrays(model, state)
            pos, quat, lin, ang = _body_frame(model.base, X, V, model.base.body_index[0])
            wrench = worlds.contact_wrench(model, state) if contacts else np.zeros((0, 6))
        else:
            pos, quat, lin, ang = _body_frame(model, state.s0.body_q.numpy(), state.s0.body_qd.numpy(),
                                              model.body_index[0])
            # SolverMuJoCo's contact forces live in the solver: right for the state stepped last (every
            # episode run alone), not for another interleaved one.
            wrench = model.contact_wrench(state) if contacts else np.zeros((0, 6))
        return SimFrame(time=state.time, qpos=qpos, qvel=qvel, base_pos=pos, base_quat=quat,
                        base_lin_vel=lin, base_ang_vel=ang, joint_torque=state.torques.copy(),
                        body_ext_wrench=wrench)

    def audit(self, model: NewtonModel) -> list[AuditRow]:
        return audit_newton(model.base if isinstance(model, NewtonWorlds) else model)

    def close(self, model: NewtonModel) -> None:
        if isinstance(model, NewtonWorlds):  # the batch's own model; the single-world one stays open
            model.solver, model.graph = None, None
            return
        model.loaded = None
        model.spare.clear()
        model.solver = None


def _canonical_joints(model: NewtonModel, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Canonical (qpos, qvel) from one world's Newton joint coordinates and dofs."""
    c = model.canonical
    qpos, qvel = np.zeros(c.nq), np.zeros(c.nv)
    qpos[c.joint_qposadr] = q[model.q_index] + model.joint_offset
    qvel[c.joint_dofadr] = qd[model.qd_index]
    read_balls(model.balls, q, qd, qpos, qvel)
    if c.free_base:
        pos, quat, lin, ang = _free_from_newton(model, q[model.free_q:model.free_q + 7],
                                                qd[model.free_qd:model.free_qd + 6])
        qpos[:3], qpos[3:7], qvel[:3] = pos, quat, lin
        qvel[3:6] = quat_to_matrix(quat).T @ ang
    return qpos, qvel


@wp.kernel
def _passive_joint_f(q: wp.array(dtype=float), qd: wp.array(dtype=float), q_index: wp.array(dtype=int),
                     qd_index: wp.array(dtype=int), damping: wp.array(dtype=float), stiffness: wp.array(dtype=float),
                     rest: wp.array(dtype=float), tau: wp.array(dtype=float), joint_f: wp.array(dtype=float)):
    """Generalized force = crosssim's torque - damping qd - stiffness (q - rest), per canonical joint."""
    k = wp.tid()
    i = qd_index[k]
    joint_f[i] = tau[k] - damping[k] * qd[i] - stiffness[k] * (q[q_index[k]] - rest[k])


def _body_frame(model: NewtonModel, body_q: np.ndarray, body_qd: np.ndarray, body: int):
    """Body frame origin pose and velocity, world frame (Newton reports COM twists)."""
    X, v = body_q[body], body_qd[body]
    quat = xyzw_to_wxyz(X[3:7])
    ang = np.asarray(v[3:6], float)
    com_offset = quat_rotate(quat, model.body_com[body])
    lin = np.asarray(v[:3], float) - cross3(ang, com_offset)
    return np.asarray(X[:3], float), quat, lin, ang


def _free_to_newton(model: NewtonModel, qpos: np.ndarray, qvel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Canonical free joint (origin, quat w-x-y-z, origin velocity, body-frame angular velocity)
    to Newton's (origin, quat x-y-z-w; COM velocity and angular velocity, both world frame)."""
    pos, quat = qpos[:3], qpos[3:7]
    norm = np.linalg.norm(quat)
    quat = quat / norm if norm > 0 else quat
    ang = quat_rotate(quat, qvel[3:6])
    com = quat_rotate(quat, model.body_com[model.body_index[0]])
    lin = qvel[:3] + cross3(ang, com)
    return (np.concatenate((pos, quat[1:], quat[:1])), np.concatenate((lin, ang)))


def _free_from_newton(model: NewtonModel, q: np.ndarray, qd: np.ndarray):
    quat = xyzw_to_wxyz(q[3:7])
    ang = np.asarray(qd[3:6], float)
    com = quat_rotate(quat, model.body_com[model.body_index[0]])
    return np.asarray(q[:3], float), quat, np.asarray(qd[:3], float) - cross3(ang, com), ang
