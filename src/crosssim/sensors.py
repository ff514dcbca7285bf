"""MJCF sensors computed from any engine's state with MuJoCo's kinematics on the canonical model.

A sensor reading is a function of the state (positions and velocities), so it can be evaluated
for every engine the same way: put the engine's canonical qpos/qvel into a scratch MjData, run
MuJoCo's position and velocity stages that sensors read (kinematics, com, cameras, tendons,
transmissions) and read the sensor as MuJoCo defines it; every engine column thus builds the same
sensor from its own state. Sensors that need accelerations, constraint or contact forces
(accelerometer, touch, force, limit and actuator forces) are refused in one line: each engine
computes those its own way, and no column reads them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from crosssim.errors import CardError
from crosssim.frame import SimFrame
from crosssim.scene import element_name, load_mujoco_model

SUPPORTED = ("gyro", "velocimeter", "framepos", "framequat", "framexaxis", "frameyaxis", "framezaxis",
             "framelinvel", "frameangvel", "jointpos", "jointvel", "ballquat", "ballangvel", "subtreecom",
             "subtreelinvel", "subtreeangmom", "tendonpos", "tendonvel", "actuatorpos", "actuatorvel",
             "magnetometer", "rangefinder", "clock")
"""Sensor kinds MuJoCo computes from positions, velocities and time alone (mj_sensorPos/Vel after
the stages ``SensorReader.read`` runs); tests/test_engine_features.py checks each against
``mj_forward`` at every engine column's state."""


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
            name = element_name(self.m, mujoco.mjtObj.mjOBJ_SENSOR, s)
            kind = mujoco.mjtSensor(int(self.m.sensor_type[s])).name.removeprefix("mjSENS_").lower()
            self.types[name] = (s, kind)

    def check(self, name: str, where) -> None:
        if name not in self.types:
            raise CardError(f"{where}: observation term sensor:{name}: the robot has no sensor named {name!r} "
                            f"(its sensors: {sorted(self.types)})")
        kind = self.types[name][1]
        if kind not in SUPPORTED:
            raise CardError(f"{where}: observation term sensor:{name} is a {kind} sensor, which needs accelerations "
                            "or constraint or contact forces that each engine computes its own way, so no engine column "
                            f"reads it; crosssim computes sensors from each engine's state: {', '.join(SUPPORTED)}")

    def read(self, name: str, frame: SimFrame) -> np.ndarray:
        mujoco, m, d = self._mj, self.m, self.d
        if self._time is not frame:
            d.qpos[:], d.qvel[:], d.time = frame.qpos, frame.qvel, frame.time
            # What mj_sensorPos/Vel read: without mj_camlight a camera's frame read zeros, without
            # mj_tendon / mj_transmission / mj_fwdVelocity tendon and actuator lengths and velocities
            # did (tests/test_engine_features.py). No collision, no constraint: nothing of it is read.
            for stage in (mujoco.mj_kinematics, mujoco.mj_comPos, mujoco.mj_camlight, mujoco.mj_tendon,
                          mujoco.mj_transmission, mujoco.mj_fwdVelocity):
                stage(m, d)
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
