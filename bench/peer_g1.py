"""The peers' own G1 loop, de-paced: unitree_rl_gym's MuJoCo deployment as its config and README
describe it (physics dt 0.002 s, a policy call every 10 physics steps, PD torque recomputed in
Python at every physics step and written to ``ctrl`` of the model's motors), with the viewer and
the real-time sleep removed. Written here from that documented behaviour for bench_g1.py, not
copied. One call of :func:`run_episode` = one 20 s episode from the default pose.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

G1 = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "unitree-g1"
KP = np.array([100, 100, 100, 150, 40, 40, 100, 100, 100, 150, 40, 40], dtype=float)
KD = np.array([2, 2, 2, 4, 2, 2, 2, 2, 2, 4, 2, 2], dtype=float)
DEFAULT = np.array([-0.1, 0.0, 0.0, 0.3, -0.2, 0.0, -0.1, 0.0, 0.0, 0.3, -0.2, 0.0])
CMD = np.array([0.5, 0.0, 0.0]) * np.array([2.0, 2.0, 0.25])
DT, DECIMATION, SECONDS = 0.002, 10, 20.0


class PeerG1:
    """Model, data and the TorchScript policy, loaded once like the deploy script does."""

    def __init__(self):
        import mujoco
        import torch

        torch.set_num_threads(1)
        self.mujoco, self.torch = mujoco, torch
        self.m = mujoco.MjModel.from_xml_path(str(G1 / "scene.xml"))
        self.m.opt.timestep = DT
        self.policy = torch.jit.load(str(G1 / "motion.pt"))

    def run_episode(self) -> float:
        """One de-paced episode; returns the base's forward distance [m] (to check it walked)."""
        mujoco, torch, m = self.mujoco, self.torch, self.m
        d = mujoco.MjData(m)
        self.policy.reset_memory()
        target, action, obs = DEFAULT.copy(), np.zeros(12, dtype=np.float32), np.zeros(47, dtype=np.float32)
        for counter in range(1, int(SECONDS / DT) + 1):
            d.ctrl[:] = (target - d.qpos[7:]) * KP + (0.0 - d.qvel[6:]) * KD
            mujoco.mj_step(m, d)
            if counter % DECIMATION:
                continue
            qw, qx, qy, qz = d.qpos[3:7]
            gravity = np.array([2 * (-qz * qx + qw * qy), -2 * (qz * qy + qw * qx), 1 - 2 * (qw * qw + qz * qz)])
            phase = (counter * DT) % 0.8 / 0.8
            obs[:3] = d.qvel[3:6] * 0.25
            obs[3:6] = gravity
            obs[6:9] = CMD
            obs[9:21] = d.qpos[7:] - DEFAULT
            obs[21:33] = d.qvel[6:] * 0.05
            obs[33:45] = action
            obs[45:47] = np.sin(2 * np.pi * phase), np.cos(2 * np.pi * phase)
            action = self.policy(torch.from_numpy(obs).unsqueeze(0)).detach().numpy().squeeze()
            target = action * 0.25 + DEFAULT
        return float(d.qpos[0])


if __name__ == "__main__":
    import time

    peer = PeerG1()
    t = time.perf_counter()
    print(f"walked {peer.run_episode():.2f} m in {time.perf_counter() - t:.2f} s wall")
