"""Short videos of the recorded episode per engine (--video, crosssim.report.video), in Chromium."""

from __future__ import annotations

import builtins
import os
import shutil

import numpy as np
import pytest

from crosssim.errors import CrossSimError
from crosssim.report.video import FPS, SECONDS, check_available, video_times

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def test_frames_cover_the_episode_up_to_the_cap():
    assert video_times(np.arange(1, 51) * 0.02)[[0, -1]].tolist() == [0.0, 1.0]  # a 1 s episode: 1 s of frames
    long = video_times(np.arange(1, 1001) * 0.008)  # an 8 s episode: the first SECONDS only
    assert len(long) == int(SECONDS * FPS) + 1 and long[-1] == pytest.approx(SECONDS)
    assert len(video_times(np.zeros(0))) == 0


def test_a_missing_encoder_is_one_line_naming_the_extra(monkeypatch, good_policy, tmp_path, capsys):
    real_import = builtins.__import__

    def no_ffmpeg(name, *args, **kw):
        if name == "imageio_ffmpeg":
            raise ImportError("No module named 'imageio_ffmpeg'")
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_ffmpeg)
    with pytest.raises(CrossSimError, match=r"pip install 'crosssim\[video\]'"):
        check_available()
    from crosssim.cli import main

    code = main(["crossval", "--policy", str(good_policy / "card.yaml"), "--engines", "mujoco", "--episodes", "1",
                 "--max-steps", "5", "--no-risk", "--video", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and "crosssim[video]" in err[-1] and len([e for e in err if "video" in e]) == 1
    assert not (tmp_path / "run" / "results.parquet").exists()  # refused before any engine ran


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Chromium not found: apt-get install chromium")
def test_video_per_engine_plays_in_the_report(good_policy, tmp_path):
    pytest.importorskip("imageio_ffmpeg", reason="the video extra is not installed: pip install 'crosssim[video]'")
    import imageio.v2 as imageio
    from playwright.sync_api import sync_playwright

    from crosssim.cli import main

    out = tmp_path / "run"
    assert main(["crossval", "--policy", str(good_policy / "card.yaml"), "--engines", "mujoco,pybullet",
                 "--episodes", "1", "--max-steps", "60", "--no-risk", "--video", "--out", str(out), "--quiet"]) == 0
    for engine in ("mujoco", "pybullet"):
        reader = imageio.get_reader(out / "videos" / f"{engine}.mp4")
        meta, frames = reader.get_meta_data(), sum(1 for _ in reader)
        assert meta["codec"] == "h264" and meta["size"] == (320, 240) and meta["fps"] == FPS
        # 60 control steps of 8 ms: 0.48 s of Hopper, 10 frames at 20 per second (or fewer: it may fall)
        assert 2 <= frames <= 10
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        for width in (1280, 390):
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.goto((out / "report.html").as_uri())
            page.wait_for_function("[...document.querySelectorAll('#video-grid video')].every(v => v.readyState >= 1)",
                                   timeout=30000)
            videos = page.evaluate("[...document.querySelectorAll('#video-grid video')].map(v => "
                                   "[v.closest('figure').dataset.engine, v.videoWidth, v.duration, "
                                   "v.getBoundingClientRect().width])")
            assert [v[0] for v in videos] == ["mujoco", "pybullet"]
            assert all(v[1] == 320 and 0 < v[2] < 1 and v[3] >= 300 for v in videos), videos
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            assert page.locator("a[href='videos/mujoco.mp4']").count() == 1
        browser.close()
