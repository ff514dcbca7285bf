"""Command line: ``crosssim correct collect | train`` (docs/correction.md).

Registered into crosssim.cli's parser by ``add_commands``; nothing heavy is imported until a
command runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from crosssim import options
from crosssim.options import add_options, option

EXIT_OK = 0


def perturbed_profile(engine: str, perturb: str):
    """Profile ``engine`` with ``key=value,...`` variant settings on top (the stand-in robot)."""
    from dataclasses import replace

    from crosssim.correct.operator import CorrectionError
    from crosssim.profiles import flat_settings, load_profile, split_settings

    profile = load_profile(engine)
    if not perturb:
        return profile
    extra = {}
    for item in perturb.split(","):
        key, sep, value = item.partition("=")
        try:
            extra[key.strip()] = float(value) if "." in value or "e" in value else int(value)
        except ValueError:
            sep = ""
        if not sep:
            raise CorrectionError(f"--perturb: cannot read {item!r}; give key=number pairs, e.g. "
                                  "friction_scale=0.3,motor_strength=0.8")
    settings = {**flat_settings(profile), **extra}
    name = f"{profile.name}-" + "-".join(f"{k}{v:g}" for k, v in extra.items())
    return split_settings(replace(profile, name=name), settings)


def cmd_collect(args) -> int:
    from crosssim.correct.collect import CollectConfig, collect

    profile = perturbed_profile(args.engine, args.perturb)
    config = CollectConfig(takeover=args.takeover, operator=args.operator, hold=args.hold, kp=args.kp, kd=args.kd,
                           episodes=args.episodes, steps=args.steps, seed=args.seed, operator_on=not args.measure_only,
                           budget=args.budget, operator_noise=args.operator_noise)
    stats = collect(args.policy, profile, args.out, config, trust=args.trust_policy_code)
    for path in stats.paths:
        print(path)
    print(f"{profile.name}: {stats.describe()}")
    return EXIT_OK


def cmd_train(args) -> int:
    from crosssim.correct.train import TrainConfig, train

    config = TrainConfig(hidden=tuple(args.hidden), epochs=args.epochs, lr=args.lr, gate=args.gate,
                         gate_balance=args.gate_balance, seed=args.seed)
    record = train(args.logs, args.policy, args.out, config, trust=args.trust_policy_code)
    losses = ", ".join(f"{k} {v:.4g}" for k, v in record["losses"].items())
    print(f"{args.out}/card.yaml: {record['base']['name']} + residual from {record['logs']['interventions']} "
          f"intervention steps of {record['logs']['steps']} ({len(record['logs']['files'])} logs); {losses}")
    return EXIT_OK


def _widths(text: str) -> tuple[int, ...]:
    import argparse

    try:
        widths = tuple(int(v) for v in text.split(","))
    except ValueError:
        widths = ()
    if not widths or min(widths) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give layer widths as positive whole numbers, e.g. 64,64")
    return widths


@dataclass(frozen=True, kw_only=True)
class CorrectCollectConfig:
    policy: str = option(help="Policy card to run.")
    engine: str = option("mujoco", parse=options.engine_name, help="Engine profile standing in for the robot.")
    perturb: str = option("", help="Variant settings on top of the profile, key=value comma-separated "
                                   "(e.g. friction_scale=0.3,motor_strength=0.8).")
    takeover: str = option(help="When the operator takes over, any term tripping: tilt>RAD, height<M, sink>M/S, "
                                "tracking>M/S, joint:NAME>V, joint:NAME<V, |joint:NAME|>V (comma-separated).")
    hold: int = option(10, parse=options.whole(1), help="Hand back after this many control steps without a trip.")
    operator: str = option("hold", help="'hold' (scripted PD towards the zero pose, in action units) or a second "
                                        "policy card.")
    kp: float = option(1.0, parse=options.number(low=0.0), help="Scripted operator: action per rad of joint error.")
    kd: float = option(0.1, parse=options.number(low=0.0), help="Scripted operator: action per rad/s.")
    budget: int | None = option(None, parse=options.whole(1), help="Intervention budget: the operator controls at "
                                                                    "most this many steps per episode.")
    operator_noise: float = option(0.0, parse=options.number(low=0.0),
                                   help="Gaussian noise on the operator's action [action units, standard deviation].")
    out: str | None = option(None, help="Folder for the logs (default: none written).")
    episodes: int = option(4, parse=options.whole(1), help="Episodes (one log each).")
    steps: int | None = option(None, parse=options.whole(1), help="Control steps per episode (default: the task's).")
    seed: int = option(0, parse=options.seed, help="Base seed; episode i uses seed + i.")
    measure_only: bool = option(False, help="The operator never acts: count how often it would take over "
                                            "(no logs written).")
    trust_policy_code: bool = option(False, help="Allow code from the policy files to run.")


@dataclass(frozen=True, kw_only=True)
class CorrectTrainConfig:
    logs: str = option(help="Folder of logs with interventions (crosssim correct collect, or a robot's).")
    policy: str = option(help="The base policy's card (the policy that ran when the logs were taken).")
    out: str = option(help="Folder for the composed policy (policy.pt, card.yaml).")
    hidden: tuple[int, ...] = option((64, 64), parse=_widths,
                                     help="Hidden layer widths of the residual and the gate, comma-separated.")
    epochs: int = option(300, parse=options.whole(1), help="Passes over the logged steps (Adam).")
    lr: float = option(1e-3, parse=options.positive_number(), help="Adam learning rate.")
    gate: bool = option(True, off="Apply the residual everywhere (regressed to zero where nobody intervened).",
                        help="Scale the residual by a learned intervention probability.")
    gate_balance: bool = option(False, help="Weight the gate's intervention steps by their rarity (steps without / "
                                            "with an intervention): the gate errs towards correcting where the logs "
                                            "are thin (docs/correction.md).")
    seed: int = option(0, parse=options.seed, help="Seed of the weights and minibatches.")
    trust_policy_code: bool = option(False, help="Compose with the base TorchScript file itself, running its code "
                                                 "in this process (only for a file you trust).")


def add_commands(sub) -> None:
    """Add ``correct collect`` and ``correct train`` to crosssim's subcommand parser."""
    top = sub.add_parser("correct", help="corrections: a simulated operator, residual policies learned from "
                                         "interventions (docs/correction.md)")
    csub = top.add_subparsers(dest="correct_command", required=True, metavar="COMMAND")
    for name, func, config, help in (
            ("collect", cmd_collect, CorrectCollectConfig,
             "run a policy with a simulated operator that takes over on a condition; writes real-format logs"),
            ("train", cmd_train, CorrectTrainConfig,
             "learn a residual from the logs' interventions; writes a composed TorchScript policy and card")):
        c = csub.add_parser(name, help=help, description=help)
        add_options(c, config)
        c.set_defaults(func=func)
