"""`make fixtures` (scripts/fetch_fixtures.py) against a local HTTP server on 127.0.0.1 that serves
copies of ../shared/fixtures at their upstream paths: every file arrives and matches its pinned
sha256; a tampered file fails and installs nothing; no server at all is one line."""

from __future__ import annotations

import filecmp
import http.server
import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT

SCRIPT = ROOT / "scripts" / "fetch_fixtures.py"
MANIFEST = json.loads((ROOT / "scripts" / "fixtures.json").read_text())

pytestmark = pytest.mark.skipif(not FIXTURES.is_dir(), reason=f"{FIXTURES} is absent: nothing to serve copies of")


def _routes() -> dict[str, Path]:
    """URL path -> the local copy served there (derived files are not served: they are made)."""
    routes = {}
    for folder, source in MANIFEST["sources"].items():
        for entry in source["files"]:
            if "upstream" in entry:
                routes[f"/{source['repository']}/{source['commit']}/{entry['upstream']}"] = FIXTURES / folder / entry["path"]
    return routes


@pytest.fixture()
def server():
    """(base URL, set of URL paths to serve with one byte changed)."""
    routes, tampered = _routes(), set()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            local = routes.get(self.path)
            if local is None:
                self.send_error(404)
                return
            data = local.read_bytes()
            if self.path in tampered:
                data = bytes([data[0] ^ 1]) + data[1:]
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", tampered
    finally:
        httpd.shutdown()
        httpd.server_close()


def _fetch(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=300)


def _one_line_failure(proc, *needles):
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])


def test_fetch_from_upstream_paths_matches_every_pin(tmp_path, server):
    base, _ = server
    dest = tmp_path / "shared" / "fixtures"
    proc = _fetch("--dest", dest, "--base-url", base)
    assert proc.returncode == 0, proc.stderr
    count = sum(len(s["files"]) for s in MANIFEST["sources"].values())
    assert f"fetched {count} files" in proc.stdout
    for folder, source in MANIFEST["sources"].items():
        for entry in source["files"]:  # derived (vecnormalize.json) and patched (G1, Go1 XML) included
            assert filecmp.cmp(dest / folder / entry["path"], FIXTURES / folder / entry["path"], shallow=False), entry
    assert [p.name for p in dest.parent.iterdir()] == ["fixtures"]  # no staging folder left
    again = _fetch("--dest", dest, "--base-url", base)  # there already: checked, not fetched
    assert again.returncode == 0 and f"its {count} files match" in again.stdout, again.stderr
    (dest / "unitree-g1" / "motion.pt").write_bytes(b"changed")
    _one_line_failure(_fetch("--dest", dest), "motion.pt", "sha256 differs")


def test_tampered_download_installs_nothing(tmp_path, server):
    base, tampered = server
    (source,) = [s for s in MANIFEST["sources"].values() if s["repository"].startswith("unitreerobotics/")]
    tampered.add(f"/{source['repository']}/{source['commit']}/deploy/pre_train/g1/motion.pt")
    dest = tmp_path / "shared" / "fixtures"
    proc = _fetch("--dest", dest, "--base-url", base)
    _one_line_failure(proc, "unitree-g1/motion.pt", "sha256", "nothing was installed")
    assert not dest.exists() and list(dest.parent.iterdir()) == []


def test_unreachable_network_is_one_line(tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dest = tmp_path / "fixtures"
    _one_line_failure(_fetch("--dest", dest, "--base-url", f"http://127.0.0.1:{port}"), "network is unreachable")
    assert not dest.exists()


def test_vecnormalize_json_is_derived_without_running_the_pickle():
    """The pickle names SB3 and gym classes; the reader makes plain holders of them (neither is
    imported, no code of the file runs), and the JSON equals the fixture's."""
    rel = "ppo/Hopper-v3_1/Hopper-v3/vecnormalize.pkl"
    code = ("import sys; from fetch_fixtures import vecnormalize_json; "
            f"made = vecnormalize_json(open(sys.argv[1], 'rb').read(), {rel!r}); "
            "print(made == open(sys.argv[2], 'rb').read(), 'stable_baselines3' in sys.modules, 'gym' in sys.modules)")
    pkl = FIXTURES / "rl-zoo" / rel
    proc = subprocess.run([sys.executable, "-c", code, str(pkl), str(pkl.with_suffix(".json"))], cwd=SCRIPT.parent,
                          capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin"})
    assert proc.stdout.split() == ["True", "False", "False"], proc.stdout + proc.stderr
