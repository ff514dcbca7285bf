"""A derived card (``crosssim correct train``) lives in another folder than its base card: every
path the base card states relative to itself must still point at the same file from there."""

from pathlib import Path

from crosssim.correct.train import _relocated


def test_robot_deployment_file_and_actuator_follow_the_card(tmp_path):
    base, out = tmp_path / "base", tmp_path / "runs" / "corrected"
    (base / "robots").mkdir(parents=True)
    out.mkdir(parents=True)
    for name in ("robots/r.xml", "gap.yaml", "net.pt"):
        (base / name).write_text("x")
    raw = {"robot": "robots/r.xml", "deployment": {"file": "gap.yaml", "actuator": "net.pt", "latency": 0.01}}
    moved = _relocated(raw, base, out)
    for key, value in (("robot", moved["robot"]), ("file", moved["deployment"]["file"]),
                       ("actuator", moved["deployment"]["actuator"])):
        assert (out / value).resolve() == (base / (raw["robot"] if key == "robot" else raw["deployment"][key])).resolve()
    assert moved["deployment"]["latency"] == 0.01 and raw["deployment"]["file"] == "gap.yaml"  # a copy
    assert _relocated({"robot": "gymnasium:hopper.xml"}, base, out)["robot"] == "gymnasium:hopper.xml"
