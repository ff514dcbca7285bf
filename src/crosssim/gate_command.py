"""``crosssim gate``: decide PASS / WARN / FAIL for one policy and write what CI reads (the Markdown
summary on stdout and in $GITHUB_STEP_SUMMARY, JUnit XML, annotations; crosssim.gate_report).

The decision is crosssim.gate's; this module gathers its inputs (the pull request's run, the base
branch's, the trusted thresholds) and its outputs, an error included.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from crosssim import gate_report
from crosssim.errors import CrossSimError
from crosssim.options import option, same_as
from crosssim.runfolder import RunFolder
from crosssim.runner.crossval import CrossvalConfig
from crosssim.text import no_workflow_commands, printable


@dataclass(frozen=True)
class GateArgs:
    """``crosssim gate``; the crossval it runs for --policy takes CrossvalConfig's defaults."""

    run: str | None = option(None, help="An existing crossval output folder.")
    policy: str | None = option(None, help="Policy card to evaluate now (never trusted: no code from it runs).")
    baseline: str | None = option(None, help="Crossval output folder of the baseline (the policy on the target branch).")
    baseline_ref: str | None = option(
        None, help="Git ref: evaluate the card this policy replaces at this ref (same path, replaces:, name, weights or "
                   "a git rename), same seeds; the policy itself runs in that card's robot and deployment gap.")
    base: str | None = option(
        None, help="Trusted git ref: thresholds and engine profiles are read from it (default: --baseline-ref).")
    engines: tuple[str, ...] = same_as(CrossvalConfig, "engines")
    episodes: int = same_as(CrossvalConfig, "episodes")
    seed: int = same_as(CrossvalConfig, "seed")
    max_steps: int | None = same_as(CrossvalConfig, "max_steps")
    out: str | None = option(None, help="Output folder for --policy.")
    config: str | None = option(None, help="crosssim.toml or pyproject.toml with the thresholds.")
    junit: str | None = option(None, help="Write JUnit XML here.")
    summary: str | None = option(None, help="Append the Markdown summary here (also $GITHUB_STEP_SUMMARY).")



def _interrupt_on_sigterm() -> None:
    import signal
    import threading

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)


def cmd_gate(args) -> int:
    """Decide, print and write the outputs; an error (exit 1) writes its own summary and JUnit."""
    started = time.monotonic()
    timer = Timer()
    try:
        summary, config, decision, card = _decide(args, timer)
    except CrossSimError as exc:
        _write_error(args, str(exc), time.monotonic() - started)
        raise
    md = gate_report.markdown(summary, decision)
    print(no_workflow_commands(md))
    for target in _summary_targets(args):
        with open(target, "a", encoding="utf-8") as f:
            f.write(md)
    if args.junit:
        Path(args.junit).write_text(gate_report.junit(summary, decision, timer.seconds, time.monotonic() - started),
                                    encoding="utf-8")
    if gate_report.in_github_actions():  # annotations on the card's file in the pull request's diff
        for line in gate_report.annotations(decision, card):
            print(line, flush=True)
    return decision.exit_code(config)


def _summary_targets(args) -> list[str]:
    return list(filter(None, [args.summary, os.environ.get("GITHUB_STEP_SUMMARY")]))


def _write_error(args, message: str, seconds: float) -> None:
    """The job summary, JUnit file and annotation of a policy the gate could not decide."""
    what = args.policy or args.run or "crosssim gate"
    for target in _summary_targets(args):
        with open(target, "a", encoding="utf-8") as f:
            f.write(gate_report.error_markdown(what, message))
    if args.junit:
        Path(args.junit).write_text(gate_report.error_junit(what, message, seconds), encoding="utf-8")
    if gate_report.in_github_actions():
        print(gate_report.error_annotation(message, args.policy), flush=True)


class Timer:
    """Seconds per engine column of the gate's runs: from a run's start to the engine's last row
    (engines run side by side), summed over the pull request's and the baseline's runs."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    def add(self, progress) -> None:
        for engine, s in progress.seconds().items():
            self.seconds[engine] = self.seconds.get(engine, 0.0) + s


def _decide(args, timer: Timer):
    """(summary, config, decision, card path) for the gate's arguments."""
    import contextlib

    from crosssim import gate
    from crosssim.evaluate import crossval
    from crosssim.runfolder import read_summary
    from crosssim.runner.cache import default_root

    if not (args.run or args.policy):
        raise CrossSimError("gate needs --run DIR (an existing crossval) or --policy CARD")
    engines = args.engines
    base_ref = getattr(args, "base", None) or args.baseline_ref
    _interrupt_on_sigterm()  # a cancelled CI job still removes the base tree it extracted
    # Engine workers start as `python -c ...` in the checkout under review, which would put it
    # first on their sys.path: a pull request's top-level multiprocessing/ would run in them.
    os.environ["PYTHONSAFEPATH"] = "1"
    os.environ["MPLBACKEND"] = "Agg"  # overrides a backend named by a ./matplotlibrc in the checkout

    def evaluate(policy: str, out: str | None, side: str):
        from crosssim.progress import RunProgress

        # Never trust code from the evaluated files: the gate runs on pull requests. Each side
        # has its own cache folder, so a baseline never reuses rows computed for the PR.
        # Progress goes to stderr: stdout is the Markdown summary.
        title = (f"gate: evaluating the {'pull request' if side == 'pr' else 'base branch'}'s policy "
                 f"{printable(policy)} in {', '.join(engines)}")
        with gate_report.Group(title, sys.stderr):
            print(title, file=sys.stderr, flush=True)
            with RunProgress(label=f"{side} ") as progress:
                run = crossval(CrossvalConfig(policy=policy, engines=engines, episodes=args.episodes, seed=args.seed,
                                              max_steps=args.max_steps, out=out, trust_policy_code=False,
                                              cache_dir=str(default_root() / "gate" / side)), progress=progress)
            timer.add(progress)
            return run

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
        if args.policy and trusted:
            confine(Path(args.policy), trusted.root)
        against = None  # the policy as the base branch sees it (crosssim.pairing.AgainstBase)
        if args.baseline_ref and not args.baseline:
            from crosssim.pairing import against_base

            base = trusted if trusted.ref == args.baseline_ref else stack.enter_context(
                trusted_base(args.baseline_ref, root=trusted.root))
            given = RunFolder(Path(args.run)).card_path(read_summary(Path(args.run))) if args.run else Path(args.policy)
            against = against_base(given, base)
        out = None  # where a baseline evaluated now goes: beside a run made now
        card = Path(args.policy) if args.policy else None
        if args.run:
            summary = read_summary(Path(args.run))
            card = RunFolder(Path(args.run)).card_path(summary)
            gate.refuse_preview(summary, f"--run {args.run}")
        else:
            policy = args.policy
            if against is not None and against.base_card is not None:
                import tempfile

                from crosssim.pairing import comparison_card

                # The regression check runs the pull request's policy in the base branch's world.
                folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="crosssim-gate-card-")))
                policy = str(comparison_card(against.card, against.base_card, folder))
            run = evaluate(policy, args.out, "pr")
            summary, out = run.summary, run.out
        baseline = base_branch = None
        if args.baseline:
            baseline = read_summary(Path(args.baseline))
            gate.refuse_preview(baseline, f"--baseline {args.baseline}")
        elif against is not None:
            pairing = against.pairing
            base_branch = gate.BaseBranch(pairing.how, against.physical_changes, pairing.removed)
            print(f"baseline: {pairing.how}", file=sys.stderr)
            if against.base_card is not None:
                baseline = evaluate(str(against.base_card.path), str(out / "baseline") if out else None,
                                    "baseline").summary
                if out is not None:
                    _report_with_baseline(out)
    return summary, config, gate.decide(summary, config, baseline, base_branch), card


def _report_with_baseline(out) -> None:
    """Rewrite the pull request's report now that its folder holds the base branch's run
    (``baseline/``): the report then shows both side by side. A failure keeps the first report."""
    from crosssim.report import write_report

    try:
        write_report(out)
    except Exception as exc:  # the decision does not depend on the page
        print(f"gate: report not updated with the baseline: {type(exc).__name__}: {printable(str(exc))}",
              file=sys.stderr)
