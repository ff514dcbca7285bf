"""EngineMuJoCo: the reference adapter. MuJoCo's compiled model *is* the canonical model."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace

import mujoco
import numpy as np

from crosssim.contacts import geom_world_friction
from crosssim.engines.audit import AuditRow
from crosssim.engines.capabilities import EngineCapabilities
from crosssim.engines.common import compiled_canonical
from crosssim.engines.contract import EngineBase
from crosssim.engines.settings import EngineProfile, MuJoCoSettings, settings_of
from crosssim.errors import EngineFailure
from crosssim.frame import InitialState, SimFrame
from crosssim.mujoco_log import route as route_mujoco_log
from crosssim.scene import CanonicalModel
from crosssim.variant import CompiledModel

route_mujoco_log()  # MuJoCo's warnings to logging, never MUJOCO_LOG.TXT in the user's folder


BADQACC = int(mujoco.mjtWarning.mjWARN_BADQACC)
TARGET_MAX = 1e9
"""|PD target| [rad] the native PD path hands MuJoCo at most (it zeroes ``ctrl`` above 1e10)."""
DERIVED = ("xpos", "xquat", "xipos", "cinert", "cvel", "site_xpos", "site_xmat", "cdof", "subtree_com",
           "qfrc_constraint")
"""mjData arrays a frame carries with ``derived=True`` (SimFrame.derived)."""


@dataclass
class MuJoCoModel:
    canonical: CanonicalModel
    mj: mujoco.MjModel
    profile: EngineProfile
    qfrc_index: np.ndarray
    """dof address of each canonical joint, where its torque goes."""
    pd_actuators: np.ndarray | None = None
    """Actuator per action component when the model's own actuators run the card's PD law
    (``native_pd_model``); torques then come from ``qfrc_actuator``, not ``qfrc_applied``."""
    native_gains: tuple[np.ndarray, np.ndarray] | None = None
    """The compiled actuators' gain and bias parameters before ``load`` zeroed them (the mocap law
    runs the model's own actuators, as the benchmark does)."""
    mocap_models: dict = field(default_factory=dict)
    """MocapLaw -> the copy of ``mj`` that law runs on (built on first use)."""


class EngineMuJoCo(EngineBase):
    """MuJoCo through its official Python bindings. Native actuators are switched off
    (``ctrl`` stays 0); crosssim's torques enter as ``qfrc_applied``."""

    name = "mujoco"
    capabilities = EngineCapabilities(reset_into=True, concurrent_states=True, parallel_states=True,
                                      native_derived=True, fluid=True, ball_joints=True, push=True, native_pd=True,
                                      contact_softness=True, mocap=True)
    """Many MjData on one MjModel step independently (in parallel threads too: the bindings release
    the GIL in mj_step, and the model is only read); mj_resetData reuses one in place; mjData's
    body arrays are the derived quantities gymnasium reads; the model is MuJoCo's own, so a ball
    joint in the base is simply there."""

    settings_model = MuJoCoSettings

    def load(self, compiled: CompiledModel, profile: EngineProfile) -> MuJoCoModel:
        canonical = compiled_canonical(compiled)
        m = compiled.mj  # a fresh MjModel per compile: this adapter adopts it
        iterations = settings_of(profile, MuJoCoSettings).iterations
        if iterations is not None:
            m.opt.iterations = iterations
        gains = (m.actuator_gainprm.copy(), m.actuator_biasprm.copy())
        # Native actuators would add their own (gain/bias) forces: crosssim's actuation replaces them.
        m.actuator_gainprm[:] = 0.0
        m.actuator_biasprm[:] = 0.0
        return MuJoCoModel(canonical, m, profile, canonical.joint_dofadr.copy(), native_gains=gains)

    def reset(self, model: MuJoCoModel, initial: InitialState) -> mujoco.MjData:
        data = mujoco.MjData(model.mj)
        data.qpos[:] = initial.qpos
        data.qvel[:] = initial.qvel
        mujoco.mj_forward(model.mj, data)
        return data

    def reset_into(self, model: MuJoCoModel, state: mujoco.MjData, initial: InitialState) -> mujoco.MjData:
        """Reset a used MjData in place: mj_resetData gives a fresh MjData's values, without allocating."""
        mujoco.mj_resetData(model.mj, state)
        state.qpos[:] = initial.qpos
        state.qvel[:] = initial.qvel
        mujoco.mj_forward(model.mj, state)
        return state

    def push(self, model: MuJoCoModel, state: mujoco.MjData, velocity: np.ndarray) -> None:
        """The root body's free joint holds its origin's world linear velocity first: add to it."""
        adr = int(model.mj.jnt_dofadr[model.mj.body_jntadr[1]])
        state.qvel[adr:adr + 3] += velocity
        mujoco.mj_forward(model.mj, state)  # frame() reads cvel

    def step(self, model: MuJoCoModel, state: mujoco.MjData, torques: np.ndarray, n_substeps: int = 1) -> None:
        state.qfrc_applied[model.qfrc_index] = torques
        mujoco.mj_step(model.mj, state, nstep=n_substeps)
        # MuJoCo answers a non-finite acceleration by resetting the state and counting a warning:
        # a silent reset would look like a robot that teleported home, so it is a divergence here.
        if state.warning[BADQACC].number:
            raise EngineFailure(f"mujoco: diverged (NaN/inf acceleration; MuJoCo reset the state) at t = "
                                f"{state.time:.3f} s")

    def native_pd_model(self, model: MuJoCoModel, actuation) -> MuJoCoModel | None:
        """A copy of ``model`` whose actuators compute ``kp (ctrl - q) - kd qd`` (clipped to the
        card's torque limit) in C at every physics step, with ``ctrl`` = the PD target; None
        unless that is the card's law exactly: pd mode, Euler integrator (the implicit ones would
        differentiate the kd term), and one gear-1 joint actuator without dynamics on each
        driven joint. The sums are ordered differently from crosssim's numpy PD: equal to the
        last bits, not bit for bit."""
        m = model.mj
        if actuation.mode != "pd" or m.opt.integrator != int(mujoco.mjtIntegrator.mjINT_EULER):
            return None
        if m.opt.disableflags & int(mujoco.mjtDisableBit.mjDSBL_ACTUATION):
            return None
        joint_of_dof = {int(m.jnt_dofadr[j]): j for j in range(m.njnt)
                        if int(m.jnt_type[j]) in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))}
        ids = []
        for dof in np.asarray(actuation.dof_index, dtype=int):
            on = [a for a in range(m.nu) if int(m.actuator_trntype[a]) == int(mujoco.mjtTrn.mjTRN_JOINT)
                  and m.actuator_trnid[a, 0] == joint_of_dof.get(int(dof), -1)]
            if len(on) != 1 or m.actuator_gear[on[0], 0] != 1.0 or m.actuator_dyntype[on[0]] != 0:
                return None
            ids.append(on[0])
        pd = copy.copy(m)  # MjModel's copy is a deep copy: the shared model keeps its zero gains
        ids = np.array(ids)
        pd.actuator_gaintype[ids] = int(mujoco.mjtGain.mjGAIN_FIXED)
        pd.actuator_biastype[ids] = int(mujoco.mjtBias.mjBIAS_AFFINE)
        pd.actuator_gainprm[ids] = 0.0
        pd.actuator_biasprm[ids] = 0.0
        pd.actuator_gainprm[ids, 0] = actuation.kp
        pd.actuator_biasprm[ids, 1] = -np.asarray(actuation.kp, dtype=float)
        pd.actuator_biasprm[ids, 2] = -np.asarray(actuation.kd, dtype=float)
        pd.actuator_ctrllimited[ids] = 0
        if hasattr(pd, "actuator_actgravcomp"):  # MuJoCo >= 3.1: gravity compensation through the actuator
            pd.actuator_actgravcomp[ids] = 0
        # A joint's actuatorfrcrange would clamp the actuator's force: crosssim's torques (in
        # qfrc_applied) never see it, so neither may the native law (G1: 50-139 N m, reached
        # by a hard-pushed policy).
        pd.jnt_actfrclimited[m.actuator_trnid[ids, 0]] = 0
        limit = actuation.torque_limit
        pd.actuator_forcelimited[ids] = 0 if limit is None else 1
        if limit is not None:
            pd.actuator_forcerange[ids] = np.stack([-limit, limit], axis=1)
        return replace(model, mj=pd, pd_actuators=ids)

    def step_targets(self, model: MuJoCoModel, state: mujoco.MjData, targets: np.ndarray, n_substeps: int) -> None:
        """``n_substeps`` physics steps of a ``native_pd_model`` towards PD ``targets``, in one C call.

        MuJoCo zeroes every ``ctrl`` (a warning, no error) when one exceeds 1e10: a target that
        far out only saturates the card's torque limit, so it is clipped to +-1e9 rad where the
        limit exists (the same torque); without a limit it is an engine failure, as the torque
        ``kp * target`` would be in the one-at-a-time path."""
        targets = np.asarray(targets, dtype=float)
        if np.abs(targets).max(initial=0.0) > TARGET_MAX:
            if not model.mj.actuator_forcelimited[model.pd_actuators].all():
                raise EngineFailure(f"mujoco: a PD target beyond {TARGET_MAX:g} rad ({np.abs(targets).max():.3g}) "
                                    f"without a torque limit at t = {state.time:.3f} s")
            targets = np.clip(targets, -TARGET_MAX, TARGET_MAX)
        state.ctrl[model.pd_actuators] = targets
        mujoco.mj_step(model.mj, state, nstep=n_substeps)
        if state.warning[BADQACC].number:
            raise EngineFailure(f"mujoco: diverged (NaN/inf acceleration; MuJoCo reset the state) at t = "
                                f"{state.time:.3f} s")

    def step_mocap(self, model: MuJoCoModel, state: mujoco.MjData, law, command: np.ndarray, n_substeps: int) -> None:
        """``law`` (crosssim.actuation.MocapLaw) for one control period, as gymnasium-robotics' Fetch
        steps: mocap to the welded body's pose (read from mjData, where the last step left it) plus
        the command, gripper ctrl relative to its joints, ``n_substeps`` steps, blocked fingers zeroed."""
        m = _mocap_model(model, law)
        body, mocap = (mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, n) for n in (law.body, law.mocap))
        joints = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n) for n in law.gripper]
        acts = [a for a in range(m.nu) if m.actuator_trnid[a, 0] in joints]  # Push's scene has none
        command = np.asarray(command, dtype=float)
        mid = m.body_mocapid[mocap]
        state.mocap_pos[mid] = state.xpos[body] + command[:3] * law.pos_scale
        state.mocap_quat[mid] = state.xquat[body] + np.asarray(law.quat_offset)
        grip = 0.0 if law.blocked else command[3]
        for a in acts:
            adr = m.jnt_qposadr[m.actuator_trnid[a, 0]]
            state.ctrl[a] = grip if m.actuator_biastype[a] == 0 else state.qpos[adr] + grip
        mujoco.mj_step(m, state, nstep=n_substeps)
        if state.warning[BADQACC].number:
            raise EngineFailure(f"mujoco: diverged (NaN/inf acceleration; MuJoCo reset the state) at t = "
                                f"{state.time:.3f} s")
        if law.blocked:
            state.qpos[m.jnt_qposadr[joints]] = 0.0
            mujoco.mj_forward(m, state)

    def joint_state(self, model: MuJoCoModel, state: mujoco.MjData) -> tuple[np.ndarray, np.ndarray]:
        return state.qpos, state.qvel

    def frame(self, model: MuJoCoModel, state: mujoco.MjData, *, contacts: bool = False,
              derived: bool = False) -> SimFrame:
        m = model.mj
        vel = np.zeros(6)
        mujoco.mj_objectVelocity(m, state, mujoco.mjtObj.mjOBJ_XBODY, 1, vel, 0)
        wrench = np.zeros((0, 6))
        if contacts:
            mujoco.mj_rnePostConstraint(m, state)
            wrench = state.cfrc_ext[1:].copy()
        return SimFrame(
            time=float(state.time),
            qpos=state.qpos.copy(),
            qvel=state.qvel.copy(),
            base_pos=state.xpos[1].copy(),
            base_quat=state.xquat[1].copy(),
            base_lin_vel=vel[3:].copy(),
            base_ang_vel=vel[:3].copy(),
            joint_torque=(state.qfrc_applied if model.pd_actuators is None else state.qfrc_actuator)[
                model.qfrc_index].copy(),
            body_ext_wrench=wrench,
            derived={k: getattr(state, k).copy() for k in DERIVED} if derived else None,
        )

    def audit(self, model: MuJoCoModel) -> list[AuditRow]:
        return audit_rows(model.canonical, read_back_mujoco(model.mj, model.canonical))

    def close(self, model: MuJoCoModel) -> None:
        pass


def _mocap_model(model: MuJoCoModel, law) -> mujoco.MjModel:
    """The copy of ``model.mj`` ``law`` runs on: the compiled actuators' own gains back, and every
    weld's relative pose zeroed (gymnasium-robotics' ``reset_mocap_welds``)."""
    m = model.mocap_models.get(law)
    if m is None:
        m = copy.copy(model.mj)  # a deep copy: the shared model keeps its zero gains
        m.actuator_gainprm[:], m.actuator_biasprm[:] = model.native_gains
        for i in range(m.neq):
            if m.eq_type[i] == int(mujoco.mjtEq.mjEQ_WELD):
                m.eq_data[i, :7] = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
        model.mocap_models[law] = m
    return m


def read_back_mujoco(m: mujoco.MjModel, c: CanonicalModel) -> dict[str, np.ndarray | float]:
    """Parameters as the MuJoCo engine will simulate them (after profile overrides)."""
    return {
        "timestep": float(m.opt.timestep),
        "integrator": int(m.opt.integrator),
        "body_mass": m.body_mass[1:].copy(),
        "body_inertia": m.body_inertia[1:].copy(),
        "joint_range": np.array([m.jnt_range[m.jnt_dofadr.tolist().index(d)] for d in c.joint_dofadr]),
        "joint_damping": m.dof_damping[c.joint_dofadr].copy(),
        "joint_armature": m.dof_armature[c.joint_dofadr].copy(),
        "joint_frictionloss": m.dof_frictionloss[c.joint_dofadr].copy(),
        "joint_stiffness": np.array([m.jnt_stiffness[m.dof_jntid[d]] for d in c.joint_dofadr]),
        "geom_friction": floor_contact_friction(m.geom_friction[:, 0], c, geom_world_friction(m)),
        # Native gains are zeroed on purpose; crosssim applies gear x ctrl itself.
        "actuator_gear": m.actuator_gear[:, 0].copy(),
    }


TOLERANCES = {
    "timestep": 1e-9,
    "integrator": 0,
    "body_mass": 1e-3,  # relative
    "body_inertia": 1e-2,  # relative
    "joint_range": 1e-6,
    "joint_damping": 1e-6,
    "joint_armature": 1e-6,
    "joint_frictionloss": 1e-6,
    "joint_stiffness": 1e-6,
    "geom_friction": 1e-6,  # sliding friction of the geom-floor contact
    "actuator_gear": 1e-9,
}
RELATIVE = {"body_mass", "body_inertia"}


def floor_contact_friction(mu: np.ndarray, c: CanonicalModel, effective: np.ndarray | None = None) -> np.ndarray:
    """Sliding friction of each geom's contact with the world geoms: ``effective`` (MuJoCo's
    combination, crosssim.contacts.geom_world_friction; the canonical model's by default) where the
    geom touches the world, else the max of ``mu`` and the world's."""
    world = [g for g, b in enumerate(c.geom_body) if b == "world"]
    floor = max((mu[g] for g in world), default=0.0)
    effective = c.geom_world_friction if effective is None else effective
    out = np.maximum(mu, floor)
    return out if effective is None else np.where(np.isnan(effective), out, effective)


def audit_rows(c: CanonicalModel, got: dict, notes: dict | None = None) -> list[AuditRow]:
    """Compare read-back parameters with the canonical model, one row per scalar.

    ``got[q]`` may be None (the engine cannot represent ``q`` at all) or hold NaN entries
    (cannot represent that item). ``notes[q]`` explains either.
    """
    notes = notes or {}
    canonical = {
        "timestep": c.timestep,
        "integrator": c.integrator,
        "body_mass": c.body_mass,
        "body_inertia": c.body_inertia,
        "joint_range": c.joint_range,
        "joint_damping": c.joint_damping,
        "joint_armature": c.joint_armature,
        "joint_frictionloss": c.joint_frictionloss,
        "joint_stiffness": c.joint_stiffness,
        "geom_friction": floor_contact_friction(c.geom_friction[:, 0], c),
        "actuator_gear": c.actuator_gear,
    }
    items = {
        "timestep": ["model"],
        "integrator": ["model"],  # mjtIntegrator code: 0 Euler, 1 RK4, 2 implicit, 3 implicitfast
        "body_mass": list(c.body_names),
        "body_inertia": [f"{b}[{k}]" for b in c.body_names for k in "xyz"],
        "joint_range": [f"{j}[{k}]" for j in c.joint_names for k in ("lo", "hi")],
        "joint_damping": list(c.joint_names),
        "joint_armature": list(c.joint_names),
        "joint_frictionloss": list(c.joint_names),
        "joint_stiffness": list(c.joint_names),
        "geom_friction": [f"{b}#{g}" for g, b in enumerate(c.geom_body)],
        "actuator_gear": list(c.actuator_names),
    }
    rows = []
    for quantity, want in canonical.items():
        want = np.ravel(np.asarray(want, dtype=float))
        have = got.get(quantity)
        have = None if have is None else np.ravel(np.asarray(have, dtype=float))
        if quantity == "joint_range":  # a range only matters on limited joints
            keep = np.repeat(c.joint_limited, 2)
        elif quantity == "geom_friction":  # robot geoms against the floor
            keep = np.array([b != "world" for b in c.geom_body]) & c.geom_collides
        else:
            keep = np.ones(want.shape, dtype=bool)
        for k, item in enumerate(items[quantity]):
            if not keep[k]:
                continue
            tol = TOLERANCES[quantity] * (max(abs(want[k]), 1e-9) if quantity in RELATIVE else 1.0)
            value = None if have is None or np.isnan(have[k]) else float(have[k])
            rows.append(AuditRow(quantity, item, float(want[k]), value, tol, notes.get(quantity, "")))
    return rows
