"""MJCF sensors computed from any engine's state with MuJoCo's kinematics on the canonical model.

A sensor reading is a function of the state (positions and velocities), so it can be evaluated
for every engine the same way: put the engine's canonical qpos/qvel into a scratch MjData, run
MuJoCo's kinematics and read the sensor as MuJoCo defines it. Sensors that need accelerations or
contact forces (accelerometer, touch, force) are refused with a message.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from crosssim.errors import CardError
from crosssim.frame import SimFrame
from crosssim.scene import load_mujoco_model

SUPPORTED = ("gyro", "velocimeter", "framepos", "framequat", "framexaxis", "frameyaxis", "framezaxis",
             "framelinvel", "frameangvel", "jointpos", "jointvel")


class SensorReader:
    def __init__(self, scene: Path):
        import mujoco

        self._mj = mujoco
        self.path = Path(scene)
        self.m = load_mujoco_model(Path(scene))  # size limits first, as for every compile
        self.d = mujoco.MjData(self.m)
        self._time = None
        self.types = {}
        for s in range(self.m.nsensor):
            name = mujoco.mj_id2name(self.m, mujoco.mjtObj.mjOBJ_SENSOR, s)
            kind = mujoco.mjtSensor(int(self.m.sensor_type[s])).name.removeprefix("mjSENS_").lower()
            self.types[name] = (s, kind)

    def check(self, name: str, where) -> None:
        if name not in self.types:
            raise CardError(f"{where}: observation term sensor:{name}: the robot has no sensor named {name!r} "
                            f"(its sensors: {sorted(self.types)})")
        kind = self.types[name][1]
        if kind not in SUPPORTED:
            raise CardError(f"{where}: observation term sensor:{name} is a {kind} sensor, which needs accelerations "
                            f"or contact forces; crosssim computes sensors from state only: {', '.join(SUPPORTED)}")

    def read(self, name: str, frame: SimFrame) -> np.ndarray:
        mujoco, m, d = self._mj, self.m, self.d
        if self._time is not frame:
            d.qpos[:], d.qvel[:] = frame.qpos, frame.qvel
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            mujoco.mj_comVel(m, d)
            mujoco.mj_sensorPos(m, d)
            mujoco.mj_sensorVel(m, d)
            self._time = frame
        s = self.types[name][0]
        adr, dim = m.sensor_adr[s], m.sensor_dim[s]
        return d.sensordata[adr:adr + dim].copy()

    def joint_sensors(self, kind: str, joint_names, where) -> list[str]:
        """The ``kind`` ('jointpos' or 'jointvel') sensor of each named joint, in order;
        CardError naming the joint that has none."""
        mujoco, m = self._mj, self.m
        by_joint = {}
        for name, (s, k) in self.types.items():
            if k == kind:
                by_joint.setdefault(int(m.sensor_objid[s]), name)
        out = []
        for joint in joint_names:
            jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, joint)
            if jid not in by_joint:
                raise CardError(f"{where} reads joints from sensors, but joint {joint!r} has no {kind} sensor in "
                                f"{Path(self.path).name} (add <{kind} joint=\"{joint}\"/> or use source: state)")
            out.append(by_joint[jid])
        return out
