"""`make fixtures`: fetch the policies other people trained (RL Zoo, Unitree G1, Playground Go1)
from their upstream repositories at pinned commits, check every file's sha256, and put them where
the tests and tests/cards look: ../shared/fixtures beside the checkout.

scripts/fixtures.json pins each file: the repository, the commit, the upstream path and the
sha256 of the file as the tests use it. Three kinds of files:

- copied as they are upstream (weights, configs, meshes, licences);
- ``derive: vecnormalize-json``: the plain-JSON statistics next to an RL Zoo ``vecnormalize.pkl``,
  written from that (checked) pickle by a reader that builds numpy arrays and nothing else;
- ``patch``: a file the fixture set patches (a G1 mesh that upstream lacks, Go1's visual meshes
  removed), rebuilt from upstream by the listed regular-expression substitutions.

Everything goes to a temporary folder beside the destination and is moved into place only when
every file matched its sha256, so a failed fetch leaves nothing half-made for the tests to trip
on. An existing destination is only checked. Failures are one line each (which file, why).

    python scripts/fetch_fixtures.py [--dest DIR] [--base-url URL]
    python scripts/fetch_fixtures.py --pin DIR   # rewrite the sha256s from a trusted local copy
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import io
import json
import os
import pickle
import re
import shutil
import socket
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = Path(__file__).with_name("fixtures.json")
DEFAULT_DEST = ROOT.parent / "shared" / "fixtures"
GITHUB_RAW = "https://raw.githubusercontent.com"
MAX_FILE = 64 << 20  # the largest fixture is 3.5 MB


class FetchError(Exception):
    """One line: which file, and what went wrong."""


class Unreachable(FetchError):
    """No answer from the server at all (offline, DNS, firewall)."""


# -- the two ways a fixture differs from its upstream file -------------------------------------------


class _Plain:
    """What every pickled object of a VecNormalize becomes: its state as attributes, nothing run."""

    def __init__(self, *args, **kwargs):
        self.args = args

    def __setstate__(self, state):
        self.__dict__.update(state if isinstance(state, dict) else {"state": state})


class _StatsUnpickler(pickle.Unpickler):
    """Builds numpy arrays and scalars; every other class named in the pickle (SB3's VecNormalize,
    gym's Box, numpy's random state) becomes a plain attribute holder, so no code of the file runs."""

    NUMPY = {("numpy", "dtype"), ("numpy", "ndarray"), ("numpy.core.multiarray", "_reconstruct"),
             ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
             ("numpy._core.multiarray", "scalar")}

    def find_class(self, module, name):
        if (module, name) in self.NUMPY:
            import importlib

            return getattr(importlib.import_module(module.replace("numpy.core", "numpy._core")), name)
        return type(name, (_Plain,), {})


def vecnormalize_json(pkl: bytes, source: str) -> bytes:
    """The statistics of an SB3 VecNormalize pickle as the JSON crosssim's cards read."""
    vn = _StatsUnpickler(io.BytesIO(pkl)).load().__dict__
    rms = vn["obs_rms"].__dict__
    out = {"source_pickle": source, "norm_obs": bool(vn["norm_obs"]), "norm_reward": bool(vn["norm_reward"]),
           "clip_obs": float(vn["clip_obs"]), "clip_reward": float(vn["clip_reward"]),
           "epsilon": float(vn["epsilon"]), "gamma": float(vn["gamma"]),
           "obs_mean": [float(x) for x in rms["mean"]], "obs_var": [float(x) for x in rms["var"]],
           "obs_count": float(rms["count"]),
           "formula": "obs_norm = clip((obs - obs_mean) / sqrt(obs_var + epsilon), -clip_obs, clip_obs)  "
                      "(only if norm_obs)"}
    return json.dumps(out, indent=1).encode()


def patched(data: bytes, patch: dict) -> bytes:
    """``patch``: ``sub`` (regex, replacement) pairs applied in order (multi-line mode), then
    ``prepend`` (a line put first unless the text already starts with it)."""
    text = data.decode("utf-8")
    for pattern, repl in patch.get("sub", []):
        text = re.sub(pattern, repl, text, flags=re.M)
    first = patch.get("prepend")
    if first and not text.startswith(first):
        text = first + "\n" + text
    return text.encode("utf-8")


# -- fetching ----------------------------------------------------------------------------------------


def _get(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            data = resp.read(MAX_FILE + 1)
    except urllib.error.HTTPError as exc:
        raise FetchError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError) as exc:
        reason = getattr(exc, "reason", exc)
        raise Unreachable(f"{url}: {reason}") from None
    if len(data) > MAX_FILE:
        raise FetchError(f"{url}: larger than {MAX_FILE >> 20} MiB, not a fixture")
    return data


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _entries(manifest: dict):
    for folder, source in manifest["sources"].items():
        for entry in source["files"]:
            yield folder, source, entry


def fetch(dest: Path, base_url: str = GITHUB_RAW, manifest_path: Path = MANIFEST) -> int:
    """Fetch every pinned file into ``dest`` (absent), all or nothing; the number of files."""
    manifest = json.loads(manifest_path.read_text())
    dest.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".fixtures-partial-", dir=dest.parent))
    try:
        entries = list(_entries(manifest))

        def one(item):
            folder, source, entry = item
            url = f"{base_url.rstrip('/')}/{source['repository']}/{source['commit']}/{entry['upstream']}"
            data = _get(url)
            return patched(data, entry["patch"]) if "patch" in entry else data

        def keep(folder, entry, data, what="sha256"):
            if _sha(data) != entry["sha256"]:
                raise FetchError(f"{folder}/{entry['path']}: {what} {_sha(data)} is not the pinned {entry['sha256']} "
                                 "(upstream changed, or the download was tampered with); nothing was installed")
            target = stage / folder / entry["path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)

        plain = [e for e in entries if "derive" not in e[2]]
        keep(plain[0][0], plain[0][2], one(plain[0]))  # alone first: offline is one line, not 100 timeouts
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=8)
        try:
            for (folder, _, entry), data in zip(plain[1:], pool.map(one, plain[1:])):
                keep(folder, entry, data)
        finally:
            pool.shutdown(cancel_futures=True)
        for folder, _, entry in entries:  # from files already fetched and checked
            if "derive" not in entry:
                continue
            if entry["derive"] != "vecnormalize-json":
                raise FetchError(f"{folder}/{entry['path']}: unknown derivation {entry['derive']!r} in {manifest_path.name}")
            pkl = (stage / folder / entry["from"]).read_bytes()
            keep(folder, entry, vecnormalize_json(pkl, entry["from"]), "derived file's sha256")
        os.rename(stage, dest)  # one step: the tests see no folder or a complete one
        return len(entries)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def verify(dest: Path, manifest_path: Path = MANIFEST) -> int:
    """Check an existing ``dest`` against the pins; the number of files checked."""
    manifest = json.loads(manifest_path.read_text())
    n = 0
    for folder, _, entry in _entries(manifest):
        path = dest / folder / entry["path"]
        if not path.is_file():
            raise FetchError(f"{path}: missing from the existing fixtures folder; move the folder away and fetch again")
        if _sha(path.read_bytes()) != entry["sha256"]:
            raise FetchError(f"{path}: sha256 differs from the pinned one in {manifest_path.name}")
        n += 1
    return n


def pin(source_dir: Path, manifest_path: Path = MANIFEST) -> int:
    """Rewrite the manifest's sha256s from a trusted local copy (for a maintainer moving a pin)."""
    manifest = json.loads(manifest_path.read_text())
    for folder, _, entry in _entries(manifest):
        entry["sha256"] = _sha((source_dir / folder / entry["path"]).read_bytes())
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    return sum(1 for _ in _entries(manifest))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST, help="where the fixtures go (default: %(default)s)")
    parser.add_argument("--base-url", default=GITHUB_RAW, help="raw file server: URL/OWNER/REPO/COMMIT/PATH")
    parser.add_argument("--pin", type=Path, help="rewrite scripts/fixtures.json's sha256s from this local copy")
    args = parser.parse_args(argv)
    try:
        if args.pin:
            print(f"fixtures: pinned {pin(args.pin)} files from {args.pin}")
        elif args.dest.is_dir():
            print(f"fixtures: {args.dest} is there; its {verify(args.dest)} files match their sha256")
        else:
            print(f"fixtures: fetched {fetch(args.dest, args.base_url)} files into {args.dest}")
    except Unreachable as exc:
        print(f"fixtures: the network is unreachable ({exc}); copy ../shared/fixtures by hand "
              "(its README lists each file's source)", file=sys.stderr)
        return 1
    except (FetchError, OSError) as exc:
        print(f"fixtures: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
