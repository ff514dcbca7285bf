"""Short videos of the recorded episode, one MP4 per engine (``--video``), for the report.

Each engine's recorded generalized coordinates are drawn through MuJoCo's offscreen renderer with
the filmstrips' camera (crosssim.report.filmstrip), so every engine's video shows the same robot
from the same place, and encoded as H.264 by imageio with imageio-ffmpeg, which ships its own
ffmpeg binary (the optional ``video`` extra: nothing to install system-wide). Rendering and
encoding run in a child process: an OpenGL or encoder failure costs the videos, never the report.
Files: ``DIR/videos/<engine>.mp4``; the report embeds them, so report.html stays one file.
"""

from __future__ import annotations

import base64
import multiprocessing as mp
import os
from pathlib import Path

import numpy as np

from crosssim.errors import CrossSimError
from crosssim.report.filmstrip import frame_picks

VIDEOS_DIR = "videos"
SECONDS = 5.0
"""Simulated time a video shows at most [s] (the episode's start): short enough to embed, and to
render in software (a meshed G1 frame takes 0.26-0.5 s on a busy 2-core machine without shadows)."""
FPS = 20
SIZE = (320, 240)
"""Width and height [px]: multiples of 16, as H.264's yuv420p wants."""


def check_available() -> None:
    """Raise CrossSimError naming the extra when imageio or its ffmpeg is missing."""
    try:
        import imageio  # noqa: F401
        import imageio_ffmpeg

        imageio_ffmpeg.get_ffmpeg_exe()
    except (ImportError, RuntimeError) as exc:
        raise CrossSimError(f"--video needs imageio and imageio-ffmpeg, which ships its own encoder ({exc}): "
                            "pip install 'crosssim[video]'") from None


def video_times(t: np.ndarray, seconds: float = SECONDS, fps: int = FPS) -> np.ndarray:
    """The frame instants [s] of one engine's episode: every 1/fps from 0 to its end, at most ``seconds``."""
    if not len(t):
        return np.zeros(0)
    return np.arange(0.0, min(float(t[-1]), seconds) + 1e-9, 1.0 / fps)


def _render(scene: str, episodes: dict, folder: str, size: tuple[int, int], fps: int, q) -> None:
    os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        import imageio.v2 as imageio
        import mujoco

        from crosssim.report.filmstrip import _robot_size, _root_body, _scene_option
        from crosssim.scene import load_mujoco_model

        m = load_mujoco_model(Path(scene))
        d = mujoco.MjData(m)
        renderer = mujoco.Renderer(m, size[1], size[0])
        camera, root, option = mujoco.MjvCamera(), _root_body(m), _scene_option(m)
        camera.type = mujoco.mjtCamera.mjCAMERA_FREE
        mujoco.mj_forward(m, d)
        distance = 0.6 + 1.4 * _robot_size(m, d, root)
        Path(folder).mkdir(parents=True, exist_ok=True)
        costly = (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION)
        out = {}
        for engine, (qpos, picks) in episodes.items():
            path = Path(folder) / f"{engine}.mp4"
            with imageio.get_writer(path, fps=fps, codec="libx264", quality=6, macro_block_size=16,
                                    ffmpeg_log_level="error") as writer:
                for k in picks:
                    d.qpos[:] = qpos[k]
                    mujoco.mj_forward(m, d)
                    camera.lookat[:] = d.subtree_com[root]
                    camera.distance, camera.azimuth, camera.elevation = distance, 90.0, -15.0
                    renderer.update_scene(d, camera=camera, scene_option=option)
                    for flag in costly:  # shadows and reflections cost 3-4x the frame in software GL
                        renderer.scene.flags[flag] = 0
                    writer.append_data(renderer.render())
            out[engine] = str(path)
        renderer.close()
        q.put(("ok", out))
    except Exception as exc:  # said in the terminal and the page instead of the videos
        q.put(("error", f"{type(exc).__name__}: {exc}"))


def render_videos(scene: Path, trajectories: dict, folder: Path, *, seconds: float = SECONDS, fps: int = FPS,
                  size: tuple[int, int] = SIZE, timeout: float = 600.0) -> tuple[dict[str, Path], str | None]:
    """Write ``folder/<engine>.mp4`` for every recorded engine: ({engine: path}, error message or None)."""
    episodes = {}
    for e, tr in trajectories.items():
        t, qpos = np.asarray(tr.get("t", [])), np.asarray(tr.get("qpos", []))
        picks = [k for k in frame_picks(t, video_times(t, seconds, fps)) if k is not None]
        if picks and len(qpos):
            episodes[e] = (qpos, picks)
    if not episodes:
        return {}, "no recorded trajectory (run crossval with recording on)"
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=_render, args=(str(scene), episodes, str(folder), size, fps, q), daemon=True)
    proc.start()
    try:
        status, payload = q.get(timeout=timeout)
    except Exception:
        proc.kill()
        return {}, f"the video renderer did not answer within {timeout:.0f} s (exit code {proc.exitcode})"
    finally:
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
    if status != "ok":
        return {}, f"videos not written: {payload} (is MUJOCO_GL=egl usable here?)"
    return {e: Path(p) for e, p in payload.items()}, None


def embedded(folder: Path, engines: list[str]) -> list[tuple[str, str, str]]:
    """(engine, data URI, file name relative to the run folder) of each engine's video in
    ``folder/videos`` (the report embeds them: one self-contained page)."""
    out = []
    for e in engines:
        path = Path(folder) / VIDEOS_DIR / f"{e}.mp4"
        if path.is_file():
            uri = "data:video/mp4;base64," + base64.b64encode(path.read_bytes()).decode()
            out.append((e, uri, f"{VIDEOS_DIR}/{path.name}"))
    return out


__all__ = ["VIDEOS_DIR", "check_available", "embedded", "render_videos", "video_times"]
