"""Command line for real logs: ``crosssim logs validate | simulate`` and ``crosssim calibrate``.

Registered into crosssim.cli's parser by ``add_commands``; nothing heavy is imported until a
command runs.
"""

from __future__ import annotations

import sys

EXIT_OK, EXIT_ERROR = 0, 1


def _harness_for(logs_or_paths, policy: str | None):
    """The harness of --policy, else of the card the first log's sidecar names."""
    from crosssim.card import load_card
    from crosssim.real.logs import LogError
    from crosssim.runner.harness import Harness

    card = policy
    if card is None:
        first = logs_or_paths[0]
        if first.card is None:
            raise LogError(f"{first.path.with_suffix('.json')}: no 'card' field; pass --policy CARD")
        card = first.card
    return Harness.from_card(load_card(card))


def cmd_validate(args) -> int:
    from crosssim.errors import CrossSimError
    from crosssim.real.logs import check_against, find_logs, validate

    failed = 0
    for item in args.files:
        for path in find_logs(item):
            log, problems = validate(path)
            if log is not None and (args.policy or log.card is not None):
                try:
                    problems = check_against(log, _harness_for([log], args.policy))
                except CrossSimError as exc:
                    problems = [f"{path}: cannot check against its policy card: {exc}"]
            if problems:
                failed += 1
                for p in problems:
                    print(p)
            else:
                extra = [k for k in ("tau", "quat", "gyro", "pos", "vel", "obs", "command") if getattr(log, k) is not None]
                print(f"{path}: ok ({len(log)} rows, {log.duration:.2f} s, {len(log.joints)} joints"
                      + (f"; also {', '.join(extra)}" if extra else "") + ")")
    return EXIT_ERROR if failed else EXIT_OK


def cmd_simulate(args) -> int:
    from crosssim.profiles import load_profile
    from crosssim.real.simulate import SensorNoise, simulate_logs

    paths = simulate_logs(args.policy, load_profile(args.engine), args.out, episodes=args.episodes,
                          seconds=args.seconds, seed=args.seed, noise=SensorNoise().scaled(args.noise),
                          suffix=".csv" if args.csv else ".parquet", trust=args.trust_policy_code)
    for p in paths:
        print(p)
    return EXIT_OK


def cmd_calibrate(args) -> int:
    from pathlib import Path

    from crosssim.profiles import load_profile
    from crosssim.real.calibrate import calibrate, format_fit, parse_params, write_profile
    from crosssim.real.logs import find_logs, read_log, read_logs
    from crosssim.text import slug

    params = parse_params(args.params)
    first = read_log(find_logs(args.real)[0])
    harness = _harness_for([first], args.policy)
    logs = read_logs(args.real, harness)
    base = load_profile(args.engine)
    print(f"calibrating {', '.join(p.name for p in params)} of {base.name} on {len(logs)} logs "
          f"({sum(log.duration for log in logs):.1f} s)", file=sys.stderr)

    def progress(n):
        if not args.quiet and n and n % 10 == 0:
            print(f"  {n} simulations of the logs", file=sys.stderr, flush=True)

    fit = calibrate(harness, logs, base, params, segment_s=args.segment or None, max_evals=args.max_evals,
                    method=args.method, progress=progress)
    print(format_fit(fit))
    name = args.name or slug(Path(args.real).resolve().name)
    path = Path(args.out_dir) / f"{base.name}-calibrated-{name}.yaml"
    write_profile(fit, path)
    print(f"profile: {path}  (use it with: crosssim crossval --engines {path.stem},...)")
    return EXIT_OK


def add_commands(sub) -> None:
    """Add ``logs`` and ``calibrate`` to crosssim's subcommand parser."""
    lg = sub.add_parser("logs", help="real robot logs: validate them, or simulate some (docs/real.md)")
    lsub = lg.add_subparsers(dest="logs_command", required=True)
    v = lsub.add_parser("validate", help="check logs against the format (and their policy card)")
    v.add_argument("files", nargs="+", help="log files (.parquet/.csv with a .json sidecar) or folders of them")
    v.add_argument("--policy", default=None, help="policy card to check joints, period and sizes against "
                   "(default: the card the sidecar names)")
    v.set_defaults(func=cmd_validate)
    s = lsub.add_parser("simulate", help="write logs of a policy in one engine profile (a stand-in robot)")
    s.add_argument("--policy", required=True, help="policy card")
    s.add_argument("--engine", default="mujoco", help="engine profile playing the robot (its settings are the "
                   "'hidden' physics)")
    s.add_argument("--out", required=True, help="folder for the logs")
    s.add_argument("--episodes", type=int, default=4)
    s.add_argument("--seconds", type=float, default=None, help="log length [s]; default: the task's episode")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--noise", type=float, default=1.0, help="sensor noise, times the defaults (q 0.002 rad, "
                   "dq 0.02 rad/s, gyro 0.01 rad/s, orientation 0.005 rad, torque 0.05 N m)")
    s.add_argument("--csv", action="store_true", help="write CSV instead of Parquet")
    s.add_argument("--trust-policy-code", action="store_true", help="allow code from the policy file to run")
    s.set_defaults(func=cmd_simulate)
    c = sub.add_parser("calibrate", help="fit an engine profile's physical settings to real logs; writes "
                       "simulators/<engine>-calibrated-<name>.yaml")
    c.add_argument("--real", required=True, help="folder of real logs (docs/real.md)")
    c.add_argument("--engine", default="mujoco", help="engine profile to start from and calibrate")
    c.add_argument("--params", default="damping,armature,frictionloss,motor_strength,latency",
                   help="comma-separated: friction, damping, armature, frictionloss, mass, motor_strength, "
                        "motor_lag, latency")
    c.add_argument("--policy", default=None, help="policy card (default: the card the logs' sidecars name)")
    c.add_argument("--segment", type=float, default=0.5, help="reset to the logged state every this many seconds "
                   "(fixed-base robots, or base position and velocity logged); 0: replay whole logs")
    c.add_argument("--max-evals", type=int, default=200, help="budget of simulations of the logs per fit")
    c.add_argument("--method", default="auto", choices=("auto", "lsq", "global"),
                   help="lsq: bounded least squares (smooth, contact-free motion); global: differential evolution "
                        "(rugged, contact-rich objectives); auto: global for floating-base robots")
    c.add_argument("--name", default=None, help="profile name suffix (default: the log folder's name)")
    c.add_argument("--out-dir", default="simulators", help="where the profile is written")
    c.add_argument("--quiet", action="store_true")
    c.set_defaults(func=cmd_calibrate)


