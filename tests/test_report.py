"""The HTML report in a real browser (headless Chromium driven by Playwright)."""

import json
import os
import shutil

import pytest

from conftest import ROOT
from crosssim.evaluate import crossval
from crosssim.runner import CrossvalConfig

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = ROOT / "test-artifacts"
HOSTILE = '<script>alert("x")</script>\x1b[31m'

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                reason="Chromium not found: apt-get install chromium (.ci/run installs it)")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    torch = pytest.importorskip("torch")
    tmp = tmp_path_factory.mktemp("report")
    torch.manual_seed(0)
    net = torch.jit.script(torch.nn.Sequential(torch.nn.Linear(11, 3), torch.nn.Tanh()))
    net.save(str(tmp / "policy.pt"))
    import yaml

    (tmp / "card.yaml").write_text(yaml.safe_dump({
        "name": "hostile-" + HOSTILE, "task": "Hopper", "policy": {"file": "policy.pt", "format": "torchscript"},
        "control_period": 0.008, "trained_in": "mujoco", "claimed": {"return": 1.0}}))
    out = tmp / "run"
    # Paths as a user types them, relative to where the run starts (the report must not depend on it).
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        run = crossval(CrossvalConfig(policy="card.yaml", episodes=2, max_steps=60, out="run", max_episodes=2,
                                      engines=("mujoco", "pybullet")))  # one stage: "too few to decide" stays
    finally:
        os.chdir(cwd)
    assert run.report, run.report_error
    return out


REAL = {"log_dir": "logs", "logs": ["walk-1", "walk-2"], "window_s": 1.0, "duration_s": 12.5,
        "real": {"survival": 1.0}, "policy_check": {"max_abs_action_error": 2e-7},
        "engines": {"mujoco": {"open_loop": {"q_rms": 0.031, "q_rms_windows": [0.01, 0.02]},
                               "closed_loop": {"q_rms": 0.052, "survival": 1.0, "orientation_error_deg": 3.1}},
                    "pybullet": {"error": "pybullet: cannot start"}}}


@pytest.fixture(scope="module")
def gate_dir(run_dir, tmp_path_factory):
    """A copy of the run as `crosssim gate` leaves it: the base branch's run in baseline/ (here the same
    policy, so every change is zero) and a REAL section in summary.json."""

    from crosssim.cli import main

    out = tmp_path_factory.mktemp("gate") / "run"
    shutil.copytree(run_dir, out)
    shutil.copytree(run_dir, out / "baseline")
    summary = json.loads((out / "summary.json").read_text())
    summary["real"] = REAL
    summary["card_from_run"] = str(os.path.relpath(run_dir / summary["card_from_run"], out))
    (out / "summary.json").write_text(json.dumps(summary))
    assert main(["report", str(out)]) == 0
    return out


def _open(browser, path, width):
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors, dialogs = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(path.as_uri())
    assert errors == [] and dialogs == []
    # Nothing widens the page: wide tables scroll inside their own box (phones included).
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.evaluate("[...document.querySelectorAll('table')].every(t => t.parentElement.classList.contains('scroll'))")
    return page


def test_report_in_chromium(run_dir):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    html = (run_dir / "report.html").read_text()
    assert "http://" not in html and "https://" not in html  # self-contained: no CDN, no remote images
    assert "<script>alert" not in html and "&lt;script&gt;alert" in html
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        for width, name in ((1280, "report-laptop.png"), (390, "report-phone.png")):
            page = _open(browser, run_dir / "report.html", width)
            assert page.locator("#verdict").inner_text().startswith("Verdict:")
            assert page.locator("h1").inner_text().endswith(HOSTILE.replace("\x1b", "\\x1b"))  # shown as text
            engines = page.locator("section.engine")
            assert engines.count() == 2
            assert {engines.nth(i).get_attribute("data-engine") for i in range(2)} == {"mujoco", "pybullet"}
            # The engine table leads with the task's primary metric (Hopper: return), with CIs.
            head = page.locator("#engine-table tr").first.locator("th")
            assert head.nth(1).inner_text() == "return (primary)"
            assert "[" in page.locator("#engine-table tr[data-engine=mujoco] td").nth(1).inner_text()
            # What the verdict means, with its thresholds.
            assert "90 %" in page.locator("#thresholds").inner_text()  # the sweeps' pass fraction
            # 2 episodes of a random policy: too few to decide whether it does its task, so no risk
            # number anywhere, the verdict's support included.
            risk = json.loads((run_dir / "summary.json").read_text())["risk"]
            assert risk["harness_check"]["status"] == "undecided" and risk["verdict"] == "unknown"
            assert risk["aggregate"] is None and risk["verdict_support"] == {}
            assert page.locator("#verdict-support").count() == 0
            # Filmstrips: the same instants in every engine, each frame captioned with its time.
            times = [[c.inner_text() for c in e.locator("figcaption").all()] for e in engines.all()]
            assert times[0] == times[1] and times[0][0] == "t = 0.00 s" and len(times[0]) == 6
            # Per-episode outcomes, every condition.
            nominal = page.locator("details[data-condition=nominal] table.episodes")
            assert nominal.locator("tr").count() == 1 + 2 * 2
            assert "at t = " in nominal.inner_text() or "step limit" in nominal.inner_text()
            assert page.locator("details[data-condition^='actuation@']").count() >= 1  # the visited sweep rungs
            # Audit values by name and unit: PyBullet integrates with Euler where the model says RK4.
            audit = page.locator("#audit-pybullet .audit-summary").inner_text()
            assert "integrator" in audit and "RK4 vs Euler" in audit and "1 vs 0" not in audit
            assert page.locator("#fig-sweep").count() == 1
            images = page.locator("img")
            assert images.count() >= 4 and page.locator(".strip figure").count() == 2 * 6
            for i in range(images.count()):  # every image decoded (naturalWidth > 0)
                assert page.evaluate("(img) => img.complete && img.naturalWidth > 0", images.nth(i).element_handle())
            page.screenshot(path=str(ARTIFACTS / name), full_page=True)
        browser.close()


def test_gate_and_real_sections_in_chromium(gate_dir):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        for width, name in ((1280, "report-gate-laptop.png"), (390, "report-gate-phone.png")):
            page = _open(browser, gate_dir / "report.html", width)
            real = page.locator("#real-table").inner_text()
            assert "0.03 rad" in real and "3.1 deg" in real and "pybullet: cannot start" in real
            assert "2 logs" in page.locator("#real + p").inner_text()
            gate = page.locator("#gate-table")
            assert gate.locator("tr").count() > 1
            assert "+0 %" in gate.inner_text()  # the baseline is the same run: nothing changed
            sides = [line.split("\t")[1:] for line in page.locator("#gate-verdicts").inner_text().splitlines()[1:]]
            assert len(sides) == 2 and sides[0] == sides[1]  # base and PR: the same verdict and drop
            page.screenshot(path=str(ARTIFACTS / name), full_page=True)
        browser.close()


def test_report_regenerates_from_stored_results(run_dir, capsys):
    from crosssim.cli import main

    (run_dir / "report.html").unlink()
    assert main(["report", str(run_dir), "--no-filmstrips"]) == 0
    assert (run_dir / "report.html").stat().st_size > 10_000
    said = capsys.readouterr()  # what it renders before the wait, how long it took after
    assert "rendering plots" in said.err and "report.html (built in " in said.out


def _without_timestamp(html: str) -> str:
    import re

    return re.sub(r"<tr><th>report generated</th><td>[^<]*</td></tr>", "", html)


def test_report_same_from_any_folder(run_dir, tmp_path, monkeypatch):
    """`crosssim report DIR` from the run's own folder and from an unrelated one: the same page
    (filmstrips and joint plots included, which need the card the run stored relative to itself)."""
    from crosssim.cli import main

    pages = []
    for cwd in (run_dir.parent, tmp_path):
        monkeypatch.chdir(cwd)
        assert main(["report", str(run_dir)]) == 0
        pages.append(_without_timestamp((run_dir / "report.html").read_text()))
    assert 'class="strip"' in pages[1] and "Filmstrips unavailable" not in pages[1]
    assert pages[0] == pages[1]


def test_terminal_table_leads_with_the_primary_metric(run_dir, monkeypatch):
    import io

    monkeypatch.setenv("COLUMNS", "160")  # wide: one header line (at 80 the headers wrap, tested in test_preview)
    from crosssim.cli import print_table
    from crosssim.report.build import engine_table_of
    from crosssim.runfolder import read_summary

    out = io.StringIO()
    print_table(read_summary(run_dir), out, table=engine_table_of(run_dir))
    head = next(line for line in out.getvalue().splitlines() if "engine" in line).split()
    assert head[:3] == ["engine", "return", "(primary)"] and "drop vs mujoco" in out.getvalue()


# -- a run with a risk profile, and a legged robot's run ------------------------------------------------------


def _chromium(p):
    return p.chromium.launch(executable_path=CHROMIUM,
                             args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])


@pytest.fixture(scope="module")
def risk_dir(tmp_path_factory):
    """The project's own Hopper policy in two engines, --quick: a verdict with margins and dose-response curves."""
    from crosssim.cli import main

    out = tmp_path_factory.mktemp("risk") / "run"
    assert main(["crossval", "--policy", str(ROOT / "policies" / "hopper-ppo-mujoco" / "card.yaml"), "--quick",
                 "--engines", "mujoco,pybullet", "--out", str(out), "--quiet"]) == 0
    return out


def test_setting_text_is_the_terminals_and_the_reports():
    from crosssim.sweep import setting_text, settings_text

    assert setting_text("motor_lag", 0.00167) == "motor_lag 1.7 ms"
    assert setting_text("motor_lag", 0.00167, named=False) == "1.7 ms"
    assert settings_text({"motor_strength": 0.88, "motor_lag": 0.024}) == "motor_strength x0.88, motor_lag 24 ms"
    assert setting_text("motor_free_speed", float("inf")) == "motor_free_speed unlimited"


def test_report_with_a_verdict_in_chromium(risk_dir, capsys):
    """Units where numbers stand, severity axes with physical values, panels that stack on a phone."""
    from playwright.sync_api import sync_playwright

    from crosssim.cli import print_risk
    from crosssim.runfolder import read_summary
    from crosssim.sweep import settings_text

    risk = read_summary(risk_dir).risk
    print_risk(risk)
    terminal = capsys.readouterr().out
    families = list(risk.components)
    with sync_playwright() as p:
        browser = _chromium(p)
        for width, name in ((1280, "report-risk-laptop.png"), (390, "report-risk-phone.png")):
            page = _open(browser, risk_dir / "report.html", width)
            for family, c in risk.components.items():
                cell = page.locator(f"#risk-table tr[data-family={family}] td.settings").inner_text()
                assert cell == settings_text(c.margin_settings)  # the terminal's words, units included
                assert cell in " ".join(terminal.split())  # (the terminal may wrap it over lines)
            actuation = page.locator("#risk-table tr[data-family=actuation] td.settings").inner_text()
            assert " ms" in actuation and "x0." in actuation
            # One image per gap family, each at least 300 px wide: stacked on a phone, side by side on a laptop.
            for grid, count in (("#dose-response", len(families)), ("#fig-sweep", len(families) + 1)):
                boxes = [img.bounding_box() for img in page.locator(f"{grid} img").all()]
                assert len(boxes) == count and all(b["width"] >= 300 for b in boxes), (grid, boxes)
                rows = len({round(b["y"]) for b in boxes})
                assert rows == (count if width == 390 else -(-count // 3)), (grid, width, boxes)
            panels = [img.get_attribute("data-panel") for img in page.locator("#fig-sweep img").all()]
            assert panels == [*families, "rehearsal"]  # no "actuation@3": families on a severity axis
            caption = page.locator("#dose-response").locator("xpath=preceding-sibling::p[1]").inner_text()
            assert "1 = a typical gap" in caption
            assert "median" in page.locator("#box-caption").inner_text()
            # The Hopper's torques against its motors' limit (gear x ctrl range), its one foot in both engines.
            torques = [img.get_attribute("data-panel") for img in page.locator("#fig-torque img").all()]
            assert torques == ["thigh_joint torque", "leg_joint torque", "foot_joint torque"]
            assert "torque limit" in page.locator("#torques + p").inner_text()
            assert [img.get_attribute("data-panel") for img in page.locator("#fig-gait img").all()] == \
                ["mujoco", "pybullet"]
            assert page.locator("#gait-table tr[data-foot=foot]").count() == 2
            # The run's files, linked relative to the report.
            for f in ("results.parquet", "summary.json"):
                link = page.locator(f"nav a[href='{f}']")
                assert link.count() == 1 and (risk_dir / f).is_file()
            page.screenshot(path=str(ARTIFACTS / name), full_page=True)
        browser.close()


JOINTS_G1 = [f"{side}_{j}_joint" for side in ("left", "right")
             for j in ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")]


@pytest.mark.skipif(not (ROOT.parent / "shared" / "fixtures" / "unitree-g1").is_dir(),
                    reason="../shared/fixtures/unitree-g1 is absent")
def test_legged_report_shows_every_joint_and_the_commanded_velocity(tmp_path):
    from playwright.sync_api import sync_playwright

    from crosssim.cli import main

    out = tmp_path / "g1"
    assert main(["crossval", "--policy", str(ROOT / "tests" / "cards" / "robots" / "unitree-g1.yaml"),
                 "--engines", "mujoco,pybullet", "--episodes", "1", "--max-steps", "100", "--no-risk",
                 "--out", str(out), "--quiet"]) == 0
    with sync_playwright() as p:
        browser = _chromium(p)
        for width, name in ((1280, "report-g1-laptop.png"), (390, "report-g1-phone.png")):
            page = _open(browser, out / "report.html", width)
            panels = [img.get_attribute("data-panel") for img in page.locator("#fig-overlay img").all()]
            assert panels[:2] == ["base height", "base x"] and len(panels) == 2 + 12
            assert "left_knee_joint" in panels and "right_ankle_roll_joint" in panels
            velocity = [img.get_attribute("data-panel") for img in page.locator("#fig-velocity img").all()]
            assert velocity == ["forward velocity", "sideways velocity", "yaw rate"]
            assert "commanded: 0.5 m/s forward" in page.locator("#velocity + p").inner_text()
            # Every joint's torque and both feet's contacts in every engine (the gait diagram).
            torques = [img.get_attribute("data-panel") for img in page.locator("#fig-torque img").all()]
            assert torques == [f"{j} torque" for j in JOINTS_G1]
            assert "torque limit" not in page.locator("#torques + p").inner_text()  # the card's PD is unclipped
            gait = [img.get_attribute("data-panel") for img in page.locator("#fig-gait img").all()]
            assert gait == ["mujoco", "pybullet"]
            cells = page.locator("#gait-table tr[data-engine] td").all_inner_texts()
            assert len(cells) == 2 * 2 * 5 and "left_ankle_roll_link" in cells
            duty = [int(c.split()[0]) for c in cells[2::5]]
            assert all(20 <= d <= 90 for d in duty), cells  # walking: each foot both down and up
            assert page.locator("#gait-missing").count() == 0 and page.locator("#gait-note").count() == 0
            assert all(b["width"] >= 300 for b in (i.bounding_box() for i in page.locator("#fig-gait img").all()))
            divergence = [img.get_attribute("data-panel") for img in page.locator("#fig-divergence img").all()]
            assert divergence[0].startswith("base position") and "12 joints" in divergence[1]
            assert all(b["width"] >= 300 for b in (i.bounding_box() for i in page.locator("#fig-overlay img").all()))
            page.screenshot(path=str(ARTIFACTS / name), full_page=True)
        browser.close()


def test_report_on_a_moved_folder_says_what_it_left_out(run_dir, tmp_path, capsys):
    from crosssim.cli import main

    moved = tmp_path / "a" / "b" / "c" / "moved"  # deeper than before: the card's relative path no longer resolves
    shutil.copytree(run_dir, moved)
    assert main(["report", str(moved)]) == 0
    err = capsys.readouterr().err
    assert "warning: incomplete report: the policy card could not be loaded" in err and "filmstrips" in err
    assert "Incomplete report" in (moved / "report.html").read_text()
    with pytest.raises(SystemExit) as stop:  # a folder that is not there is a bad command line: one line, exit 2
        main(["report", str(tmp_path / "missing")])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1
    assert err[0].startswith(f"crosssim report: error: argument DIR: '{tmp_path / 'missing'}': no such folder")
