"""The HTML report in a real browser (headless Chromium driven by Playwright)."""

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
        run = crossval(CrossvalConfig(policy="card.yaml", episodes=2, max_steps=60, out="run",
                                      engines=("mujoco", "pybullet")))
    finally:
        os.chdir(cwd)
    assert run.report, run.report_error
    return out


def test_report_in_chromium(run_dir):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    html = (run_dir / "report.html").read_text()
    assert "http://" not in html and "https://" not in html  # self-contained: no CDN, no remote images
    assert "<script>alert" not in html and "&lt;script&gt;alert" in html
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        for width, name in ((1000, "report-laptop.png"), (390, "report-phone.png")):
            page = browser.new_page(viewport={"width": width, "height": 900})
            errors, dialogs = [], []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto((run_dir / "report.html").as_uri())
            assert errors == [] and dialogs == []
            assert page.locator("#verdict").inner_text().startswith("Verdict:")
            assert page.locator("h1").inner_text().endswith(HOSTILE.replace("\x1b", "\\x1b"))  # shown as text
            engines = page.locator("section.engine")
            assert engines.count() == 2
            assert {engines.nth(i).get_attribute("data-engine") for i in range(2)} == {"mujoco", "pybullet"}
            images = page.locator("img")
            assert images.count() >= 4
            for i in range(images.count()):  # every image decoded (naturalWidth > 0)
                assert page.evaluate("(img) => img.complete && img.naturalWidth > 0", images.nth(i).element_handle())
            page.screenshot(path=str(ARTIFACTS / name), full_page=True)
        browser.close()


def test_report_regenerates_from_stored_results(run_dir):
    from crosssim.cli import main

    (run_dir / "report.html").unlink()
    assert main(["report", str(run_dir), "--no-filmstrips"]) == 0
    assert (run_dir / "report.html").stat().st_size > 10_000


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
