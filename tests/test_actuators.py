"""Actuator models (crosssim.actuators): learned actuator nets in the walk-these-ways and Isaac Lab
ActuatorNetMLP formats, and the DC-motor torque-speed envelope, with nets the tests make here.

The formula checks recompute every torque by hand (numpy, from the net's own weights and a
history kept by the test), so a wrong sign, scale, order or history shift fails them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import CARDS, requires_fixtures
from crosssim.actuation import Actuation
from crosssim.actuators import ActuatorModel, dc_envelope, load_spec, spec_files
from crosssim.errors import CrossSimError
from crosssim.variant import HarnessVariant, Variant

torch = pytest.importorskip("torch")
N = 3  # policy joints in the unit tests


class MLP(torch.nn.Module):
    """Linear -> Softsign -> Linear, the shape walk-these-ways' and ANYdrive's nets have."""

    def __init__(self, inputs: int, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.l1 = torch.nn.Linear(inputs, 8)
        self.act = torch.nn.Softsign()
        self.l2 = torch.nn.Linear(8, 1)

    def forward(self, x):
        return self.l2(self.act(self.l1(x)))


class Linear(torch.nn.Module):
    """torque = w . inputs (rows of position errors and velocities), for nets with a known law."""

    def __init__(self, w):
        super().__init__()
        self.l = torch.nn.Linear(len(w), 1, bias=False)
        with torch.no_grad():
            self.l.weight[:] = torch.tensor([w], dtype=torch.float32)

    def forward(self, x):
        return self.l(x)


def save(module, path: Path, inputs: int, *, trace: bool = False) -> Path:
    m = torch.jit.trace(module, torch.zeros(2, inputs)) if trace else torch.jit.script(module)
    m.save(str(path))
    return path


def by_hand(module: MLP, x: np.ndarray) -> np.ndarray:
    """The MLP's forward in float64 numpy from its weights: the formula the loader must reproduce."""
    w1, b1 = module.l1.weight.detach().double().numpy(), module.l1.bias.detach().double().numpy()
    w2, b2 = module.l2.weight.detach().double().numpy(), module.l2.bias.detach().double().numpy()
    h = x @ w1.T + b1
    return ((h / (1 + np.abs(h))) @ w2.T + b2)[:, 0]


def pd_actuation(kp=20.0, kd=0.5) -> Actuation:
    idx = np.arange(N)
    return Actuation("pd", joint_index=idx, dof_index=idx, qpos_index=idx, joint_count=N, gear=np.ones(N),
                     ctrl_low=np.full(N, -np.inf), ctrl_high=np.full(N, np.inf), kp=np.full(N, kp),
                     kd=np.full(N, kd), scale=np.ones(N), default_pos=np.zeros(N))


def model(spec_path: Path, free_speed=None, max_torque=np.inf, act=None) -> ActuatorModel:
    return ActuatorModel(act or pd_actuation(), load_spec(spec_path), free_speed, np.full(N, max_torque),
                         ["hip", "thigh", "calf"])


def trajectory(steps: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    return [(rng.normal(0, 0.3, N), rng.normal(0, 0.3, N), rng.normal(0, 3.0, N)) for _ in range(steps)]


def test_walk_these_ways_net_matches_hand_computation_across_steps(tmp_path):
    """Inputs per joint [e_t, e_t-1, e_t-2, qd_t, qd_t-1, qd_t-2], e = q - target, zero before the
    first step; torque = net output, unscaled."""
    net = MLP(6)
    m = model(save(net, tmp_path / "wtw.pt", 6))
    errs, vels = [np.zeros(N)] * 2, [np.zeros(N)] * 2
    for target, q, qd in trajectory(6):
        errs, vels = [q - target] + errs[:2], [qd] + vels[:2]
        x = np.stack(errs + vels, axis=1)  # (joints, 6)
        expected = by_hand(net, x)
        np.testing.assert_allclose(m.torques(target, q, qd), expected, rtol=1e-5, atol=1e-5)


def test_isaaclab_net_matches_hand_computation(tmp_path):
    """ActuatorNetMLP: e = target - q, history indices input_idx (0 = now), input_order vel_pos puts
    velocities first, pos_scale / vel_scale on the inputs, torque_scale on the output, then the DC
    envelope (ActuatorNetMLP is a DCMotor) with its saturation torque, free speed and effort limit."""
    net = MLP(6, seed=3)
    save(net, tmp_path / "anydrive.jit", 6, trace=True)
    spec = {"file": "anydrive.jit", "format": "isaaclab", "input_order": "vel_pos", "input_idx": [0, 2, 4],
            "pos_scale": 5.0, "vel_scale": 0.2, "torque_scale": 60.0, "saturation_torque": 120.0,
            "free_speed": 7.5, "torque_limit": 80.0}
    (tmp_path / "anydrive.yaml").write_text(yaml.safe_dump(spec))
    m = model(tmp_path / "anydrive.yaml")
    errs, vels = [np.zeros(N)] * 4, [np.zeros(N)] * 4
    for target, q, qd in trajectory(7):
        errs, vels = [target - q] + errs[:4], [qd] + vels[:4]
        x = np.concatenate([0.2 * np.stack([vels[i] for i in (0, 2, 4)], axis=1),
                            5.0 * np.stack([errs[i] for i in (0, 2, 4)], axis=1)], axis=1)
        tau = 60.0 * by_hand(net, x)
        hi = np.clip(120.0 * (1 - qd / 7.5), 0, 80.0)
        lo = np.clip(120.0 * (-1 - qd / 7.5), -80.0, 0)
        np.testing.assert_allclose(m.torques(target, q, qd), np.clip(tau, lo, hi), rtol=1e-5, atol=1e-4)


def test_plain_chains_are_rebuilt_from_their_weights_and_others_run_sandboxed(tmp_path):
    """A Linear/activation chain is rebuilt from its tensors (read as data) and used once it
    reproduced the sandboxed file; a forward that does more than its layers say fails that check
    and runs in the sandbox at every physics step, with the same torques either way."""
    from crosssim.policies.chain import rebuild, verified

    chain = rebuild(save(MLP(6), tmp_path / "mlp.pt", 6))
    x = np.random.default_rng(2).normal(size=(5, 6))
    assert chain is not None and (chain.inputs, chain.outputs) == (6, 1)
    net = torch.jit.load(str(tmp_path / "mlp.pt"))  # the test's own file: trusted
    np.testing.assert_allclose(chain(x)[:, 0], net(torch.from_numpy(x).float()).detach().numpy()[:, 0], rtol=1e-5,
                               atol=1e-6)
    assert verified(tmp_path / "mlp.pt")[0] is not None

    class Doubled(MLP):
        def forward(self, x):
            return self.l2(self.act(2.0 * self.l1(x)))

    doubled = Doubled(6)
    save(doubled, tmp_path / "doubled.pt", 6)
    assert rebuild(tmp_path / "doubled.pt") is not None  # the same layers: only the check tells them apart
    wrong, sandboxed = verified(tmp_path / "doubled.pt")
    assert wrong is None and sandboxed.action_size == 1
    sandboxed.close()
    m = model(tmp_path / "doubled.pt")
    target, q, qd = trajectory(1)[0]
    x = np.stack([q - target, 0 * q, 0 * q, qd, 0 * q, 0 * q], axis=1)
    w1, b1 = doubled.l1.weight.detach().double().numpy(), doubled.l1.bias.detach().double().numpy()
    h = 2.0 * (x @ w1.T + b1)
    expected = (h / (1 + np.abs(h))) @ doubled.l2.weight.detach().double().numpy().T + doubled.l2.bias.item()
    np.testing.assert_allclose(m.torques(target, q, qd), expected[:, 0], rtol=1e-5, atol=1e-5)


def test_history_resets_per_episode(tmp_path):
    """After reset() the net sees the same zero history as a fresh model: same torques."""
    m = model(save(MLP(6), tmp_path / "wtw.pt", 6))
    steps = trajectory(4)
    first = [m.torques(*s) for s in steps]
    m.reset()
    again = [m.torques(*s) for s in steps]
    np.testing.assert_array_equal(np.array(first), np.array(again))
    # and the history matters: the same step without its past gives another torque
    fresh = model(tmp_path / "wtw.pt")
    assert not np.allclose(fresh.torques(*steps[3]), first[3])


def test_pd_equivalent_net_reproduces_the_ideal_law(tmp_path):
    """A walk-these-ways net with weights [-kp, 0, 0, -kd, 0, 0] is the PD law, sign included."""
    m = model(save(Linear([-20.0, 0, 0, -0.5, 0, 0]), tmp_path / "pd.pt", 6))
    act = pd_actuation(20.0, 0.5)
    for target, q, qd in trajectory(3):
        np.testing.assert_allclose(m.torques(target, q, qd), act.torques(target, q, qd), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("qd,tau,expected", [
    (0.0, 50.0, 20.0),     # at rest: the flat limit (saturation 30 is above it)
    (5.0, 50.0, 15.0),     # half the free speed: 30 (1 - 0.5)
    (10.0, 50.0, 0.0),     # at free speed: no forward torque left
    (12.0, -50.0, -20.0),  # braking beyond free speed: the flat limit, backwards
    (5.0, -50.0, -20.0),   # braking: 30 (-1 - 0.5) = -45, within the limit
    (-5.0, -50.0, -15.0),  # mirrored
    (5.0, 3.0, 3.0),       # inside the envelope: unchanged
])
def test_dc_envelope_table(qd, tau, expected):
    out = dc_envelope(np.array([tau]), np.array([qd]), np.array([30.0]), np.array([10.0]), np.array([20.0]))
    assert out[0] == pytest.approx(expected)


def test_dc_envelope_without_a_torque_limit_is_a_speed_cap():
    out = dc_envelope(np.array([5.0, 5.0, -5.0]), np.array([1.0, 11.0, -11.0]), np.full(3, np.inf),
                      np.full(3, 10.0), np.full(3, np.inf))
    np.testing.assert_array_equal(out, [5.0, 0.0, 0.0])


def test_free_speed_alone_bounds_the_card_law():
    """motor_free_speed with no actuator file: the card's PD law inside each joint's envelope,
    stall torque = its maximum torque."""
    act = pd_actuation()
    m = ActuatorModel(act, None, 8.0, np.full(N, 10.0), ["a", "b", "c"])
    target, q, qd = np.ones(N), np.zeros(N), np.array([0.0, 4.0, 8.0])
    np.testing.assert_allclose(m.torques(target, q, qd), [10.0, 5.0, 0.0])


def test_free_speed_must_be_positive():
    from crosssim.actuators import build_actuator

    with pytest.raises(CrossSimError, match="motor_free_speed must be a joint speed above 0"):
        build_actuator(HarnessVariant(motor_free_speed=0.0), None)


def test_spec_per_joint_values(tmp_path):
    (tmp_path / "dc.yaml").write_text("model: dc_motor\nfree_speed: {'hip|thigh': 30.0, calf: 20.0}\n"
                                      "saturation_torque: [23.7, 23.7, 35.55]\n")
    m = model(tmp_path / "dc.yaml")
    np.testing.assert_array_equal(m.free_speed, [30.0, 30.0, 20.0])
    np.testing.assert_array_equal(m.saturation, [23.7, 23.7, 35.55])


def _one_line(exc_info, name: str) -> str:
    msg = str(exc_info.value)
    assert "\n" not in msg and name in msg, msg
    return msg


def test_format_errors_are_one_line_naming_the_file(tmp_path):
    bad = tmp_path / "garbage.pt"
    bad.write_bytes(b"not a zip")
    with pytest.raises(CrossSimError) as e:
        model(bad)
    assert "not a zip" in _one_line(e, "garbage.pt")

    # the net takes 4 inputs, the walk-these-ways format gives 6
    save(MLP(4), tmp_path / "narrow.pt", 4)
    with pytest.raises(CrossSimError) as e:
        model(tmp_path / "narrow.pt")
    assert "takes 4 inputs per joint, but its format feeds 6" in _one_line(e, "narrow.pt")

    (tmp_path / "lab.yaml").write_text("file: narrow.pt\nformat: isaaclab\ninput_idx: [0, 1]\n")
    with pytest.raises(CrossSimError) as e:
        load_spec(tmp_path / "lab.yaml")
    assert "input_order" in _one_line(e, "lab.yaml")

    (tmp_path / "typo.yaml").write_text("file: narrow.pt\ntorque_scal: 2\n")
    with pytest.raises(CrossSimError) as e:
        load_spec(tmp_path / "typo.yaml")
    assert "torque_scal" in _one_line(e, "typo.yaml")

    with pytest.raises(CrossSimError) as e:
        load_spec(tmp_path / "missing.pt")
    _one_line(e, "missing.pt")


def test_untrusted_code_is_refused_before_loading(tmp_path):
    class Chatty(torch.nn.Module):
        def forward(self, x):
            print(x)
            return x[:, :1]

    save(Chatty(), tmp_path / "chatty.pt", 6)
    with pytest.raises(CrossSimError) as e:
        model(tmp_path / "chatty.pt")
    msg = _one_line(e, "chatty.pt")
    assert "print" in msg and "trust-policy-code" not in msg


def test_net_needs_a_position_target(tmp_path):
    motor = Actuation("motor", joint_index=np.arange(N), dof_index=np.arange(N), qpos_index=np.arange(N),
                      joint_count=N, gear=np.ones(N), ctrl_low=-np.ones(N), ctrl_high=np.ones(N))
    with pytest.raises(CrossSimError) as e:
        model(save(MLP(6), tmp_path / "wtw.pt", 6), act=motor)
    assert "action.mode" in _one_line(e, "wtw.pt")


def test_variant_and_profile_carry_the_actuator(tmp_path, monkeypatch):
    from crosssim.profiles import load_profile

    save(MLP(6), tmp_path / "net.pt", 6)
    (tmp_path / "mujoco-net.yaml").write_text("engine: mujoco\nsettings:\n  actuator: net.pt\n  motor_free_speed: 20\n")
    monkeypatch.setenv("CROSSSIM_SIMULATORS", str(tmp_path))
    p = load_profile("mujoco-net").variant.harness
    assert p.actuator == str((tmp_path / "net.pt").resolve()) and p.motor_free_speed == 20.0
    # a perturbation on top: the tighter free speed wins, another actuator file replaces
    top = Variant(harness=HarnessVariant(actuator="/other.pt", motor_free_speed=30.0))
    both = Variant(harness=p).then(top).harness
    assert both.actuator == "/other.pt" and both.motor_free_speed == 20.0
    (tmp_path / "bad.yaml").write_text("engine: mujoco\nsettings:\n  actuator: 3\n")
    with pytest.raises(CrossSimError, match="'actuator' must be a file path"):
        load_profile("bad")


def test_cache_key_follows_the_net_bytes(tmp_path):
    """The variant holds a path; the result cache must hash the spec and the net it names."""
    from crosssim.runner.inputs import actuator_digest

    save(MLP(6), tmp_path / "net.pt", 6)
    (tmp_path / "spec.yaml").write_text("file: net.pt\n")
    assert spec_files(tmp_path / "spec.yaml") == [tmp_path / "spec.yaml", (tmp_path / "net.pt").resolve()]
    before = actuator_digest(str(tmp_path / "spec.yaml"))
    save(MLP(6, seed=9), tmp_path / "net.pt", 6)
    assert actuator_digest(str(tmp_path / "spec.yaml")) != before
    assert actuator_digest(None) == "-"


def test_perturbation_sweeps_the_actuator():
    from crosssim.variant import ModelVariant, Variant

    p = Variant.of(actuator="/a.pt", motor_free_speed=10.0)
    assert p.harness.actuator == "/a.pt" and p.harness.motor_free_speed == 10.0 and p.model == ModelVariant()


# -- the policy feels it: a weak actuator net costs the Go1 policy speed ---------------------------

GO1 = CARDS / "robots" / "playground-go1.yaml"


@requires_fixtures
def test_weak_actuator_net_slows_go1(tmp_path, monkeypatch):
    """Go1 (MJX policy, 10 s at 0.5 m/s) under three walk-these-ways nets: one equal to its position
    actuators (kp 35) walks like nominal; one at 60 % of that stiffness walks slower by the task's
    tracking metric. docs/actuators.md has the numbers for 20 s episodes."""
    import pandas as pd

    from crosssim.card import load_card
    from crosssim.evaluate import crossval
    from crosssim.runner import CrossvalConfig
    from crosssim.tasks import make_task

    raw = yaml.safe_load(GO1.read_text())
    raw["robot"] = str((GO1.parent / raw["robot"]).resolve())
    raw["policy"]["file"] = str((GO1.parent / raw["policy"]["file"]).resolve())
    raw["task_options"]["episode_seconds"] = 10
    card = tmp_path / "go1.yaml"
    card.write_text(yaml.safe_dump(raw))
    sims = tmp_path / "simulators"
    sims.mkdir()
    for name, w in {"pd": [-35.0, 0, 0, 0, 0, 0], "weak": [-21.0, 0, 0, 0, 0, 0]}.items():
        save(Linear(w), sims / f"{name}.pt", 6)
        # The nets stand for the torque law alone: the MJCF's servo terms stay (servo_terms: keep).
        (sims / f"mujoco-{name}.yaml").write_text(f"engine: mujoco\nsettings:\n  actuator: {name}.pt\n"
                                                  "  servo_terms: keep\n")
    monkeypatch.setenv("CROSSSIM_SIMULATORS", str(sims))
    engines = ("mujoco", "mujoco-pd", "mujoco-weak")
    crossval(CrossvalConfig(policy=str(card), engines=engines, episodes=1, out=str(tmp_path / "run"), risk=False,
                            report=False, cache_dir=str(tmp_path / "cache")))
    df = pd.read_parquet(tmp_path / "run" / "results.parquet")
    c = load_card(card)
    task = make_task(c.task, **c.task_options)
    tracking = {e: float(task.metric_values(df[df.engine == e], "tracking")[0]) for e in engines}
    speed = {e: float(df[df.engine == e].x_velocity.iloc[0]) for e in engines}
    assert speed["mujoco-pd"] == pytest.approx(speed["mujoco"], abs=0.02), speed
    assert tracking["mujoco-pd"] == pytest.approx(tracking["mujoco"], abs=0.02), tracking
    assert speed["mujoco-weak"] < speed["mujoco"] - 0.03, speed
    assert tracking["mujoco-weak"] < tracking["mujoco"] - 0.03, tracking


# -- every engine receives the model's torques -----------------------------------------------------

ANT = CARDS / "ant-locomotion.yaml"


def _ant_pd_card(tmp_path) -> Path:
    """The registry's Ant smoke card with a PD law (kp 5, kd 0) instead of its motors, and a
    fixed random linear TorchScript policy (70 observations -> 8 actions) that moves the legs."""
    raw = yaml.safe_load(ANT.read_text())
    raw["action"] = {"mode": "pd", "kp": 5.0, "kd": 0.0, "scale": 0.5, "torque_limit": 1e6}
    torch.manual_seed(0)
    torch.jit.script(torch.nn.Sequential(torch.nn.Linear(70, 8), torch.nn.Tanh())).save(str(tmp_path / "ant.pt"))
    raw["policy"] = {"file": "ant.pt", "format": "torchscript"}
    card = tmp_path / "ant-pd.yaml"
    card.write_text(yaml.safe_dump(raw))
    return card


@pytest.mark.parametrize("engine", ["mujoco", "pybullet"])
def test_every_engine_steps_with_the_model(tmp_path, engine):
    """In each engine, a net equal to the card's PD law gives the ideal law's trajectory, and a
    net at 40 % of its stiffness, one step late, a different one: the engines receive the
    harness's torques, not their own motors'."""
    pytest.importorskip(engine)
    from crosssim.card import load_card
    from crosssim.engines.settings import EngineProfile
    from crosssim.runner.episode import Episode
    from crosssim.runner.harness import Harness
    from crosssim.runner.simulator import open_engine
    from crosssim.runner.stepper import ControlStepper

    h = Harness.from_card(load_card(_ant_pd_card(tmp_path)))
    nets = {"ideal": None, "pd": save(Linear([-5.0, 0, 0, 0, 0, 0]), tmp_path / "pd.pt", 6),
            "weak": save(Linear([0, -2.0, 0, 0, 0, 0]), tmp_path / "weak.pt", 6)}
    final = {}
    for name, net in nets.items():
        # servo_terms keep: these nets are the card's PD law alone, Ant's joint damping is no servo's
        top = Variant(harness=HarnessVariant(actuator=None if net is None else str(net), servo_terms="keep"))
        sim = open_engine(EngineProfile(name=engine, engine=engine), h.scene, top)
        try:
            ep = Episode(ControlStepper(sim, h))
            ep.start(0)
            for t in range(40):
                ep.advance(np.sin(0.3 * t + np.arange(h.action_size)))
            final[name] = ep.frame.qpos.copy()
        finally:
            sim.close()
    np.testing.assert_allclose(final["pd"], final["ideal"], atol=1e-3)
    assert np.abs(final["weak"] - final["ideal"]).max() > 0.05


def test_crossval_refuses_a_bad_actuator_file_before_running(tmp_path, monkeypatch):
    from crosssim.evaluate import crossval
    from crosssim.runner import CrossvalConfig

    sims = tmp_path / "simulators"
    sims.mkdir()
    (sims / "bad.pt").write_bytes(b"not a zip")
    (sims / "mujoco-bad.yaml").write_text("engine: mujoco\nsettings:\n  actuator: bad.pt\n")
    monkeypatch.setenv("CROSSSIM_SIMULATORS", str(sims))
    with pytest.raises(CrossSimError) as e:
        crossval(CrossvalConfig(policy=str(_ant_pd_card(tmp_path)), engines=("mujoco", "mujoco-bad"), episodes=1,
                                out=str(tmp_path / "run"), risk=False, report=False, trust_policy_code=True,
                                cache_dir=str(tmp_path / "cache")))
    _one_line(e, "bad.pt")
    assert not (tmp_path / "run" / "results.parquet").exists()


def test_swept_actuator_conditions_run_and_key_by_content(tmp_path):
    """A crossval condition (Variant fields, what the sweeps send to workers) carrying an
    actuator file or a free speed runs through the worker, one at a time and in lockstep alike,
    deterministically; the result cache keys such a row by the net's bytes."""
    from crosssim.card import load_card
    from crosssim.runner.cache import ResultCache
    from crosssim.runner.harness import Harness
    from crosssim.runner.workers import EngineJob, execute_job

    card = _ant_pd_card(tmp_path)
    weak = str(save(Linear([0, -2.0, 0, 0, 0, 0]), tmp_path / "weak.pt", 6))
    conditions = (("nominal", {}), ("weak", {"actuator": weak}), ("slow", {"motor_free_speed": 0.5}))
    episodes = ((0, 0), (1, 1))

    def rows(batch: bool) -> dict:
        out = {}

        def emit(kind, payload):
            assert kind != "error", payload
            if kind == "row":
                out[(payload["condition"], payload["episode"])] = payload["ret"]

        execute_job(EngineJob(str(card), "mujoco", episodes, trust=True, max_steps=30, conditions=conditions,
                              batch=batch), emit)
        return out

    from crosssim.engines.registry import get_engine
    from crosssim.policies import load_policy
    from crosssim.runner.batched import can_batch

    h = Harness.from_card(load_card(card))
    policy = load_policy(load_card(card), obs_size=h.obs_size, action_size=h.action_size, trust=True)
    assert can_batch(get_engine("mujoco"), policy)  # so batch=True really runs in lockstep
    one, again, lockstep = rows(False), rows(False), rows(True)
    assert one == again and len(one) == 6
    assert one.keys() == lockstep.keys()
    np.testing.assert_allclose([lockstep[k] for k in one], list(one.values()), rtol=1e-6)
    assert one[("weak", 0)] != one[("nominal", 0)] and one[("slow", 0)] != one[("nominal", 0)]

    c = load_card(card)
    cache = ResultCache(tmp_path / "cache", card=c, scene=Harness.from_card(c).scene, max_steps=30, trust=True,
                        profiles={"mujoco": None})
    fields = {"actuator": weak}
    before = cache.key("mujoco", "weak", fields, 0)
    assert cache.key("mujoco", "weak", fields, 0) == before
    save(Linear([0, -3.0, 0, 0, 0, 0]), Path(weak), 6)
    assert cache.key("mujoco", "weak", fields, 0) != before


def test_an_actuator_net_replaces_the_servo_terms_the_model_held(tmp_path, monkeypatch):
    """Issue 33: with a learned actuator net the MJCF's joint damping, armature and friction loss
    (the servo's stand-ins) are removed, unless the profile states them; a DC-motor envelope keeps them."""
    from crosssim.profiles import load_profile
    from crosssim.runner.harness import Harness
    from crosssim.runner.simulator import open_engine
    from crosssim.variant import compile_model

    save(MLP(6), tmp_path / "net.pt", 6)
    (tmp_path / "dc.yaml").write_text("model: dc_motor\nfree_speed: 20\n")
    for name, settings in {"mujoco-net": "actuator: net.pt", "mujoco-kept": "actuator: net.pt\n  joint_damping: 0.7",
                           "mujoco-dc": "actuator: dc.yaml", "mujoco-all": "actuator: net.pt\n  servo_terms: keep",
                           "mujoco-typo": "actuator: net.pt\n  servo_terms: keeep"}.items():
        (tmp_path / f"{name}.yaml").write_text(f"engine: mujoco\nsettings:\n  {settings}\n")
    monkeypatch.setenv("CROSSSIM_SIMULATORS", str(tmp_path))
    scene = Harness.for_task("Hopper").scene
    hinges = [3, 4, 5]  # thigh, leg, foot (the root's three dofs carry no servo terms in Hopper)

    def terms(profile):
        sim = open_engine(load_profile(profile), scene)
        try:
            mj = compile_model(scene, sim.variant.model).mj
            return mj.dof_damping[hinges], mj.dof_armature[hinges], mj.dof_frictionloss[hinges]
        finally:
            sim.close()

    damping, armature, _ = terms("mujoco")
    assert (damping > 0).all() and (armature > 0).all()  # gymnasium's hopper.xml: damping 1, armature 1
    assert all((t == 0).all() for t in terms("mujoco-net"))
    kept = terms("mujoco-kept")
    assert np.allclose(kept[0], 0.7) and (kept[1] == 0).all()
    assert np.allclose(terms("mujoco-dc")[0], damping) and np.allclose(terms("mujoco-all")[1], armature)
    with pytest.raises(CrossSimError, match="'servo_terms' must be keep or remove"):
        load_profile("mujoco-typo")
