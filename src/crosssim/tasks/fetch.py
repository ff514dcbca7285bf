"""gymnasium-robotics' Fetch gripper tasks (``FetchPickAndPlace-v4``, ``FetchPush-v4``): a 7-joint
arm with a two-finger gripper moves a 5 cm block to a goal. crosssim's contact-rich manipulation.

Observation, sparse reward, success and reset follow gymnasium-robotics 1.4.2 with default
arguments, on its own MJCF files (``gymnasium_robotics:fetch/*.xml``); tests/test_fetch_equivalence.py
checks them step for step against the benchmark's environment. Decisions are in docs/manipulation.md.
"""

from __future__ import annotations

import functools

import numpy as np

from crosssim.actuation import Actuation, MocapLaw
from crosssim.actuation_ee import EndEffectorLaw
from crosssim.errors import CardError
from crosssim.frame import InitialState
from crosssim.tasks.base import StepResult
from crosssim.tasks.gym_base import GymTask
from crosssim.kinematics import kinematics_of

SUBSTEPS = 20
"""Physics steps per control step (0.04 s at the scene's 2 ms: 25 Hz)."""
BASE_QPOS = {"robot0:slide0": 0.405, "robot0:slide1": 0.48, "robot0:slide2": 0.0}
OBJECT_QPOS = (1.25, 0.53, 0.4, 1.0, 0.0, 0.0, 0.0)
GRIPPER = ("robot0:l_gripper_finger_joint", "robot0:r_gripper_finger_joint")
ARM = tuple(f"robot0:{j}_joint" for j in ("shoulder_pan", "shoulder_lift", "upperarm_roll", "elbow_flex", "forearm_roll",
                                          "wrist_flex", "wrist_roll"))
"""The arm joints crosssim's joint-space law moves (the base slides, torso lift and head stay passive, as under the mocap)."""
CONTROLS = ("mocap", "joint_pd")
LIFT = 0.01
"""Object height above its resting height [m] that counts as lifted (episode outcomes)."""
HOLD = 0.03
"""Object-to-grip distance [m] within which a lifted object counts as held."""


def mat2euler(mat: np.ndarray) -> np.ndarray:
    """gymnasium-robotics' ``rotations.mat2euler`` (XYZ, its sign convention) of one 3x3 matrix."""
    cy = np.sqrt(mat[2, 2] * mat[2, 2] + mat[1, 2] * mat[1, 2])
    if cy > np.finfo(np.float64).eps * 4.0:
        return np.array([-np.arctan2(mat[1, 2], mat[2, 2]), -np.arctan2(-mat[0, 2], cy), -np.arctan2(mat[0, 1], mat[0, 0])])
    return np.array([0.0, -np.arctan2(-mat[0, 2], cy), -np.arctan2(-mat[1, 0], mat[1, 1])])


@functools.lru_cache(maxsize=4)
def settled_start(scene: str, extra_height: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """The benchmark's ``_env_setup``: base slides and block placed, welds zeroed, the mocap sent
    above the table and 10 control steps run with the model's own actuators. Returns (qpos, qvel,
    grip site position [m], block height [m]) from which every episode starts and its goal is drawn."""
    import mujoco

    from crosssim.scene import load_mujoco_model, resolve_scene

    m = load_mujoco_model(resolve_scene(scene))
    d = mujoco.MjData(m)
    for name, value in {**BASE_QPOS, "object0:joint": OBJECT_QPOS}.items():
        j = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name)
        adr, n = m.jnt_qposadr[j], 7 if m.jnt_type[j] == int(mujoco.mjtJoint.mjJNT_FREE) else 1
        d.qpos[adr:adr + n] = value
    for i in range(m.neq):
        if m.eq_type[i] == int(mujoco.mjtEq.mjEQ_WELD):
            m.eq_data[i, :7] = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
    mujoco.mj_forward(m, d)
    grip = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, "robot0:grip")
    mid = m.body_mocapid[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "robot0:mocap")]
    d.mocap_pos[mid] = np.array([-0.498, 0.005, -0.431 + extra_height]) + d.site_xpos[grip]
    d.mocap_quat[mid] = (1.0, 0.0, 1.0, 0.0)
    for _ in range(10):
        mujoco.mj_step(m, d, nstep=SUBSTEPS)
    obj = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, "object0")
    return d.qpos.copy(), d.qvel.copy(), d.site_xpos[grip].copy(), float(d.site_xpos[obj][2])


class FetchPickAndPlace(GymTask):
    """Pick the block up and bring it to a goal on the table or up to 45 cm above it (sparse reward:
    -1 per step until the block is within 5 cm of the goal, then 0)."""

    name = "FetchPickAndPlace"
    versions = {"v4": "gymnasium_robotics:fetch/pick_and_place.xml"}
    default_version = "v4"
    frame_skip = SUBSTEPS
    max_steps = 50
    needs_derived = True
    block_gripper = False
    extra_height = 0.2
    target_in_the_air = True
    obj_range = target_range = 0.15
    distance_threshold = 0.05
    metrics = ("success", "return")
    """Higher is better; ``time_to_success`` [s] is a column too (lower is better, NaN: never)."""
    primary_metric = "success"
    success_survival = 1.0

    def __init__(self, *, version: str | int | None = None, control: str = "mocap"):
        super().__init__(version=version)
        if control not in CONTROLS:
            raise CardError(f"task_options.control {control!r}: task {self.name} has control 'mocap' (the "
                            "benchmark's mocap weld, MuJoCo only) or 'joint_pd' (crosssim's inverse kinematics and "
                            "joint PD, every engine; docs/manipulation.md)")
        self.control = control
        self.benchmark_scene = self.scene
        """The benchmark's own file: every episode starts from its settled state, whatever the law."""
        if control == "joint_pd":
            from crosssim.scene import resolve_scene
            from crosssim.tasks.fetch_scene import without_weld

            self.scene = str(without_weld(resolve_scene(self.scene)))

    @property
    def success_criterion(self) -> str:
        return (f"an episode succeeds when the block is within {self.distance_threshold * 100:.0f} cm of the goal "
                "at its last step (gymnasium-robotics' is_success)")

    def actuation(self, c):
        if self.control == "joint_pd":
            law = EndEffectorLaw(self.scene, "robot0:gripper_link", ARM, GRIPPER, blocked=self.block_gripper)
            idx = np.array([c.joint_names.index(j) for j in (*ARM, *GRIPPER)])
            bound = np.ones(law.action_size)
            return Actuation("ee_pd", idx, c.joint_dofadr[idx], c.joint_qposadr[idx], c.joint_count, np.ones(len(idx)),
                             -bound, bound, law=law)
        law = MocapLaw(mocap="robot0:mocap", body="robot0:gripper_link", gripper=GRIPPER, blocked=self.block_gripper)
        idx = np.array([c.joint_names.index(j) for j in GRIPPER])
        bound = np.ones(law.action_size)  # the command's bounds, one per action component
        return Actuation("mocap", idx, c.joint_dofadr[idx], c.joint_qposadr[idx], c.joint_count, np.ones(len(idx)),
                         -bound, bound, law=law)

    def observation_size(self, c) -> int:
        return 31

    def sensed(self, c):
        """Everything but the goal (values 3-5 of the flattened dict: given, not measured)."""
        mask = np.ones(31)
        mask[3:6] = 0.0
        return mask

    def initial_state(self, c, rng):
        # The benchmark's draw order: the block's x, y (rejection sampled 10 cm away from the grip), then the goal.
        qpos, qvel, grip, height = settled_start(self.benchmark_scene, self.extra_height)
        qpos = qpos.copy()
        xy = grip[:2]
        while np.linalg.norm(xy - grip[:2]) < 0.1:
            xy = grip[:2] + rng.uniform(-self.obj_range, self.obj_range, size=2)
        adr = self._object_qposadr()
        qpos[adr:adr + 2] = xy
        goal = grip[:3] + rng.uniform(-self.target_range, self.target_range, size=3)
        goal[2] = height
        if self.target_in_the_air and rng.uniform() < 0.5:
            goal[2] += rng.uniform(0, 0.45)
        return InitialState(qpos=qpos, qvel=qvel.copy(), task={"goal": goal, "table": height})

    def _object_qposadr(self) -> int:
        import mujoco

        m = kinematics_of(self.scene).m
        return int(m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, "object0:joint")])

    def reset(self, frame) -> dict:
        return {"first_success": None, "held": False, "touched": False, "steps": 0}

    def parts(self, frame) -> dict[str, np.ndarray]:
        """gymnasium-robotics' ``generate_mujoco_observations`` from a frame, by name."""
        k = kinematics_of(self.scene)
        d = k.of(frame)
        dt = SUBSTEPS * k.m.opt.timestep
        grip, obj = k.site_id("robot0:grip"), k.site_id("object0")
        grip_velp = k.site_velocity(frame, grip, d)[0] * dt
        obj_velp, obj_velr = (v * dt for v in k.site_velocity(frame, obj, d))
        fingers = [k.m.jnt_qposadr[k.m.joint(n).id] for n in self._finger_order()]
        dofs = [k.m.jnt_dofadr[k.m.joint(n).id] for n in self._finger_order()]
        return {"grip_pos": d["site_xpos"][grip].copy(), "object_pos": d["site_xpos"][obj].copy(),
                "object_rot": mat2euler(d["site_xmat"][obj].reshape(3, 3)), "object_velp": obj_velp - grip_velp,
                "object_velr": obj_velr, "grip_velp": grip_velp, "gripper_state": frame.qpos[fingers],
                "gripper_vel": frame.qvel[dofs] * dt}

    def _finger_order(self) -> list[str]:
        """The last two ``robot*`` joints in model order, as ``robot_get_obs`` takes them."""
        m = kinematics_of(self.scene).m
        return [n for n in (m.joint(j).name for j in range(m.njnt)) if n.startswith("robot")][-2:]

    def observe(self, frame, state) -> np.ndarray:
        """gymnasium's flattening of the benchmark's dict: achieved_goal (3), desired_goal (3), observation (25)."""
        p = self.parts(frame)
        obs = np.concatenate([p["grip_pos"], p["object_pos"], p["object_pos"] - p["grip_pos"], p["gripper_state"],
                              p["object_rot"], p["object_velp"], p["object_velr"], p["grip_velp"], p["gripper_vel"]])
        return np.concatenate([p["object_pos"], state["goal"], obs])

    def step(self, before, after, action, state, dt) -> StepResult:
        p = self.parts(after)
        d = float(np.linalg.norm(p["object_pos"] - state["goal"]))
        success = d < self.distance_threshold
        reward = -float(np.float32(d > self.distance_threshold))
        state["steps"] += 1
        state["success"] = success
        if success and state["first_success"] is None:
            state["first_success"] = state["steps"] * dt
        near = float(np.linalg.norm(p["object_pos"] - p["grip_pos"])) < HOLD
        lifted = p["object_pos"][2] > state["table"] + LIFT
        state["touched"] |= near
        held = near and lifted
        state["dropped"] = state.get("dropped", False) or (state["held"] and not held and not success)
        state["held"] |= held
        return StepResult(reward, {"goal_distance": d, "is_success": float(success)}, False)

    def episode_outcome(self, state) -> tuple[dict[str, float], str | None]:
        success = bool(state.get("success", False))
        first = state.get("first_success")
        metrics = {"success": float(success), "time_to_success": float("nan") if first is None else float(first)}
        if success:
            return metrics, "success"
        if state.get("dropped"):
            return metrics, "dropped object"
        if state.get("touched") and not state.get("held"):
            return metrics, "missed grasp"
        return metrics, "timeout"

    def succeeded(self, rows) -> np.ndarray:
        return rows["metric_success"].to_numpy(float) > 0.5 if "metric_success" in rows else np.zeros(len(rows), bool)

    def metric_values(self, rows, name: str) -> np.ndarray:
        if name in ("success", "time_to_success"):
            col = f"metric_{name}"
            values = rows[col].to_numpy(float) if col in rows else np.full(len(rows), np.nan)
            return np.where(rows["failure"].isna().to_numpy(), values, np.nan)
        return super().metric_values(rows, name)


class FetchPush(FetchPickAndPlace):
    """Push the block (gripper held shut) to a goal on the table."""

    name = "FetchPush"
    versions = {"v4": "gymnasium_robotics:fetch/push.xml"}
    block_gripper = True
    extra_height = 0.0
    target_in_the_air = False

    def episode_outcome(self, state):
        metrics, reason = super().episode_outcome(state)
        if reason in ("dropped object", "missed grasp"):  # nothing is grasped in Push
            reason = "timeout"
        return metrics, reason
