"""Command line: ``crosssim crossval | audit | engines | tasks``.

Errors crosssim can explain (CrossSimError) print one line naming the file and the fix and exit
with status 1; a traceback means a bug in crosssim.
"""

from __future__ import annotations

import argparse
import math
import sys

from crosssim.errors import CrossSimError
from crosssim.text import printable

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_MISMATCH = 0, 1, 2, 4
"""Exit statuses: success; an error crosssim explains; a bad command line (argparse's 2); ``audit`` found a
parameter an engine does not reproduce (3 is the gate's WARN, see crosssim.gate)."""


def _help(cls, name: str) -> str:
    """Field docstring of a config dataclass (the one source of help text)."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body
    for i, node in enumerate(body):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == name:
            nxt = body[i + 1] if i + 1 < len(body) else None
            if isinstance(nxt, ast.Expr) and isinstance(getattr(nxt, "value", None), ast.Constant):
                return str(nxt.value.value)
    return ""


def _fmt(x: float, digits: int = 1) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def print_table(summary, file=sys.stdout) -> None:
    """The per-engine table of a crosssim.results.RunSummary."""
    ref = summary.reference_engine
    head = f"{'engine':<22}{'return (95% CI)':>30}{'length':>9}{'early end':>11}{'drop vs ' + ref:>18}{'failed':>8}"
    print(head, file=file)
    print("-" * len(head), file=file)
    for e, s in summary.engines.items():
        lo, hi = s.return_ci95
        ret = f"{_fmt(s.mean_return)} [{_fmt(lo)}, {_fmt(hi)}]"
        drop = "reference" if e == ref else (_fmt(100 * s.drop_vs_reference) + " %")
        early = _fmt(100 * s.terminated_early, 0) + " %"
        print(f"{e:<22}{ret:>30}{_fmt(s.mean_length, 0):>9}{early:>11}{drop:>18}{s.failed:>8}", file=file)
        if s.error:
            print(f"  ! {s.error}", file=file)


def print_risk(risk, file=sys.stdout) -> None:
    """A crosssim.results.RiskProfile, one line per component."""
    check = risk.harness_check
    print(f"\nharness check: {check.status} - {check.message}", file=file)
    print(f"{'transfer-risk component':<34}{'predicted drop':>16}{'95% CI':>18}", file=file)
    for name, comp in risk.components.items():
        lo, hi = comp.ci95
        print(f"  {name:<32}{_fmt(100 * comp.drop, 0) + ' %':>16}{'[' + _fmt(100 * lo, 0) + ', ' + _fmt(100 * hi, 0) + '] %':>18}",
              file=file)
    agg = risk.aggregate
    lo, hi = agg.ci95
    print(f"  {'aggregate (all gaps at once)':<32}{_fmt(100 * agg.drop, 0) + ' %':>16}"
          f"{'[' + _fmt(100 * lo, 0) + ', ' + _fmt(100 * hi, 0) + '] %':>18}", file=file)
    print(f"verdict: {risk.verdict.upper()} - {risk.message}", file=file)


def _progress(stream=sys.stderr):
    def show(engine: str, done: int, total: int, row: dict) -> None:
        bar = "#" * int(20 * done / max(total, 1))
        msg = f"  {engine:<22} [{bar:<20}] {done}/{total}" + (" reused from the cache" if engine == "cache" else "")
        if row.get("failure"):
            msg += f"  failed: {str(row['failure'])[:80]}"
        print(msg, file=stream, flush=True)
    return show


def cmd_crossval(args) -> int:
    from crosssim.evaluate import crossval
    from crosssim.runner import CrossvalConfig

    config = CrossvalConfig(
        policy=args.policy, engines=tuple(e.strip() for e in args.engines.split(",") if e.strip()),
        episodes=args.episodes, seed=args.seed, out=args.out, max_steps=args.max_steps,
        trust_policy_code=args.trust_policy_code, workers=args.workers, episode_timeout=args.episode_timeout,
        inline=args.inline, risk=args.risk, report=args.report, cache=args.cache, executor=args.executor,
        ray_address=args.address, real=args.real, batch=args.batch_episodes,
    )
    print(f"crossval {config.policy}: engines {', '.join(config.engines)}, {config.episodes} episodes, seed {config.seed}",
          file=sys.stderr)
    run = crossval(config, progress=None if args.quiet else _progress())
    print_table(run.summary)
    if run.summary.risk:
        print_risk(run.summary.risk)
    if run.summary.real:
        from crosssim.real.compare import format_real

        print(format_real(run.summary.real))
    print(f"\nresults: {run.out}/results.parquet  summary: {run.out}/summary.json")
    if run.report:
        print(f"report: {run.report}")
    elif run.report_error:
        print(f"report not written: {run.report_error}", file=sys.stderr)
    return EXIT_OK


def cmd_audit(args) -> int:
    """Exit EXIT_MISMATCH when any engine reads back a parameter beyond tolerance, EXIT_ERROR when
    an engine could not be audited, else EXIT_OK."""
    from crosssim.engines import get_engine
    from crosssim.profiles import check_settings, load_profile
    from crosssim.scene import resolve_scene
    from crosssim.variant import compile_model

    scene = resolve_scene(args.robot)
    mismatched, unavailable = [], []
    for name in [e.strip() for e in args.engines.split(",") if e.strip()]:
        profile = load_profile(name)
        try:
            engine = get_engine(profile.engine)
            check_settings(profile, engine)
            model = engine.load(compile_model(scene, profile.variant.model), profile)
        except CrossSimError as exc:
            print(f"\n== {name}: unavailable: {exc}")
            unavailable.append(name)
            continue
        rows = engine.audit(model)
        engine.close(model)
        bad = [r for r in rows if r.status != "ok"]
        if any(r.status == "MISMATCH" for r in bad):
            mismatched.append(name)
        print(f"\n== {name}: {len(rows)} parameters read back, {len(bad)} not matching")
        print(f"  {'quantity':<20}{'item':<24}{'canonical':>12}{'engine':>12}  status")
        for r in rows if args.all else bad:
            eng = "n/a" if r.engine is None else f"{r.engine:.6g}"
            print(f"  {r.quantity:<20}{r.item[:23]:<24}{r.canonical:>12.6g}{eng:>12}  {r.status}"
                  + (f"  ({r.note})" if r.note and r.status != "ok" else ""))
    if mismatched:
        print(f"\nMISMATCH in {', '.join(mismatched)}: these engines do not simulate the canonical model", file=sys.stderr)
        return EXIT_MISMATCH
    if unavailable:
        print(f"\nnot audited: {', '.join(unavailable)} (see `crosssim engines`)", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def cmd_report(args) -> int:
    from crosssim.report import write_report

    print(f"report: {write_report(args.dir, filmstrips=not args.no_filmstrips)}")
    return EXIT_OK


def _interrupt_on_sigterm() -> None:
    import signal
    import threading

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)


def cmd_gate(args) -> int:
    import contextlib
    import os
    from pathlib import Path

    from crosssim import gate
    from crosssim.evaluate import crossval
    from crosssim.results import read_summary
    from crosssim.runner import CrossvalConfig
    from crosssim.runner.cache import default_root
    from crosssim.text import no_workflow_commands

    engines = tuple(e.strip() for e in args.engines.split(",") if e.strip())
    base_ref = getattr(args, "base", None) or args.baseline_ref
    _interrupt_on_sigterm()  # a cancelled CI job still removes the base tree it extracted
    # Engine workers start as `python -c ...` in the checkout under review, which would put it
    # first on their sys.path: a pull request's top-level multiprocessing/ would run in them.
    os.environ["PYTHONSAFEPATH"] = "1"

    def evaluate(policy: str, out: str | None, side: str):
        # Never trust code from the evaluated files: the gate runs on pull requests. Each side
        # has its own cache folder, so a baseline never reuses rows computed for the PR.
        return crossval(CrossvalConfig(policy=policy, engines=engines, episodes=args.episodes, seed=args.seed,
                                       out=out, trust_policy_code=False,
                                       cache_dir=str(default_root() / "gate" / side)), progress=None)

    with contextlib.ExitStack() as stack:
        trusted = None
        if base_ref:
            from crosssim.trust import confine, trusted_base

            trusted = stack.enter_context(trusted_base(base_ref))
            config_path = Path(args.config) if args.config else None
            if config_path is not None and config_path.resolve().is_relative_to(trusted.root):
                config_path = config_path.resolve().relative_to(trusted.root)  # read it as on the base branch
            config = gate.GateConfig.load(config_path, folder=trusted.tree)
        else:
            print("gate: no --base/--baseline-ref: thresholds and engine profiles are read from the working tree "
                  "(fine for your own checkout; in CI pass the base branch)", file=sys.stderr)
            config = gate.GateConfig.load(Path(args.config) if args.config else None)
        out = None  # where a baseline evaluated now goes: beside a run made now
        if args.run:
            summary = read_summary(Path(args.run))
        elif args.policy:
            if trusted:
                confine(Path(args.policy), trusted.root)
            run = evaluate(args.policy, args.out, "pr")
            summary, out = run.summary, run.out
        else:
            raise CrossSimError("gate needs --run DIR (an existing crossval) or --policy CARD")
        baseline = None
        if args.baseline:
            baseline = read_summary(Path(args.baseline))
        elif args.baseline_ref:
            from crosssim.gitutil import in_tree
            from crosssim.trust import trusted_base

            base = trusted if trusted.ref == args.baseline_ref else stack.enter_context(
                trusted_base(args.baseline_ref, root=trusted.root))
            old = in_tree(Path(summary.card), base.root, base.tree)
            if not old.is_file():
                print(f"baseline: {printable(summary.card)} does not exist at {printable(args.baseline_ref)} "
                      "(new policy): no regression check", file=sys.stderr)
            else:
                confine(old, base.tree)
                baseline = evaluate(str(old), str(out / "baseline") if out else None, "baseline").summary
    decision = gate.decide(summary, config, baseline)
    md = gate.markdown(summary, decision)
    print(no_workflow_commands(md))
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    for target in filter(None, [args.summary, step_summary]):
        with open(target, "a", encoding="utf-8") as f:
            f.write(md)
    if args.junit:
        Path(args.junit).write_text(gate.junit(summary, decision), encoding="utf-8")
    return decision.exit_code(config)


def cmd_changed(args) -> int:
    import os

    from crosssim.gitutil import changed_policies

    cards = changed_policies(args.base, under=args.under)
    if getattr(args, "null", False):  # for `while IFS= read -r -d ''`: any character in a path survives
        sys.stdout.buffer.write(b"".join(os.fsencode(str(c)) + b"\0" for c in cards))
        sys.stdout.flush()
    else:
        for card in cards:
            print(printable(str(card), 10_000))
    return EXIT_OK


def cmd_train(args) -> int:
    from crosssim.train import TrainConfig, train

    card = train(TrainConfig(task=args.task, engines=tuple(e.strip() for e in args.engines.split(",") if e.strip()),
                             steps=args.steps, n_envs=args.n_envs, seed=args.seed, randomize=args.randomize,
                             out=args.out, framework=args.framework))
    print(f"card: {card}")
    return EXIT_OK


def cmd_engines(args) -> int:
    from crosssim.engines.availability import engine_statuses

    for name, ok, reason in engine_statuses():
        print(f"{name:<24}{'available' if ok else 'unavailable':<13}{reason}")
    return EXIT_OK


def cmd_tasks(args) -> int:
    from crosssim.scene import canonical_model, resolve_scene
    from crosssim.tasks import registered_tasks

    for name, cls in sorted(registered_tasks().items()):
        task = cls()
        if not task.scene:  # the robot comes from the card (Locomotion): sizes depend on it
            print(f"{name:<14} obs, act and control from the card's robot and observation terms")
            continue
        c = canonical_model(resolve_scene(task.scene))
        print(f"{name:<14} obs {task.observation_size(c):>4}  act {task.action_size(c):>3}  "
              f"control {task.frame_skip * c.timestep * 1000:.0f} ms  scene {task.scene}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    from crosssim.real.cli import add_commands as add_real_commands, add_crossval_option
    from crosssim.runner import CrossvalConfig
    from crosssim.runner.crossval import DEFAULT_ENGINES

    h = lambda name: _help(CrossvalConfig, name)  # noqa: E731
    p = argparse.ArgumentParser(prog="crosssim", description="Cross-engine transfer checks for robot policies")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("crossval", help="run a policy in several engines and compare")
    c.add_argument("--policy", required=True, help=h("policy"))
    c.add_argument("--engines", default=",".join(DEFAULT_ENGINES), help=h("engines") + " Comma-separated.")
    c.add_argument("--episodes", type=int, default=10, help=h("episodes"))
    c.add_argument("--seed", type=int, default=0, help=h("seed"))
    c.add_argument("--out", default=None, help=h("out"))
    c.add_argument("--max-steps", type=int, default=None, help=h("max_steps"))
    c.add_argument("--trust-policy-code", action="store_true", help=h("trust_policy_code"))
    c.add_argument("--workers", type=int, default=CrossvalConfig.__dataclass_fields__["workers"].default_factory(),
                   help=h("workers"))
    c.add_argument("--episode-timeout", type=float, default=600.0, help=h("episode_timeout"))
    c.add_argument("--inline", action="store_true", help=h("inline"))
    c.add_argument("--batch-episodes", action="store_true", help=h("batch"))
    c.add_argument("--executor", default="local", choices=["local", "ray"], help=h("executor"))
    c.add_argument("--address", default=None, help=h("ray_address"))
    c.add_argument("--no-risk", dest="risk", action="store_false", help="nominal runs only: no sweeps, no risk profile")
    c.add_argument("--no-report", dest="report", action="store_false", help="do not write report.html")
    c.add_argument("--no-cache", dest="cache", action="store_false", help=h("cache") + " Off: recompute everything.")
    c.add_argument("--quiet", action="store_true", help="no progress lines")
    add_crossval_option(c)  # --real LOGDIR
    c.set_defaults(func=cmd_crossval)
    a = sub.add_parser("audit", help="model parameters read back from each engine vs the canonical model")
    a.add_argument("--robot", required=True, help="MJCF path or gymnasium:<file>.xml")
    a.add_argument("--engines", default="mujoco,pybullet")
    a.add_argument("--all", action="store_true", help="print matching rows too")
    a.set_defaults(func=cmd_audit)
    r = sub.add_parser("report", help="(re)generate report.html from a run folder")
    r.add_argument("dir", help="a crossval output folder (holding summary.json)")
    r.add_argument("--no-filmstrips", action="store_true", help="skip rendering frames")
    r.set_defaults(func=cmd_report)
    g = sub.add_parser("gate", help="PASS / WARN / FAIL for CI (exit 0 pass, 1 error, 2 fail, 3 warn if asked)")
    g.add_argument("--run", help="an existing crossval output folder")
    g.add_argument("--policy", help="policy card to evaluate now (never trusted: no code from it runs)")
    g.add_argument("--baseline", help="crossval output folder of the baseline (the policy on the target branch)")
    g.add_argument("--baseline-ref", help="git ref: evaluate the same card path as it is at this ref, same seeds")
    g.add_argument("--base", default=None,
                   help="trusted git ref: thresholds and engine profiles are read from it (default: --baseline-ref)")
    g.add_argument("--engines", default=",".join(DEFAULT_ENGINES))
    g.add_argument("--episodes", type=int, default=10)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--out", default=None, help="output folder for --policy")
    g.add_argument("--config", default=None, help="crosssim.toml or pyproject.toml with the thresholds")
    g.add_argument("--junit", default=None, help="write JUnit XML here")
    g.add_argument("--summary", default=None, help="append the Markdown summary here (also $GITHUB_STEP_SUMMARY)")
    g.set_defaults(func=cmd_gate)
    ch = sub.add_parser("changed-policies", help="policy cards whose folder a change touches")
    ch.add_argument("--base", required=True, help="git ref to compare with (e.g. origin/main)")
    ch.add_argument("--under", default="policies", help="folder holding policies")
    ch.add_argument("-z", "--null", action="store_true", help="end each path with NUL instead of a newline")
    ch.set_defaults(func=cmd_changed)
    from crosssim.train import TrainConfig

    t = sub.add_parser("train", help="train a policy (PPO, SB3 or RLlib) in one or several engines; writes its card")
    t.add_argument("--task", default="Hopper", help=_help(TrainConfig, "task"))
    t.add_argument("--engines", default="mujoco", help=_help(TrainConfig, "engines") + " Comma-separated.")
    t.add_argument("--framework", default="sb3", choices=["sb3", "rllib"], help=_help(TrainConfig, "framework"))
    t.add_argument("--steps", type=int, default=100_000, help=_help(TrainConfig, "steps"))
    t.add_argument("--n-envs", type=int, default=2, help=_help(TrainConfig, "n_envs"))
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--randomize", action="store_true", help=_help(TrainConfig, "randomize"))
    t.add_argument("--out", default="policies/trained", help=_help(TrainConfig, "out"))
    t.set_defaults(func=cmd_train)
    sub.add_parser("engines", help="list engines and whether they run here").set_defaults(func=cmd_engines)
    sub.add_parser("tasks", help="list tasks").set_defaults(func=cmd_tasks)
    add_real_commands(sub)  # logs validate | simulate, calibrate (crosssim.real.cli)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except CrossSimError as exc:
        print(f"crosssim: error: {printable(str(exc), 10_000)}", file=sys.stderr)  # one line, whatever a card holds
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("crosssim: interrupted; results written so far are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
