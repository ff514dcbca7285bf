"""Command line: ``crosssim crossval | audit | report | gate | changed-policies | train | engines | tasks | card import``.

Each command's flags, defaults and help come from one typed config (a frozen dataclass, see
crosssim.options). A bad value is one line and exit status 2; errors crosssim can explain
(CrossSimError) print one line naming the file and the fix and exit with status 1; a traceback
means a bug in crosssim.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass

from crosssim import logs, options
from crosssim.errors import CrossSimError
from crosssim.options import Parser, add_options, from_args, option, same_as
from crosssim.runner.crossval import CrossvalConfig
from crosssim.text import duration, plural, printable
from crosssim.gate_command import GateArgs, cmd_gate
from crosssim.train import TrainConfig

LOG = logs.get("crosssim.cli")

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_MISMATCH, EXIT_ENGINE_FAILED = 0, 1, 2, 4, 5
"""Exit statuses: success; an error crosssim explains; a bad command line (argparse's 2); ``audit`` found a
parameter an engine does not reproduce (3 is the gate's WARN, see crosssim.gate); ``crossval`` ran, wrote its
results, and every episode of an engine column failed (NaN actions, a crashed engine, a profile typo)."""


@dataclass(frozen=True)
class AuditConfig:
    robot: str = option(help="MJCF path or gymnasium:<file>.xml.", parse=options.scene_file)
    engines: tuple[str, ...] = option(("mujoco", "pybullet"), parse=options.engine_names,
                                      help="Engine profiles to audit, comma-separated.")
    all: bool = option(False, help="Print matching rows too.")


@dataclass(frozen=True)
class ReportConfig:
    dir: str = option(positional=True, parse=options.existing_folder,
                      help="A crossval output folder (holding summary.json).")
    filmstrips: bool = option(True, off="Skip rendering frames.", help="Render filmstrips of each engine.")
    video: bool = option(False, help="Also (re)render a short video of episode 0 per engine (DIR/videos/<engine>.mp4, "
                                     "embedded in the report); needs pip install 'crosssim[video]'.")


@dataclass(frozen=True)
class ChangedConfig:
    base: str = option(help="Git ref to compare with (e.g. origin/main).")
    under: str = option("policies", help="Folder holding policies.")
    null: bool = option(False, flag=("-z", "--null"), help="End each path with NUL instead of a newline.")
    all: bool = option(False, help="List every card under --under, changed or not (to evaluate a whole branch).")


def _fmt(x: float, digits: int = 1) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _console(file):
    """A rich console on ``file``: a terminal's width (or $COLUMNS), else 160 columns (CI logs are
    wide). Tables wrap their cells within it, never cut them."""
    import os

    from rich.console import Console

    columns = os.environ.get("COLUMNS", "")
    width = None if file.isatty() else int(columns) if columns.isdigit() and int(columns) >= 40 else 160
    return Console(file=file, highlight=False, width=width)


def _table(*columns: str):
    """A table whose cells wrap at spaces (a name stays whole: the first column never wraps)."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for k, name in enumerate(columns):
        table.add_column(name, justify="left" if k == 0 else "right", no_wrap=k == 0, overflow="fold")
    return table


def _cells(*values: str):
    from rich.text import Text

    return [Text(printable(v)) for v in values]  # as text: a name holding [brackets] is not markup


def print_table(summary, file=None, *, table=None) -> None:
    """The per-engine table of a crosssim.results.RunSummary (a rich table: columns never run together).
    ``table``: the report's crosssim.report.tables.EngineTable of the run (its task's primary metric
    first, with CIs); without it, returns."""
    file = file or sys.stdout
    ref = summary.reference_engine
    if table is not None:
        out = _table("engine", *table.columns, f"drop vs {ref}", "failed")
        for line in table.lines:
            out.add_row(*_cells(line.engine, *[c.replace(" – ", ", ") for c in line.cells], line.drop,
                                str(line.failed)))
    else:
        out = _table("engine", "return (95% CI)", "length", "early end", f"drop vs {ref}", "failed")
        for e, s in summary.engines.items():
            lo, hi = s.return_ci95
            drop = "reference" if e == ref else (_fmt(100 * s.drop_vs_reference) + " %")
            out.add_row(*_cells(e, f"{_fmt(s.mean_return)} [{_fmt(lo)}, {_fmt(hi)}]", _fmt(s.mean_length, 0),
                                _fmt(100 * s.terminated_early, 0) + " %", drop, str(s.failed)))
    errors = [f"  ! {e}: {s.error}" for e, s in summary.engines.items() if s.error]
    console = _console(file)
    console.print(out)
    for line in errors:
        console.print(printable(line, 2000), markup=False)
    if table is not None:
        console.print(printable(f"(nominal episodes; mean [95% CI]; {table.metric_text})", 2000), markup=False)


def print_check(check, file=None, *, blank: bool = True) -> None:
    """The harness check's line (crosssim.results.HarnessCheck), with or without a risk profile
    (``blank``: after an empty line, which sets it off from a table above)."""
    print(f"{chr(10) if blank else ''}harness check: {check.status} - {check.message}", file=file or sys.stdout)


def print_risk(risk, file=None, *, preview=None, brief: bool = False) -> None:
    """A crosssim.results.RiskProfile, one line per component (to ``file``, default: stdout as it is now).
    ``preview``: the run's crosssim.results.Preview (a --quick run), said on the verdict line; ``brief``
    (-q): the harness check and the verdict line only."""
    file = file or sys.stdout
    print_check(risk.harness_check, file, blank=not brief)
    word = "verdict (--quick preview)" if preview else "verdict"
    if brief and risk.aggregate is not None:
        print(f"{word}: {risk.verdict.upper()} - {risk.message}", file=file)
        return
    if risk.aggregate is None:  # a harness mismatch, or too few episodes to decide: no risk numbers
        why = ("too few episodes to decide whether the policy does its task" if risk.harness_check.status == "undecided"
               else "no transfer risk is computed until the harness check passes")
        print(f"{word}: {risk.verdict.upper()} - {why}", file=file)
        return
    from crosssim.results import support_text
    from crosssim.sweep import settings_text

    print(f"tolerance margins: largest severity (1 = a typical gap) at which '{risk.metric}' keeps "
          f"{100 * risk.thresholds.get('pass_fraction', 0.9):.0f}% of nominal "
          f"({plural(risk.sweep_episodes, 'episode')} per rung); "
          f"expected gap: {risk.deployment_source}", file=file)
    file.flush()
    console = _console(file)
    table = _margins_table(risk, settings_text, with_settings=True)
    if _natural_width(console, table) > console.width:  # narrow: the physical values go under the table
        console.print(_margins_table(risk, settings_text, with_settings=False))
        for name, c in risk.components.items():
            console.print(printable(f"  {name} at the margin: {settings_text(c.margin_settings)}", 2000), markup=False)
    else:
        console.print(table)
    print("engine margins: " + "; ".join(f"{name} " + ", ".join(f"{e} {_fmt(m, 2)}" for e, m in c.engine_margins.items())
                                         for name, c in risk.components.items()), file=file)
    print(f"{word}: {risk.verdict.upper()} - {risk.message}", file=file)
    if risk.verdict_support:
        what = "rehearsal" if risk.rehearsal is not None else "sweep"
        print(f"verdict support (share of bootstrap resamples of the {what} episodes per class): "
              + ", ".join(f"{v} {support_text(p)}" for v, p in risk.verdict_support.items()), file=file)


def _natural_width(console, renderable) -> int:
    """Columns ``renderable`` takes unwrapped (``console.measure`` is capped at the console's width)."""
    from rich.measure import Measurement

    return Measurement.get(console, console.options.update(max_width=100_000), renderable).maximum


def _margins_table(risk, settings_text, *, with_settings: bool):
    """The margins per gap family; ``with_settings``: the physical values at the margin as a column."""
    table = _table("gap family", "margin [95% CI]", "expected gap", "headroom", "loss at gap", "class",
                   *(["at the margin"] if with_settings else []))
    for name, c in risk.components.items():
        lo, hi = c.margin_ci95
        bound = ">=" if c.censored else ""
        margin = bound + _fmt(c.margin, 2) + f" [{_fmt(lo, 2)}, {_fmt(hi, 2)}]"
        gap = "none" if c.gap is None else _fmt(c.gap, 2)
        head = "-" if c.headroom is None else bound + _fmt(c.headroom, 1) + "x"
        table.add_row(*_cells(name, margin, gap, head, _fmt(100 * c.drop_at_gap, 0) + " %", c.verdict,
                              *([settings_text(c.margin_settings)] if with_settings else [])))
    return table


def cmd_crossval(args) -> int:
    from crosssim.evaluate import crossval
    from crosssim.runfolder import RunFolder

    config = from_args(CrossvalConfig, args)
    LOG.info(header(config))
    LOG.debug("config: %s", config)
    if not logs.enabled():  # -q: no progress lines
        run = crossval(config)
    else:
        from crosssim.progress import RunProgress

        with RunProgress() as progress:
            run = crossval(config, progress=progress)
    talk = logs.enabled()  # -q: warnings and the verdict only
    if talk:
        try:
            from crosssim.report.build import engine_table_of

            table = engine_table_of(run.out)
        except Exception as exc:  # the stored summary's own table is always there
            LOG.debug("the report's engine table failed (%s: %s); the summary's is shown", type(exc).__name__, exc)
            table = None
        print_table(run.summary, table=table)
    for warning in run.summary.warnings:
        LOG.warning(warning)
    if run.summary.risk:
        print_risk(run.summary.risk, preview=run.summary.preview, brief=not talk)
    elif run.summary.harness_check is not None:
        print_check(run.summary.harness_check, blank=talk)
    if run.summary.real and talk:
        from crosssim.real.compare import format_real

        print(format_real(run.summary.real))
        if run.summary.real.get("suspects"):
            print(f"  suspects: {printable(run.summary.real['suspects'], 2000)}")
    if run.summary.correction:
        from crosssim.correct.versus import format_versus

        print(format_versus(run.summary.correction))
    folder = RunFolder(run.out)
    if talk:
        print(f"\nresults: {folder.rows_path}  summary: {folder.summary_path}")
        if run.report:
            print(f"report: {run.report}")
    if run.summary.preview:
        if talk:
            print(f"{run.summary.preview.text()}: wider intervals, and the verdict may change in a full run; "
                  "rerun without --quick before acting on it (the gate refuses a preview)")
    elif run.report_error:
        LOG.warning("report not written: %s", run.report_error)
    for what in run.left_out:
        LOG.warning("incomplete report: %s", printable(what, 2000))
    dead = failed_engines(run.summary)
    if dead:
        LOG.error("crossval: every episode failed in %s: its numbers mean nothing (exit %d; the failures are in "
                  "results.parquet's failure column)", ", ".join(printable(e) for e in dead), EXIT_ENGINE_FAILED)
        return EXIT_ENGINE_FAILED
    return EXIT_OK


def header(config: CrossvalConfig) -> str:
    """The run's first line, with the counts it will really run (``--quick`` caps them, and says so)."""
    from crosssim.runner.crossval import quick_config

    capped = quick_config(config)
    n = capped.episodes
    text = (f"crossval {printable(config.policy)}: engines {', '.join(config.engines)}, {plural(n, 'episode')}"
            f" per engine, seed {config.seed}")
    if config.quick:
        text += (f" (--quick preview: {capped.sweep_episodes} per sweep rung, at most {capped.max_steps} control steps"
                 f"{'; --episodes ' + str(config.episodes) + ' capped' if config.episodes > n else ''})")
    return text


def failed_engines(summary) -> list[str]:
    """Engine columns of a crosssim.results.RunSummary that produced no episode: none ran, or every
    one failed (an engine error that cost some episodes is not this: the others count)."""
    return [e for e, s in summary.engines.items() if s.episodes == 0 or s.failed >= s.episodes]


def cmd_audit(args) -> int:
    """Exit EXIT_MISMATCH when any engine reads back a parameter beyond tolerance, EXIT_ERROR when
    an engine could not be audited, else EXIT_OK."""
    from crosssim.engines import get_engine
    from crosssim.profiles import load_profile
    from crosssim.scene import resolve_scene
    from crosssim.variant import compile_model

    scene = resolve_scene(args.robot)
    mismatched, unavailable = [], []
    for name in args.engines:
        profile = load_profile(name)
        try:
            engine = get_engine(profile.engine)
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
    """Exit EXIT_OK once report.html is written, even when parts could not be rebuilt (each one said
    on stderr: a run folder moved away from its card loses its filmstrips and joint plots)."""
    import time

    from crosssim.report import build_report

    t0 = time.monotonic()
    LOG.info("report %s: rendering %s%splots (a legged robot's take about a minute)", printable(str(args.dir), 500),
             "filmstrips and " if args.filmstrips else "", "videos and " if args.video else "")
    if args.video:
        from crosssim.report.video import check_available

        check_available()
    result = build_report(args.dir, filmstrips=args.filmstrips, video=args.video)
    if logs.enabled():
        print(f"report: {result.path} (built in {duration(time.monotonic() - t0)})")
    for what in result.left_out:
        LOG.warning("incomplete report: %s", printable(what, 2000))
    return EXIT_OK


def cmd_changed(args) -> int:
    import os

    from crosssim.gitutil import changed_policies

    cards = changed_policies(args.base, under=args.under, every=getattr(args, "all", False))
    if getattr(args, "null", False):  # for `while IFS= read -r -d ''`: any character in a path survives
        sys.stdout.buffer.write(b"".join(os.fsencode(str(c)) + b"\0" for c in cards))
        sys.stdout.flush()
    else:
        for card in cards:
            print(printable(str(card), 10_000))
    return EXIT_OK


def cmd_train(args) -> int:
    from crosssim.train import train

    print(f"card: {train(from_args(TrainConfig, args))}")
    return EXIT_OK


def cmd_engines(args) -> int:
    from crosssim.engines.availability import engine_statuses
    from crosssim.profiles import profile_statuses

    for status in engine_statuses():
        for name, ok, reason in [status, *profile_statuses(*status)]:
            print(f"{name:<24}{'available' if ok else 'unavailable':<13}{reason}")
    return EXIT_OK


def cmd_tasks(args) -> int:
    """One line per task and version: sizes, control period and scene; the default version named."""
    from crosssim.errors import CrossSimError
    from crosssim.scene import canonical_model, resolve_scene
    from crosssim.tasks import describe_task, registered_tasks

    rows = []
    for name, cls in sorted(registered_tasks().items()):
        versions = list(getattr(cls, "versions", {})) or [None]
        default = getattr(cls, "default_version", None)
        for version in versions:
            try:
                task = cls() if version is None else cls(version=version)
                label = describe_task(task)
                if version is not None and version == default:
                    label += f" ({name})"  # what a card that names no version runs
                if not task.scene:  # the robot comes from the card (Locomotion): sizes depend on it
                    rows.append((label, "obs, act and control from the card's robot and observation terms"))
                    continue
                c = canonical_model(resolve_scene(task.scene))
                options = getattr(task, "options_note", "")
                rows.append((label, f"obs {task.observation_size(c):>4}  act {task.action_size(c):>3}  control "
                                    f"{task.frame_skip * c.timestep * 1000:>2.0f} ms  scene {task.scene}"
                                    + (f"  ({options})" if options else "")))
            except (CrossSimError, TypeError) as exc:  # a plugin's task that cannot be built says why, once
                rows.append((name, f"cannot be listed: {exc}"))
        for version, why in getattr(cls, "unavailable_versions", {}).items():
            rows.append((f"{name}-{version}", f"not available: {why}"))
    width = max(len(label) for label, _ in rows) + 2
    for label, text in rows:
        print(f"{label:<{width}}{text}")
    print("A task named without a version runs the one marked with its name; choose another with "
          "task: <Task>-v4 (or task_options.version).")
    return EXIT_OK


def _version() -> str:
    from crosssim.versions import package_versions

    v = package_versions()
    return f"crosssim {v.get('crosssim', 'unknown')} (python {v['python']})"


def build_parser() -> argparse.ArgumentParser:
    """The whole command line; every flag is generated from a command's typed config."""
    from crosssim.real.cli import add_commands as add_real_commands

    p = Parser(prog="crosssim", description="Cross-engine transfer checks for robot policies",
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, func, help: str, *configs: type) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help, description=help)
        for config in configs:
            add_options(c, config)
        c.set_defaults(func=func)
        return c

    crossval_parser = command("crossval", cmd_crossval, "run a policy in several engines and compare (exit "
                              f"{EXIT_ENGINE_FAILED} if every episode of an engine failed)", CrossvalConfig)
    # Lockstep is the default now; the flag that asked for it stays accepted (CI scripts name it).
    crossval_parser.add_argument("--batch-episodes", action="store_true", dest="_batch_episodes",
                                 help=argparse.SUPPRESS)
    # A pass fraction outside (0, 1) is a bad flag value (exit 2, now), not an error after the card loads.
    for action in crossval_parser._actions:
        if "--pass-fraction" in action.option_strings:
            action.type = options.share
    command("audit", cmd_audit, "model parameters read back from each engine vs the canonical model "
            f"(exit {EXIT_MISMATCH} if one does not match)", AuditConfig)
    command("report", cmd_report, "(re)generate report.html from a run folder", ReportConfig)
    command("gate", cmd_gate, "PASS / WARN / FAIL for CI (exit 0 pass, 1 error, 2 fail, 3 warn if asked)", GateArgs)
    command("changed-policies", cmd_changed, "policy cards whose folder a change touches", ChangedConfig)
    command("train", cmd_train, "train a policy (PPO, SB3 or RLlib) in one or several engines; writes its card",
            TrainConfig)
    command("engines", cmd_engines, "list engines and whether they run here")
    command("tasks", cmd_tasks, "list tasks")
    add_real_commands(sub)  # logs validate | simulate, calibrate (crosssim.real.cli)
    from crosssim.importers.cli import add_commands as add_card_commands

    add_card_commands(sub)  # card import (crosssim.importers.cli)
    from crosssim.correct.cli import add_commands as add_correct_commands

    add_correct_commands(sub)  # correct collect | train (crosssim.correct.cli)
    _add_verbosity(p, top=True)
    return p


VERBOSE_HELP = "Say more: debug messages of every crosssim module (logging, logger crosssim.*)."
QUIET_HELP = "Say less: warnings, errors and the verdict only (no header, progress or tables)."


def _add_verbosity(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    """-v / -q on the top parser and on every command, nested ones included (``crosssim -q crossval`` and
    ``crosssim crossval -q`` alike); a command that already has its own --quiet keeps it (and -v)."""
    default = {} if top else {"default": argparse.SUPPRESS}  # a command's flag never resets the top one
    taken = {o for a in parser._actions for o in a.option_strings}
    if "-v" not in taken:
        parser.add_argument("-v", "--verbose", action="count", help=VERBOSE_HELP,
                            **({"default": 0} if top else default))
    if "--quiet" not in taken:
        parser.add_argument("-q", "--quiet", action="store_true", help=QUIET_HELP,
                            **({"default": False} if top else default))
    commands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not commands and not top:  # a command: its own errors name it (``crosssim gate: error: ...``)
        parser.set_defaults(_parser=parser)
    for action in commands:
        for child in dict.fromkeys(action.choices.values()):  # aliases name one parser more than once
            _add_verbosity(child)


def verbosity(args) -> int:
    """logs.QUIET, NORMAL or VERBOSE from the parsed -q / -v (-q wins)."""
    if getattr(args, "quiet", False):
        return logs.QUIET
    return logs.VERBOSE if getattr(args, "verbose", 0) else logs.NORMAL


def main(argv=None) -> int:
    import os

    # Every process crosssim starts (engine workers, sandboxed policies, the report's renderer)
    # keeps the current folder, possibly a checkout under review, off the front of its sys.path.
    os.environ["PYTHONSAFEPATH"] = "1"
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the command that got them: "crosssim gate: error: unrecognized arguments: ..."
        getattr(args, "_parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    logs.setup(verbosity(args))
    try:
        return args.func(args)
    except CrossSimError as exc:
        LOG.error("crosssim: error: %s", printable(str(exc), 10_000))  # one line, whatever a card holds
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("crosssim: interrupted; results written so far are kept", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader stopped (`crosssim engines | head`): nothing left to say
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit flush cannot fail again
        return 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader went away


if __name__ == "__main__":
    sys.exit(main())
