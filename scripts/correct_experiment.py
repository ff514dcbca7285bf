"""`make correct`: does a residual learned from an operator's corrections transfer? (docs/correction.md)

A policy that fails in a perturbed profile runs there with a simulated operator that takes over
when a condition trips; a residual is learned from those corrections; base and corrected
policies are then measured where the corrections were collected and where none were (other
gaps, another engine), and by crossval (verdict, margins) in MuJoCo and PyBullet. Setups:
``pendulum`` (default: a soft linear InvertedPendulum controller on weak motors, corrected by a
stiffer one) and ``hopper`` (the default Hopper policy on a slippery floor, the PyBullet-trained
Hopper as operator). Prints a Markdown summary and writes it with the raw numbers to
reports/correct/<setup>/.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Setup:
    base: Path
    operator: Path
    takeover: str
    collected: tuple[str, str]
    places: tuple[tuple[str, str], ...]


def hopper(out: Path) -> Setup:
    """The default Hopper policy on a slippery floor; the PyBullet-trained Hopper as operator."""
    return Setup(ROOT / "policies" / "hopper-ppo-mujoco" / "card.yaml",
                 ROOT / "policies" / "hopper-ppo-pybullet" / "card.yaml", "|joint:rooty|>0.12",
                 ("mujoco", "friction_scale=0.3"),
                 (("mujoco", ""), ("mujoco", "friction_scale=0.3"), ("mujoco", "action_latency=2"),
                  ("mujoco", "motor_strength=0.6"), ("pybullet", ""), ("pybullet", "friction_scale=0.3")))


def _linear_policy(folder: Path, gains: list[float]) -> Path:
    """A linear InvertedPendulum controller a = K obs, as a TorchScript policy and card."""
    import torch

    class Linear(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.k = torch.nn.Parameter(torch.tensor([gains], dtype=torch.float32), requires_grad=False)

        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            return torch.clamp(obs @ self.k.t(), -3.0, 3.0)

    folder.mkdir(parents=True, exist_ok=True)
    torch.jit.save(torch.jit.script(Linear()), str(folder / "policy.pt"))
    (folder / "card.yaml").write_text(
        f"# a = K obs, K = {gains} (cart position, pole angle, their velocities); crosssim's correct experiment\n"
        f"name: {folder.name}\ntask: InvertedPendulum\npolicy:\n  file: policy.pt\n  format: torchscript\n"
        "action:\n  clip: [-3.0, 3.0]\ntrained_in: mujoco\nvalidated_in: [mujoco]\n")
    return folder / "card.yaml"


def pendulum(out: Path) -> Setup:
    """A soft linear controller (balances nominally, not with weak motors) corrected by a stiffer
    one; judged where the fix should carry over (heavier pole) and where it should not (latency)."""
    return Setup(_linear_policy(out / "pendulum-soft", [0.3, 3.0, 0.3, 0.3]),
                 _linear_policy(out / "pendulum-stiff", [1.0, 10.0, 1.0, 1.0]), "|joint:hinge|>0.1",
                 ("mujoco", "motor_strength=0.5"),
                 (("mujoco", ""), ("mujoco", "motor_strength=0.5"), ("mujoco", "mass_scale=2"),
                  ("mujoco", "action_latency=2"), ("pybullet", ""), ("pybullet", "motor_strength=0.5")))


SETUPS = {"hopper": hopper, "pendulum": pendulum}


def rates(card: Path, places, takeover: str, *, episodes: int, steps: int, seed: int) -> dict:
    """Per place: would-be intervention rate, survival (the share of episodes that did not fall),
    mean episode length (a share of the limit) and return of ``card``'s policy alone."""
    from crosssim.correct.cli import perturbed_profile
    from crosssim.correct.collect import CollectConfig, collect

    out = {}
    config = CollectConfig(takeover=takeover, episodes=episodes, steps=steps, seed=seed, operator_on=False)
    for engine, perturb in places:
        s = collect(card, perturbed_profile(engine, perturb), None, config)
        out[f"{engine} {perturb or 'nominal'}"] = {
            "intervention_rate": s.rate, "survival": 1.0 - float(np.mean(s.terminated)),
            "length": float(np.mean(s.steps)) / steps,
            "mean_return": float(np.mean(s.returns)), "falls": int(sum(s.terminated))}
    return out


def judge(card: Path, out: Path, *, episodes: int, steps: int) -> dict:
    from crosssim.evaluate import crossval
    from crosssim.runner.crossval import CrossvalConfig

    run = crossval(CrossvalConfig(policy=str(card), engines=("mujoco", "pybullet"), episodes=episodes,
                                  sweep_episodes=min(2, episodes), max_steps=steps, out=str(out), report=False,
                                  cache=False, workers=2))
    risk = run.summary.risk
    return {"verdict": risk.verdict if risk else None, "driver": risk.driver if risk else None,
            "margins": {k: {"margin": c.margin, "ci95": list(c.margin_ci95), "headroom": c.headroom,
                            "verdict": c.verdict} for k, c in (risk.components.items() if risk else [])},
            "returns": {k: e.mean_return for k, e in run.summary.engines.items()},
            "versus_base": run.summary.correction}


def main(argv=None) -> int:
    from crosssim.correct.cli import perturbed_profile
    from crosssim.correct.collect import CollectConfig, collect
    from crosssim.correct.train import TrainConfig, train

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--setup", choices=sorted(SETUPS), default="pendulum")
    p.add_argument("--out", default=None, help="default: reports/correct/<setup>")
    p.add_argument("--episodes", type=int, default=8, help="collection episodes")
    p.add_argument("--steps", type=int, default=None, help="control steps per episode (default: pendulum 300, "
                                                           "hopper 400)")
    p.add_argument("--eval-episodes", type=int, default=6)
    p.add_argument("--crossval-episodes", type=int, default=4)
    p.add_argument("--no-crossval", action="store_true")
    p.add_argument("--takeover", default=None, help="override the setup's takeover condition")
    p.add_argument("--no-gate", action="store_true", help="residual everywhere (no intervention gate)")
    p.add_argument("--gate-balance", action="store_true", help="weight the gate's intervention steps by rarity")
    p.add_argument("--budget", type=int, default=None, help="intervention budget: operator steps per episode at most")
    p.add_argument("--operator-noise", type=float, default=0.0, help="Gaussian noise on the operator's action")
    args = p.parse_args(argv)
    out = Path(args.out or ROOT / "reports" / "correct" / args.setup)
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.time()
    setup = SETUPS[args.setup](out)
    args.steps = args.steps or {"pendulum": 300, "hopper": 400}[args.setup]
    if args.takeover:
        from dataclasses import replace

        setup = replace(setup, takeover=args.takeover)
    BASE, COLLECTED = setup.base, setup.collected
    record = {"setup": args.setup, "takeover": setup.takeover, "collected_in": " ".join(COLLECTED),
              "operator": setup.operator.parent.name, "budget": args.budget, "operator_noise": args.operator_noise,
              "gate": not args.no_gate, "gate_balance": args.gate_balance}
    collected = collect(BASE, perturbed_profile(*COLLECTED), out / "logs",
                        CollectConfig(takeover=setup.takeover, operator=str(setup.operator), episodes=args.episodes,
                                      steps=args.steps, seed=100, budget=args.budget,
                                      operator_noise=args.operator_noise))
    record["collection"] = {"describe": collected.describe(), "rate": collected.rate, "steps": sum(collected.steps)}
    print(f"collected: {collected.describe()} ({time.time() - t0:.0f} s)", file=sys.stderr)
    corrected = out / f"{BASE.parent.name}-corrected"
    # the base is this script's own TorchScript file (torch.clamp in forward: no Linear chain to
    # rebuild in the sandbox), so composing with the file itself is trusting our own code
    config = TrainConfig(gate=not args.no_gate, gate_balance=args.gate_balance)
    record["training"] = train(out / "logs", BASE, corrected, config, trust=True)["losses"]
    print(f"trained: {record['training']} ({time.time() - t0:.0f} s)", file=sys.stderr)
    record["policies"] = {}
    for name, card in (("base", BASE), ("corrected", corrected / "card.yaml")):
        record["policies"][name] = {"rollouts": rates(card, setup.places, setup.takeover,
                                                      episodes=args.eval_episodes, steps=args.steps, seed=1000)}
        print(f"{name}: rollouts done ({time.time() - t0:.0f} s)", file=sys.stderr)
        if not args.no_crossval:
            record["policies"][name]["crossval"] = judge(card, out / f"crossval-{name}",
                                                         episodes=args.crossval_episodes, steps=args.steps)
            print(f"{name}: crossval done ({time.time() - t0:.0f} s)", file=sys.stderr)
    record["wall_s"] = round(time.time() - t0, 1)
    (out / "correct.json").write_text(json.dumps(record, indent=1, default=float) + "\n")
    limits = ", ".join(x for x in (f"budget {args.budget} steps per episode" if args.budget else "",
                                   f"action noise {args.operator_noise:g}" if args.operator_noise else "") if x)
    lines = [f"collected in {record['collected_in']} by operator {record['operator']}"
             f"{' (' + limits + ')' if limits else ''}: {record['collection']['describe']}",
             "", "| place | base: would-intervene / survived / length / return | corrected |", "|---|---|---|"]
    for place in record["policies"]["base"]["rollouts"]:
        cells = []
        for name in ("base", "corrected"):
            r = record["policies"][name]["rollouts"][place]
            cells.append(f"{100 * r['intervention_rate']:.1f} % / {100 * r['survival']:.0f} % / "
                         f"{100 * r['length']:.0f} % / {r['mean_return']:.0f}")
        mark = " (collected here)" if place == " ".join(COLLECTED) else ""
        lines.append(f"| {place}{mark} | {cells[0]} | {cells[1]} |")
    if not args.no_crossval:
        lines += ["", "| crossval (mujoco, pybullet) | base | corrected |", "|---|---|---|"]
        b, c = (record["policies"][n]["crossval"] for n in ("base", "corrected"))
        lines.append(f"| verdict (driver) | {b['verdict']} ({b['driver']}) | {c['verdict']} ({c['driver']}) |")
        for fam in b["margins"]:
            mb, mc = b["margins"][fam], c["margins"].get(fam, {})
            lines.append(f"| margin {fam} | {mb['margin']:.3g} [{mb['ci95'][0]:.3g}, {mb['ci95'][1]:.3g}] | "
                         f"{mc.get('margin', float('nan')):.3g} [{mc.get('ci95', [np.nan] * 2)[0]:.3g}, "
                         f"{mc.get('ci95', [np.nan] * 2)[1]:.3g}] |")
        for eng in b["returns"]:
            lines.append(f"| mean return {eng} | {b['returns'][eng]:.0f} | {c['returns'].get(eng, float('nan')):.0f} |")
        versus = c.get("versus_base")
        if versus is not None:  # crossval of the corrected card ran its base and compared them
            lines.append("| crossval's regressions against the base | | "
                         f"{'; '.join(versus['regressions']) or 'none'} |")
    lines.append(f"\n{record['wall_s']:.0f} s on this machine")
    (out / "correct.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
