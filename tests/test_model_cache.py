"""Compiled models kept between runs (crosssim.model_cache): same physics, never stale."""

from __future__ import annotations

import numpy as np
import pytest

from crosssim import model_cache
from crosssim.scene import _parsed, load_mujoco_model

CUBE = "\n".join(["v -0.1 -0.1 -0.1", "v 0.1 -0.1 -0.1", "v 0.1 0.1 -0.1", "v -0.1 0.1 -0.1",
                  "v -0.1 -0.1 0.1", "v 0.1 -0.1 0.1", "v 0.1 0.1 0.1", "v -0.1 0.1 0.1",
                  "f 1 3 2", "f 1 4 3", "f 5 6 7", "f 5 7 8", "f 1 2 6", "f 1 6 5",
                  "f 2 3 7", "f 2 7 6", "f 3 4 8", "f 3 8 7", "f 4 1 5", "f 4 5 8"]) + "\n"
SCENE = """<mujoco><compiler meshdir="meshes"/><asset><mesh name="cube" file="cube.obj"/></asset>
<worldbody><geom type="plane" size="2 2 .1"/>
<body name="b" pos="0 0 0.5"><freejoint/><geom type="mesh" mesh="cube" density="1000"/></body>
</worldbody></mujoco>"""


@pytest.fixture
def scene(tmp_path, monkeypatch):
    monkeypatch.setenv("CROSSSIM_MODEL_CACHE", str(tmp_path / "models"))
    (tmp_path / "robot" / "meshes").mkdir(parents=True)
    (tmp_path / "robot" / "meshes" / "cube.obj").write_text(CUBE)
    (tmp_path / "robot" / "scene.xml").write_text(SCENE)
    _parsed.cache_clear()  # each load below reads the disk, as a new process would
    yield tmp_path / "robot" / "scene.xml"
    _parsed.cache_clear()


def _rollout(m, steps=300):
    import mujoco

    d = mujoco.MjData(m)
    for _ in range(steps):
        mujoco.mj_step(m, d)
    return d.qpos.copy()


def _load(path):
    _parsed.cache_clear()
    return load_mujoco_model(path)


def _edit(obj, text):
    """Rewrite a mesh as a later process would see it: MuJoCo's own in-process asset cache keys a
    file by its modification time to the second, so an edit within the same second is not read."""
    import os

    later = obj.stat().st_mtime + 10
    obj.write_text(text)
    os.utime(obj, (later, later))


def test_second_load_reads_the_compiled_file_and_steps_the_same(scene, tmp_path, monkeypatch):
    import mujoco

    first = _load(scene)
    files = list((tmp_path / "models").glob("*.mjb"))
    assert len(files) == 1
    # The second load must come from the file: MuJoCo's XML compile is made to fail.
    monkeypatch.setattr(mujoco.MjModel, "from_xml_path", lambda *a: pytest.fail("compiled the XML again"))
    second = _load(scene)
    assert np.array_equal(_rollout(first), _rollout(second))  # same physics, bit for bit
    assert second.nmeshvert == first.nmeshvert and second.body_mass[1] == pytest.approx(first.body_mass[1], rel=0)


def test_editing_a_mesh_compiles_again(scene, tmp_path):
    small = _load(scene)
    obj = scene.parent / "meshes" / "cube.obj"
    _edit(obj, obj.read_text().replace("0.1", "0.2"))
    big = _load(scene)
    assert big.body_mass[1] == pytest.approx(8 * small.body_mass[1])  # the new mesh, not the stale model
    assert len(list((tmp_path / "models").glob("*.mjb"))) == 2


def test_corrupt_file_is_compiled_again_and_replaced(scene, tmp_path):
    good = _load(scene)
    (file,) = (tmp_path / "models").glob("*.mjb")
    file.write_bytes(b"not a model")
    again = _load(scene)
    assert np.array_equal(_rollout(good), _rollout(again))
    assert file.stat().st_size > 1000  # rewritten


def test_scene_without_assets_and_cache_off_write_nothing(scene, tmp_path, monkeypatch):
    hopper = tmp_path / "hopper" / "hopper.xml"
    hopper.parent.mkdir()
    hopper.write_text(SCENE.replace('<compiler meshdir="meshes"/><asset><mesh name="cube" file="cube.obj"/></asset>', "")
                      .replace('type="mesh" mesh="cube"', 'type="box" size=".1 .1 .1"'))
    _load(hopper)
    assert not (tmp_path / "models").exists()  # compiles in milliseconds: nothing to keep
    monkeypatch.setenv("CROSSSIM_MODEL_CACHE", "off")
    _load(scene)
    assert not (tmp_path / "models").exists()


def test_only_the_newest_are_kept(scene, tmp_path, monkeypatch):
    monkeypatch.setattr(model_cache, "KEEP", 2)
    obj = scene.parent / "meshes" / "cube.obj"
    for scale in ("0.1", "0.2", "0.3"):
        _edit(obj, CUBE.replace("0.1", scale))
        _load(scene)
    assert len(list((tmp_path / "models").glob("*.mjb"))) == 2


def test_editing_an_included_file_outside_the_folder_compiles_again(scene, tmp_path):
    shared = tmp_path / "shared" / "body.xml"
    shared.parent.mkdir()
    shared.write_text('<mujoco><worldbody><body name="c" pos="1 0 0.5"><freejoint/>'
                      '<geom type="box" size=".1 .1 .1" density="1000"/></body></worldbody></mujoco>')
    scene.write_text(SCENE.replace("</mujoco>", '<include file="../shared/body.xml"/></mujoco>'))
    light = _load(scene)
    _edit(shared, shared.read_text().replace('density="1000"', 'density="3000"'))
    heavy = _load(scene)
    assert heavy.body_mass[2] == pytest.approx(3 * light.body_mass[2])
