"""Filmstrips: a few frames of episode 0 in every engine, rendered from each engine's own states.

Every engine's recorded generalized coordinates (canonical MuJoCo layout) are drawn through
MuJoCo's offscreen renderer (``MUJOCO_GL=egl`` works on Mesa's software renderer; no GPU), so
frames of different engines are directly comparable. Rendering runs in a child process: an
OpenGL failure costs the filmstrip, never the report.
"""

from __future__ import annotations

import base64
import io
import multiprocessing as mp
import os
from pathlib import Path

import numpy as np

from crosssim.scene import load_mujoco_model


def _render(scene: str, strips: dict, frames: int, size: tuple[int, int], q) -> None:
    os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        import mujoco
        from PIL import Image

        m = load_mujoco_model(Path(scene))  # size limits first (the scene path comes from summary.json)
        d = mujoco.MjData(m)
        renderer = mujoco.Renderer(m, size[0], size[1])
        camera = mujoco.MjvCamera()
        out = {}
        for engine, qpos in strips.items():
            images = []
            picks = np.linspace(0, len(qpos) - 1, frames).astype(int) if len(qpos) else []
            for k in picks:
                d.qpos[:] = qpos[k]
                mujoco.mj_forward(m, d)
                camera.type = mujoco.mjtCamera.mjCAMERA_FREE
                camera.lookat[:] = d.xpos[1]
                camera.distance, camera.azimuth, camera.elevation = 3.5, 90.0, -15.0
                renderer.update_scene(d, camera=camera)
                buf = io.BytesIO()
                Image.fromarray(renderer.render()).save(buf, format="PNG")
                images.append("data:image/png;base64," + base64.b64encode(buf.getvalue()).decode())
            out[engine] = images
        renderer.close()
        q.put(("ok", out))
    except Exception as exc:  # reported in the page instead of the frames
        q.put(("error", f"{type(exc).__name__}: {exc}"))


def render_filmstrips(scene: Path, trajectories: dict, *, frames: int = 6, size=(180, 240),
                      timeout: float = 120.0) -> tuple[dict[str, list[str]], str | None]:
    """({engine: [png data URI]}, error message or None)."""
    strips = {e: np.asarray(tr["qpos"]) for e, tr in trajectories.items() if len(tr.get("qpos", []))}
    if not strips:
        return {}, "no recorded trajectory (run crossval with recording on)"
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=_render, args=(str(scene), strips, frames, size, q), daemon=True)
    proc.start()
    try:
        status, payload = q.get(timeout=timeout)
    except Exception:
        proc.kill()
        return {}, f"the renderer did not answer within {timeout:.0f} s (exit code {proc.exitcode})"
    finally:
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
    return (payload, None) if status == "ok" else ({}, f"rendering failed: {payload} (is MUJOCO_GL=egl usable here?)")
