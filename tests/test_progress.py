"""What a crossval prints while it runs: bars in a terminal, plain lines in a pipe, engine noise in logs."""

import io
import os
import subprocess
import sys

import pytest

from conftest import ROOT, installed_engines
from crosssim.progress import RunProgress


def _pipe(**kw):
    stream = io.StringIO()
    return stream, RunProgress(stream, tty=False, **kw)


def test_pipe_lines_are_periodic_and_never_pass_the_total():
    stream, progress = _pipe(interval=3600)
    with progress:
        progress("mujoco", 4, 6, {"failure": None, "cached": True})  # resumed: 4 of 6 from the cache
        progress("mujoco", 5, 6, {"failure": None})  # within the interval: no line
        progress("mujoco", 15, 6, {"failure": None})  # a caller that over-counts still shows 6/6
        progress("pybullet", 1, 6, {"failure": "pybullet: engine worker killed by signal SIGSEGV " + "x" * 150})
    lines = stream.getvalue().splitlines()
    assert lines[0] == "  mujoco: 4/6 episodes (67 %) (4 reused from the cache)"
    assert lines[1].startswith("  mujoco: 6/6 episodes (100 %), done in ")
    assert not any("15/6" in line or "5/6" in line for line in lines)
    failed = next(line for line in lines if "episode failed" in line)
    assert failed.endswith("x" * 150)  # in full, never cut
    # the run ended: an engine short of its total says why (a failure), never "(stopped)"
    assert lines[-1] == "  pybullet: 1/6 episodes, ended with 1 failed episode"


def test_a_finished_run_ends_in_done_with_what_the_search_skipped():
    stream, progress = _pipe(interval=3600)
    with progress:
        progress("mujoco", 1, 30, {"failure": None})
        progress("mujoco", 28, 30, {"failure": None})  # the bisection visited fewer rungs than it may
    last = stream.getvalue().splitlines()[-1]
    assert last.startswith("  mujoco: done, 28 episodes in ") and "stopped" not in last
    assert last.endswith("(the sweep search needed 2 episodes fewer than the 30 it may run)")


def test_an_interrupted_run_says_stopped():
    stream, progress = _pipe(interval=3600)
    with pytest.raises(KeyboardInterrupt):
        with progress:
            progress("mujoco", 3, 30, {"failure": None})
            raise KeyboardInterrupt
    assert stream.getvalue().splitlines()[-1].endswith("(stopped)")


def test_seconds_per_engine_from_the_run_start(monkeypatch):
    clock = iter([100.0, 104.0, 112.5])
    monkeypatch.setattr("crosssim.progress.time.monotonic", lambda: next(clock))
    _, progress = _pipe(interval=3600)
    progress("mujoco", 1, 2, {"failure": None})
    progress("pybullet", 1, 2, {"failure": None})
    assert progress.seconds() == {"mujoco": 4.0, "pybullet": 12.5}


def test_pipe_eta_counts_only_episodes_run_now(monkeypatch):
    clock = iter([100.0, 100.0, 110.0, 130.0, 150.0])  # start, cached, first row, second row, third
    monkeypatch.setattr("crosssim.progress.time.monotonic", lambda: next(clock))
    stream, progress = _pipe(interval=0)
    progress("mujoco", 10, 20, {"failure": None, "cached": True})
    progress("mujoco", 11, 20, {"failure": None})  # carries the start-up: sets the speed's origin only
    assert stream.getvalue().splitlines()[-1] == "  mujoco: 11/20 episodes (55 %)"  # no ETA from start-up
    progress("mujoco", 12, 20, {"failure": None})
    progress("mujoco", 13, 20, {"failure": None})
    # 2 episodes in 40 s after the first: 7 left, about 2 min 20 s.
    assert stream.getvalue().splitlines()[-1] == "  mujoco: 13/20 episodes (65 %), about 2 min 20 s left"


def test_the_first_eta_is_not_start_up_spread_over_the_run(monkeypatch):
    """A 50 s run whose first episode waited 20 s for its worker said "about 32 min left"."""
    clock = iter([0.0, 20.0, 20.5, 21.0])
    monkeypatch.setattr("crosssim.progress.time.monotonic", lambda: next(clock))
    stream, progress = _pipe(interval=0)
    progress("mujoco", 1, 100, {"failure": None})
    progress("mujoco", 2, 100, {"failure": None})
    progress("mujoco", 3, 100, {"failure": None})
    assert stream.getvalue().splitlines()[-1] == "  mujoco: 3/100 episodes (3 %), about 48 s left"


def test_status_is_said_in_a_pipe_and_shown_on_a_bar():
    stream, progress = _pipe()
    progress("newton-mujoco-warp", 0, 5, {"failure": None, "status": "compiling Warp kernels (once; about 2 min)"})
    assert "newton-mujoco-warp: compiling Warp kernels (once" in stream.getvalue()
    tty = io.StringIO()
    with RunProgress(tty, tty=True) as bars:
        bars("newton-mujoco-warp", 0, 5, {"failure": None, "status": "compiling Warp kernels (once; about 2 min)"})
        bars("newton-mujoco-warp", 9, 5, {"failure": None})
        assert bars._bars.tasks[0].completed == 5 and bars._bars.tasks[0].fields["status"] == ""
    assert "5/5" in tty.getvalue()


def test_cold_warp_cache_is_announced(tmp_path, monkeypatch):
    from importlib.metadata import version

    from crosssim.runner.crossval import _startup_status

    pytest.importorskip("warp")
    monkeypatch.setenv("WARP_CACHE_PATH", str(tmp_path))
    assert "compiling Warp kernels" in _startup_status("newton-mujoco-warp")
    assert _startup_status("mujoco") is None
    (tmp_path / version("warp-lang")).mkdir()
    (tmp_path / version("warp-lang") / "wp_kernel_abc").mkdir()
    assert _startup_status("newton-mujoco-warp") is None


@pytest.mark.skipif("pybullet" not in installed_engines(), reason="pybullet not installed")
def test_engine_noise_goes_to_the_worker_log(tmp_path, good_policy):
    """PyBullet prints its build time from C on import: it lands in the run's logs/, not the terminal."""
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "CROSSSIM_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "crosssim.cli", "crossval", "--policy", str(good_policy / "card.yaml"),
                           "--engines", "mujoco,pybullet", "--episodes", "1", "--max-steps", "5", "--no-risk",
                           "--no-report", "--out", str(out)], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "build time" not in proc.stderr + proc.stdout
    assert "pybullet build time" in (out / "logs" / "pybullet.log").read_text()
    assert not (out / "logs" / "mujoco.log").exists()  # a quiet engine leaves no log
    assert "pybullet: 1/1 episode (100 %), done in" in proc.stderr  # a pipe: plain lines ("1 episode", issue 36)


# -- ETAs that know the search plan ---------------------------------------------------------------------


def test_bisection_bound_shrinks_to_what_it_visits():
    """After every visited rung, the most rungs the search visits in all: never below what it has
    visited, never above ceil(log2(K + 1)), never growing, and equal to the visits at the end; for
    every ladder of 1 to 9 rungs and every place the metric can fall off it."""
    from crosssim.sweep import bisect_rungs, max_visits

    for k in range(1, 10):
        for last_pass in range(0, k + 1):
            bounds = []
            visited = bisect_rungs(k, lambda r: r <= last_pass, on_visit=bounds.append)
            assert len(bounds) == len(visited) and bounds[-1] == len(visited)
            assert all(n <= max_visits(k) for n in bounds) and bounds == sorted(bounds, reverse=True)
            assert all(n >= i + 1 for i, n in enumerate(bounds))
    seen = []
    bisect_rungs(6, lambda r: False, on_visit=seen.append)  # fails at 3 then 1: 2 of the 3 it may visit
    assert seen == [3, 2]


def test_a_shrinking_plan_moves_the_eta_and_the_last_line(monkeypatch):
    """60 episodes planned (10 nominal + 5 families x 10 worst case); each family's search learns it
    needs fewer rungs: the total, and with it the ETA, shrink; the last line says what it skipped."""
    clock = iter([0.0, 0.0, 10.0, 15.0, 20.0, 30.0, 35.0, 36.0])  # the first: RunProgress starts
    monkeypatch.setattr("crosssim.progress.time.monotonic", lambda: next(clock))
    stream, progress = _pipe(interval=0)
    progress("mujoco", 1, 60, {"failure": None})  # start-up: the speed's origin
    progress("mujoco", 11, 60, {"failure": None})  # 10 episodes in 10 s
    assert stream.getvalue().splitlines()[-1] == "  mujoco: 11/60 episodes (18 %), about 49 s left"
    progress("mujoco", 11, 40, {"failure": None, "replan": True, "most": 60})  # two families need fewer rungs
    progress("mujoco", 21, 40, {"failure": None})  # 20 episodes in 20 s: 19 left of 40, not 39 of 60
    assert stream.getvalue().splitlines()[-1] == "  mujoco: 21/40 episodes (52 %), about 19 s left"
    progress("mujoco", 40, 42, {"failure": None})  # the last rung's rows, then the search's end
    progress("mujoco", 40, 40, {"failure": None, "replan": True, "most": 60})
    progress("mujoco", 40, 40, {"failure": None, "replan": True, "most": 60})  # said once
    lines = stream.getvalue().splitlines()
    assert sum("done in" in line for line in lines) == 1
    assert lines[-1].startswith("  mujoco: 40/40 episodes (100 %), done in 35 s")
    assert lines[-1].endswith("(the sweep search needed 20 episodes fewer than the 60 it may run)")
    assert not any("replan" in line for line in lines)


def test_a_bar_follows_the_shrinking_plan():
    tty = io.StringIO()
    with RunProgress(tty, tty=True) as bars:
        bars("mujoco", 5, 30, {"failure": None})
        bars("mujoco", 5, 22, {"failure": None, "replan": True, "most": 30})
        assert bars._bars.tasks[0].total == 22 and bars._bars.tasks[0].completed == 5
        bars("mujoco", 22, 22, {"failure": None})
    assert "done; the sweep search needed 8 episodes fewer" in tty.getvalue()


def test_a_crossval_ends_its_count_exactly_at_the_plan_it_ran(good_policy, tmp_path):
    """A real run: every total the progress hears is at most the one before, and the last equals
    the rows the run produced (the search said each family's end), so it ends at 100 %."""
    from crosssim.evaluate import crossval
    from crosssim.runner import CrossvalConfig

    heard = []
    run = crossval(CrossvalConfig(policy=str(good_policy / "card.yaml"), engines=("mujoco",), episodes=2,
                                  sweep_episodes=2, max_steps=40, max_episodes=2, out=str(tmp_path / "run"),
                                  report=False, cache=False),
                   progress=lambda e, done, total, row: heard.append((done, total, bool(row.get("replan")))))
    totals = [t for _, t, _ in heard]
    assert totals == sorted(totals, reverse=True) and any(r for _, _, r in heard)
    from crosssim.runfolder import RunFolder

    rows = len(RunFolder(run.out).read().rows)
    assert heard[-1][:2] == (rows, rows) and totals[0] > rows
