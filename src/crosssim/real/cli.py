"""Command line for real logs: ``crosssim logs validate | simulate`` and ``crosssim calibrate``.

Registered into crosssim.cli's parser by ``add_commands``; nothing heavy is imported until a
command runs.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from crosssim import options
from crosssim.options import add_options, option

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
    """Every problem of every log, one line each; with a card, also the joint order, period,
    sizes, and the deployment conformance of the logged policy inputs (term by term)."""
    from crosssim.errors import CrossSimError
    from crosssim.real.logs import check_against, find_logs, validate

    failed = 0
    for item in args.files:
        for path in find_logs(item):
            log, problems = validate(path)
            harness = None
            if log is not None and (args.policy or log.card is not None):
                try:
                    harness = _harness_for([log], args.policy)
                    problems = check_against(log, harness)
                except CrossSimError as exc:
                    problems = [f"{path}: cannot check against its policy card: {exc}"]
            if not problems and args.corrections and not log.intervened.any():
                why = "is 0 everywhere" if log.intervention is not None else "is missing"
                problems = [f"{path}: no intervention (column intervention.active {why}); --corrections expects "
                            "logs where an operator took over (docs/correction.md)"]
            if problems:
                failed += 1
                for p in problems:
                    print(p)
                continue
            extra = [k for k in ("tau", "quat", "gyro", "pos", "vel", "obs", "command") if getattr(log, k) is not None]
            if log.intervention is not None:
                extra.append(f"{int(log.intervened.sum())} intervention steps")
            print(f"{path}: ok ({len(log)} rows, {log.duration:.2f} s, {len(log.joints)} joints"
                  + (f"; also {', '.join(extra)}" if extra else "") + f"; {log.timing.describe()}"
                  + (f"; action delay {log.action_delay:g} steps" if log.action_delay else "")
                  + ("; dry run: actions not applied" if not log.applied else "") + ")")
            if harness is not None:
                failed += not _input_checks(harness, log, path)
    return EXIT_ERROR if failed else EXIT_OK


def _input_checks(harness, log, path) -> bool:
    """Print the deployment conformance of ``log``'s inputs and the angular-rate cross-check, each
    finding with its fix; False on a finding."""
    from crosssim.real.conformance import conformance, format_conformance
    from crosssim.real.rates import format_rates, rate_checks

    ok = True
    for name, check, fmt in (("deployment conformance", conformance, format_conformance),
                             ("angular rates", rate_checks, format_rates)):
        try:
            result = check(harness, [log])
        except Exception as exc:  # a plugin term's own error types included
            print(f"{path}: {name} not checked ({type(exc).__name__}: {str(exc)[:200]})")
            continue
        if result is None:
            continue
        print(f"{path}: " + fmt(result))
        ok = ok and result["ok"]
    return ok


def _convert_given(args):
    """The card's harness (None without --policy) and the sidecar fields the card and the flags give."""
    import os
    from pathlib import Path

    given = {"robot": args.robot, "joints": tuple(args.joints), "control_period": args.control_period}
    harness = None
    if args.policy:
        from crosssim.card import load_card
        from crosssim.runner.harness import Harness

        harness = Harness.from_card(load_card(args.policy))
        given["joints"] = given["joints"] or tuple(harness.canonical.joint_names[j] for j in harness.joints)
        given["control_period"] = given["control_period"] or harness.control_dt
        given["robot"] = given["robot"] or harness.scene.stem
        given["card"] = os.path.relpath(Path(args.policy).resolve(), Path(args.out).resolve().parent)
    if args.action_delay:
        given["action_delay"] = args.action_delay
    if args.dry_run:
        given["applied"] = False
    return harness, given


def _convert(args, source, given):
    """Write the log: through a layout mapping, or the JSON-steps / MCAP converters; (path, notes)."""
    from crosssim.real.convert import Target, Topics, from_json_steps, from_layout, from_mcap
    from crosssim.real.layout import load_layout
    from crosssim.real.logs import LogError

    if args.layout:
        return from_layout(source, args.out, load_layout(args.layout), given)
    kind = args.format if args.format != "auto" else {".json": "json", ".mcap": "mcap"}.get(source.suffix)
    if kind is None:
        raise LogError(f"{source}: cannot tell the layout from the suffix {source.suffix!r}; pass --format json|mcap, "
                       "or --layout MAPPING.yaml for CSV / Parquet / other JSON layouts")
    if not given["joints"] or not given["control_period"]:
        raise LogError(f"{source}: pass --policy CARD, or --joints and --control-period (the policy's joint order "
                       "and period)")
    extra = tuple((k, v) for k, v in given.items() if k not in ("robot", "joints", "control_period"))
    target = Target(given["robot"] or source.stem, tuple(given["joints"]), float(given["control_period"]),
                    args.quat_order, extra)
    if kind == "json":
        return from_json_steps(source, args.out, target)
    topics = Topics(args.topic_joint_states, args.topic_action, args.topic_imu or None, args.topic_obs or None,
                    args.topic_command or None)
    return from_mcap(source, args.out, target, topics)


def cmd_convert(args) -> int:
    """Another layout -> a crosssim log, then validated; with a card (--policy, or the mapping's
    sidecar 'card'), the same card and conformance checks as ``logs validate``."""
    from pathlib import Path

    from crosssim.errors import CrossSimError
    from crosssim.real.logs import check_against, validate

    source = Path(args.source)
    harness, given = _convert_given(args)
    path, notes = _convert(args, source, given)
    log, problems = validate(path)
    for note in notes:
        print(f"{path}: note: {note}")
    if log is not None and not problems and (harness is not None or log.card is not None):
        try:
            harness = harness or _harness_for([log], None)
            problems = check_against(log, harness)
        except CrossSimError as exc:
            problems = [f"{path}: cannot check against its policy card: {exc}"]
    for p in problems:
        print(p)
    if log is None:
        return EXIT_ERROR
    print(f"{path}: written ({len(log)} rows, {log.duration:.2f} s; {log.timing.describe()}"
          + ("; previous action from the log" if log.meta.get("previous_action") is not None else "") + ")")
    if problems or harness is None:
        return EXIT_ERROR if problems else EXIT_OK
    return EXIT_OK if _input_checks(harness, log, path) else EXIT_ERROR


def cmd_simulate(args) -> int:
    from crosssim.profiles import load_profile
    from crosssim.real.simulate import SensorNoise, SimulateLogsConfig, simulate_logs

    config = SimulateLogsConfig(episodes=args.episodes, seconds=args.seconds, seed=args.seed,
                                noise=SensorNoise().scaled(args.noise), suffix=".csv" if args.csv else ".parquet")
    paths = simulate_logs(args.policy, load_profile(args.engine), args.out, config, trust=args.trust_policy_code)
    for p in paths:
        print(p)
    return EXIT_OK


def _check_writable(path) -> None:
    """CrossSimError (one line) unless a file can be created in ``path``'s folder."""
    from crosssim.errors import CrossSimError

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        probe = path.parent / f".{path.name}.write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise CrossSimError(f"cannot write the calibrated profile to {path.parent}: {exc.strerror or exc}; "
                            "choose another --out-dir") from None


def _heldout(harness, logs, base, params, args, kwargs, fit):
    """k-fold over the logs: the written set chosen on held-out folds (applied to ``fit``); None,
    with a finding saying why, where nothing can be held out."""
    from crosssim.real.heldout import apply, cross_validate

    def say(text):
        if not args.quiet:
            print(f"  {text}", file=sys.stderr, flush=True)

    policy = None
    if args.folds >= 2:
        from crosssim.errors import CrossSimError
        from crosssim.policies import load_policy

        try:
            policy = load_policy(harness.card, obs_size=harness.obs_size, action_size=harness.action_size,
                                 trust=args.trust_policy_code)
        except CrossSimError as exc:
            fit.findings.append(f"held-out logs not replayed closed loop: the policy did not load ({exc})")
    result = cross_validate(harness, logs, base, params, folds=args.folds, fit_kwargs=kwargs, policy=policy,
                            progress=say)
    if isinstance(result, str):
        fit.findings.append(result)
        return None
    apply(fit, result)
    return result


def cmd_calibrate(args) -> int:
    from pathlib import Path

    from crosssim.profiles import load_profile
    from crosssim.errors import CrossSimError
    from crosssim.real.calibrate import calibrate, format_fit, parse_params, write_profile
    from crosssim.real.logs import find_logs, read_log, read_logs
    from crosssim.text import slug

    first = read_log(find_logs(args.real)[0])
    harness = _harness_for([first], args.policy)
    params = parse_params(args.params, harness)  # damping etc. absolute where the model has none
    logs = read_logs(args.real, harness)
    estimated = []
    if not args.no_base_estimate:
        from crosssim.real.base_state import with_estimated_base

        logs, estimated = with_estimated_base(logs, harness)
    base = load_profile(args.engine)
    name = args.name or slug(Path(args.real).resolve().name)
    path = Path(args.out_dir) / f"{base.name}-calibrated-{name}.yaml"
    _check_writable(path)  # before minutes of simulation, not after
    print(f"calibrating {', '.join(p.name for p in params)} of {base.name} on {len(logs)} logs "
          f"({sum(log.duration for log in logs):.1f} s)", file=sys.stderr)

    def progress(n):
        if not args.quiet and n and n % 10 == 0:
            print(f"  {n} simulations of the logs", file=sys.stderr, flush=True)

    kwargs = dict(segment_s=args.segment or None, max_evals=args.max_evals, method=args.method)
    fit = calibrate(harness, logs, base, params, progress=progress, **kwargs)
    fit.findings[:0] = estimated
    heldout = _heldout(harness, logs, base, params, args, kwargs, fit)
    print(format_fit(fit))
    if heldout is not None:
        from crosssim.real.heldout import format_heldout

        print(format_heldout(heldout))
    try:
        write_profile(fit, path)
    except OSError as exc:  # the fit above is printed; say where it could not go
        raise CrossSimError(f"cannot write the calibrated profile {path}: {exc.strerror or exc}; the fit is printed "
                            "above, run again with another --out-dir") from None
    print(f"profile: {path}  (use it with: crosssim crossval --engines {path.stem},...)")
    from crosssim.real.deployment_file import write_deployment

    gap = path.parent / "deployments" / path.name
    try:
        write_deployment(fit, harness.control_dt, gap)
    except OSError as exc:
        raise CrossSimError(f"cannot write the deployment file {gap}: {exc.strerror or exc}") from None
    print(f"deployment gap: {gap}  (name it in a card: deployment: {{file: {gap}}})")
    return EXIT_OK


@dataclass(frozen=True)
class ValidateConfig:
    files: tuple[str, ...] = option(positional=True, help="Log files (.parquet/.csv with a .json sidecar) or folders "
                                                          "of them.")
    policy: str | None = option(None, help="Policy card to check joints, period and sizes against (default: the card "
                                           "the sidecar names).")
    corrections: bool = option(False, help="The logs hold corrections: a log without any intervention is a problem.")


@dataclass(frozen=True, kw_only=True)
class ConvertConfig:
    source: str = option(positional=True, help="A per-step JSON list (.json), a ROS 2 bag / MCAP file (.mcap), or "
                                                "with --layout a JSON, CSV, Parquet or MCAP file in any layout.")
    out: str = option(help="The log to write (.parquet or .csv; the .json sidecar goes beside it).")
    layout: str | None = option(None, help="Layout mapping (YAML): which field or dotted path of the source is which "
                                           "log column, units, where the per-step list is (docs/real.md).")
    format: str = option("auto", choices=("auto", "json", "mcap"), help="Source layout (auto: by suffix).")
    policy: str | None = option(None, help="Policy card: the joint order, control period and robot name "
                                           "(and the sidecar's 'card').")
    joints: tuple[str, ...] = option((), parse=options.names, help="Comma-separated joint names in the policy's "
                                                                    "order (default: the card's).")
    control_period: float | None = option(None, parse=options.positive_number("s"),
                                          help="Seconds between policy calls (default: the card's).")
    robot: str | None = option(None, help="Robot name for the sidecar (default: the card's scene).")
    quat_order: str = option("wxyz", choices=("wxyz", "xyzw"), help="Quaternion order of a JSON source.")
    action_delay: float = option(0.0, parse=options.number(low=0.0),
                                 help="Declared delay from an action to the motors [control steps, fractional].")
    dry_run: bool = option(False, help="The actions never reached the motors (sidecar applied: false).")
    topic_joint_states: str = option("/joint_states", help="MCAP: sensor_msgs/JointState topic.")
    topic_action: str = option("/policy/action", help="MCAP: the policy's raw actions (Float32/64MultiArray); "
                                                       "one log row per message.")
    topic_imu: str = option("/imu", help="MCAP: sensor_msgs/Imu topic ('' for none).")
    topic_obs: str = option("/policy/obs", help="MCAP: the policy's inputs (Float32/64MultiArray; '' for none).")
    topic_command: str = option("/cmd_vel", help="MCAP: geometry_msgs/Twist command topic ('' for none).")


@dataclass(frozen=True, kw_only=True)  # required and optional flags in the order --help shows them
class SimulateConfig:
    policy: str = option(help="Policy card.")
    engine: str = option("mujoco", parse=options.engine_name,
                         help="Engine profile playing the robot (its settings are the 'hidden' physics).")
    out: str = option(help="Folder for the logs.")
    episodes: int = option(4, parse=options.whole(1), help="Logs to write, one episode each.")
    seconds: float | None = option(None, parse=options.positive_number("seconds"),
                                   help="Log length [s]; default: the task's episode.")
    seed: int = option(0, parse=options.seed, help="Base seed; log i uses seed + i.")
    noise: float = option(1.0, parse=options.number(low=0.0),
                          help="Sensor noise, times the defaults (q 0.002 rad, dq 0.02 rad/s, gyro 0.01 rad/s, "
                               "orientation 0.005 rad, torque 0.05 N m).")
    csv: bool = option(False, help="Write CSV instead of Parquet.")
    trust_policy_code: bool = option(False, help="Allow code from the policy file to run.")


@dataclass(frozen=True)
class CalibrateConfig:
    real: str = option(help="Folder of real logs (docs/real.md).")
    engine: str = option("mujoco", parse=options.engine_name, help="Engine profile to start from and calibrate.")
    params: str = option("damping,armature,frictionloss,motor_strength,latency",
                         help="Comma-separated: friction, damping, armature, frictionloss (scales; absolute values where "
                              "the model has none), joint_damping, joint_armature, joint_frictionloss (absolute), "
                              "mass, motor_strength, torque_limit, motor_lag, latency (to the physics step).")
    policy: str | None = option(None, help="Policy card (default: the card the logs' sidecars name).")
    segment: float = option(0.5, parse=options.number(low=0.0),
                            help="Reset to the logged state every this many seconds (fixed-base robots, or a floating "
                                 "base's position and velocity logged or estimated); 0: replay whole logs [s].")
    no_base_estimate: bool = option(False, help="A floating base without pos.*/vel.*: replay only the first --segment "
                                                "seconds of each log instead of estimating the base state from the IMU "
                                                "and leg kinematics (docs/real.md).")
    max_evals: int = option(200, parse=options.whole(1), help="Budget of simulations of the logs per fit.")
    folds: int = option(5, parse=options.whole(0),
                        help="Judge the fit on logs it did not see: k-fold over whole logs (at most one fold per log; "
                             "3 logs or more); the profile writes the parameter set with the lowest mean held-out "
                             "error. 0: no folds (the sigma rule decides what is written).")
    method: str = option("auto", choices=("auto", "lsq", "global"),
                         help="lsq: bounded least squares (smooth, contact-free motion); global: differential "
                              "evolution (rugged, contact-rich objectives); auto: global for floating-base robots.")
    name: str | None = option(None, help="Profile name suffix (default: the log folder's name).")
    out_dir: str = option("simulators", help="Where the profile is written.")
    trust_policy_code: bool = option(False, help="Allow code from the policy file to run (closed-loop replay of the "
                                                 "held-out logs; other formats run in the sandbox).")
    quiet: bool = option(False, help="No progress lines on stderr.")


def add_commands(sub) -> None:
    """Add ``logs`` and ``calibrate`` to crosssim's subcommand parser (flags from the configs above)."""
    lg = sub.add_parser("logs", help="real robot logs: validate them, or simulate some (docs/real.md)")
    lsub = lg.add_subparsers(dest="logs_command", required=True, metavar="COMMAND")
    for parent, name, func, config, help in (
            (lsub, "validate", cmd_validate, ValidateConfig, "check logs against the format (and their policy card)"),
            (lsub, "convert", cmd_convert, ConvertConfig,
             "convert a log in another layout (a layout mapping for JSON / CSV / Parquet / MCAP; a ROS 2 bag) to a "
             "crosssim log"),
            (lsub, "simulate", cmd_simulate, SimulateConfig,
             "write logs of a policy in one engine profile (a stand-in robot)"),
            (sub, "calibrate", cmd_calibrate, CalibrateConfig,
             "fit an engine profile's physical settings to real logs; writes "
             "simulators/<engine>-calibrated-<name>.yaml and the measured gap as "
             "simulators/deployments/<engine>-calibrated-<name>.yaml")):
        c = parent.add_parser(name, help=help, description=help)
        add_options(c, config)
        c.set_defaults(func=func)
