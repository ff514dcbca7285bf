"""Filmstrips: frames of episode 0 in every engine at the same simulated times, rendered from
each engine's own states.

Every engine's recorded generalized coordinates (canonical MuJoCo layout) are drawn through
MuJoCo's offscreen renderer (``MUJOCO_GL=egl`` works on Mesa's software renderer; no GPU), so
frames of different engines are directly comparable: one column is one instant in every engine,
and an engine whose episode ended earlier shows when it ended. The camera follows the robot's
root body at a distance set by the robot's size. Rendering runs in a child process: an OpenGL
failure costs the filmstrip, never the report.
"""

from __future__ import annotations

import base64
import io
import multiprocessing as mp
import os
from pathlib import Path

import numpy as np

from crosssim.scene import load_mujoco_model


def frame_times(trajectories: dict, frames: int) -> np.ndarray:
    """The shared instants [s]: evenly from 0 to the end of the longest recorded episode."""
    ends = [float(tr["t"][-1]) for tr in trajectories.values() if len(tr.get("t", []))]
    return np.linspace(0.0, max(ends), frames) if ends else np.zeros(0)


def frame_picks(t: np.ndarray, times: np.ndarray) -> list[int | None]:
    """Index of the recorded step nearest each instant; None after the episode ended."""
    if not len(t):
        return [None] * len(times)
    step = float(np.median(np.diff(t))) if len(t) > 1 else 0.0
    return [int(np.argmin(np.abs(t - x))) if x <= t[-1] + 0.5 * step + 1e-9 else None for x in times]


def _root_body(m) -> int:
    """The robot's root: the body of the first free joint, else the heaviest subtree under the world."""
    import mujoco

    for j in range(m.njnt):
        if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
            return int(m.jnt_bodyid[j])
    children = [b for b in range(1, m.nbody) if m.body_parentid[b] == 0]
    return max(children, key=lambda b: m.body_subtreemass[b]) if children else 0


def _robot_size(m, d, root: int) -> float:
    """Largest extent [m] of the root's subtree (body origins), at least 0.3 m."""
    bodies = [b for b in range(m.nbody) if b == root or _descends(m, b, root)]
    pos = d.xpos[bodies]
    return max(0.3, float(np.ptp(pos, axis=0).max()) if len(pos) > 1 else 0.3)


def _descends(m, b: int, root: int) -> bool:
    while b > 0:
        b = int(m.body_parentid[b])
        if b == root:
            return True
    return False


def _scene_option(m):
    """Render options that show the robot: a model whose robot geoms all sit in groups a viewer hides
    by default (3-5, e.g. MuJoCo Playground's collision-only Go1) gets those groups switched on."""
    import mujoco

    opt = mujoco.MjvOption()
    robot = [int(m.geom_group[g]) for g in range(m.ngeom) if m.geom_bodyid[g] != 0]
    if robot and not any(opt.geomgroup[g] for g in robot if g < len(opt.geomgroup)):
        for g in set(robot):
            if g < len(opt.geomgroup):
                opt.geomgroup[g] = 1
    return opt


def _render(scene: str, strips: dict, size: tuple[int, int], q) -> None:
    os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        import mujoco
        from PIL import Image

        m = load_mujoco_model(Path(scene))  # size limits first (the scene path comes from summary.json)
        d = mujoco.MjData(m)
        renderer = mujoco.Renderer(m, size[0], size[1])
        camera = mujoco.MjvCamera()
        camera.type = mujoco.mjtCamera.mjCAMERA_FREE
        root = _root_body(m)
        option = _scene_option(m)
        mujoco.mj_forward(m, d)
        distance = 0.6 + 1.4 * _robot_size(m, d, root)  # the whole robot with some floor around it
        out = {}
        for engine, (qpos, picks) in strips.items():
            images = []
            for k in picks:
                if k is None:
                    images.append(None)
                    continue
                d.qpos[:] = qpos[k]
                mujoco.mj_forward(m, d)
                camera.lookat[:] = d.subtree_com[root]
                camera.distance, camera.azimuth, camera.elevation = distance, 90.0, -15.0
                renderer.update_scene(d, camera=camera, scene_option=option)
                buf = io.BytesIO()
                Image.fromarray(renderer.render()).save(buf, format="PNG")
                images.append("data:image/png;base64," + base64.b64encode(buf.getvalue()).decode())
            out[engine] = images
        renderer.close()
        q.put(("ok", out))
    except Exception as exc:  # reported in the page instead of the frames
        q.put(("error", f"{type(exc).__name__}: {exc}"))


def render_filmstrips(scene: Path, trajectories: dict, *, frames: int = 6, size=(180, 240),
                      timeout: float = 120.0) -> tuple[list[float], dict[str, list[str | None]], str | None]:
    """(instants [s], {engine: [png data URI, or None after its episode ended]}, error message or None)."""
    times = frame_times(trajectories, frames)
    strips = {e: (np.asarray(tr["qpos"]), frame_picks(np.asarray(tr["t"]), times))
              for e, tr in trajectories.items() if len(tr.get("qpos", [])) and len(tr.get("t", []))}
    if not strips:
        return [], {}, "no recorded trajectory (run crossval with recording on)"
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=_render, args=(str(scene), strips, size, q), daemon=True)
    proc.start()
    try:
        status, payload = q.get(timeout=timeout)
    except Exception:
        proc.kill()
        return [], {}, f"the renderer did not answer within {timeout:.0f} s (exit code {proc.exitcode})"
    finally:
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
    if status != "ok":
        return [], {}, f"rendering failed: {payload} (is MUJOCO_GL=egl usable here?)"
    return [float(x) for x in times], payload, None
