"""The validation population of `make validate` (validation/validate_risk.py), its three parts, and
the cached runs each policy needs: crossval rows (per pass fraction) and true drops in realities.

Parts, never mixed:
- ``design``: the RL-Zoo Hopper/HalfCheetah agents (tests/cards/zoo, weights in
  ../shared/fixtures) and the project's policies/hopper-*: the population earlier designs and the
  pilot looked at. Realities: validation/realities.py.
- ``selection``: the ``selection`` split of validation/train_population.py (Hopper, HalfCheetah PPO),
  trained after the dose-response design was written. Realities: validation/realities.py.
- ``untouched``: the ``untouched`` split (Walker2d-v4, Ant-v4). Realities: the sealed
  validation/realities_heldout.py, mechanisms neither the sweeps nor the other realities use.

Design values are chosen on design + selection only; the untouched part is scored with the frozen
design. Results are cached per policy under .cache/validation/ (keys: the card, the policy file,
the episode counts and the source that makes the rows), so a rerun recomputes only the scores.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "validation"))

import realities  # noqa: E402
import realities_heldout  # noqa: E402
import realities_heldout2  # noqa: E402
import realities_heldout3  # noqa: E402
from train_population import population as trained_population  # noqa: E402

CACHE = ROOT / ".cache" / "validation"
PARTS = ("design", "selection", "untouched")
CHOOSING_PARTS = ("design", "selection")
"""The parts design values may be chosen on."""
FAMILIES = ("actuation", "timing", "contact")
TARGETS = (*FAMILIES, "all")

SEALED = "validation/realities_heldout.py"
SEALED_PARTS = {"untouched2": "validation/realities_heldout2.py", "untouched3": "validation/realities_heldout3.py"}
"""The later untouched parts and their sealed realities: each is scored once (validation/validate_sealed.py),
with the design frozen for it after the seal."""
SEALS = ROOT / "validation" / "seals.yaml"
"""The record of every seal and freeze (validation/README.md, "Sealing"); it replaced reading them from
commit subjects, which stopped working for a path once the realities moved from bench/ to validation/."""


def frozen_tag(part: str) -> str:
    """The words the subject of the commit that freezes the design ``part`` tests carries (for people
    reading the log; validation/seals.yaml's ``freezes`` is what validate_sealed.py reads)."""
    return f"FROZEN for {part}"


def read_seals(seals: Path = SEALS) -> dict:
    """validation/seals.yaml: ``seals`` (part -> realities, commit, date, path, blob) and ``freezes``
    (a list, newest last, of part, commit, date)."""
    import yaml

    data = yaml.safe_load(Path(seals).read_text()) or {}
    return {"seals": data.get("seals") or {}, "freezes": data.get("freezes") or []}


def git_blob(path: Path) -> str:
    """git's object id of the file's bytes (what ``git hash-object`` prints), with no git needed."""
    body = Path(path).read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest()


def _is_ancestor(older: str, newer: str, root: Path) -> bool:
    import subprocess

    return subprocess.run(["git", "-C", str(root), "merge-base", "--is-ancestor", older, newer],
                          capture_output=True).returncode == 0


def frozen(part: str, root: Path = ROOT, seals: Path = SEALS) -> str | None:
    """The newest freeze recorded for ``part``, if the seal of the part's realities is among its
    ancestors (a design frozen before the test existed cannot have been frozen for it) and it is in
    HEAD's history (a freeze on a branch that was never merged ships nothing)."""
    record = read_seals(seals)
    seal = record["seals"].get(part)
    freezes = [f["commit"] for f in record["freezes"] if f["part"] == part]
    if not freezes or not seal:
        return None
    freeze = freezes[-1]
    return freeze if _is_ancestor(seal["commit"], freeze, root) and _is_ancestor(freeze, "HEAD", root) else None


def latest_freeze(seals: Path = SEALS) -> str | None:
    """The newest freeze for any part: a part whose own freeze is older was frozen for a design that
    no longer ships (its table is a record, not rerun)."""
    freezes = read_seals(seals)["freezes"]
    return freezes[-1]["commit"] if freezes else None


def sealed(path: str = SEALED, root: Path = ROOT, seals: Path = SEALS) -> str:
    """The commit that sealed the held-out realities at ``path`` (validation/seals.yaml), and whether
    the file changed after it (an untouched part must be scored in the sealed realities): its bytes,
    uncommitted edits included, must still hash to the sealed blob."""
    entry = next((e for e in read_seals(seals)["seals"].values() if e["realities"] == path), None)
    if entry is None:
        return f"not sealed in git (no entry in {Path(seals).name})"
    changed = git_blob(root / path) != entry["blob"]
    return f"{entry['commit']}" + (" (CHANGED since: the untouched numbers are not a held-out test)" if changed else "")


@dataclass(frozen=True)
class Entry:
    name: str
    card: Path
    part: str
    task: str


def population(pop_dir: Path | None = None) -> list[Entry]:
    """Every policy of the three parts that exists here (the zoo needs ../shared/fixtures; the
    trained ones need validation/train_population.py to have run: missing ones are listed by the caller)."""
    from crosssim.card import load_card

    pop_dir = Path(pop_dir or ROOT / ".cache" / "population")
    out = []
    if (ROOT.parent / "shared" / "fixtures").is_dir():
        cards = sorted((ROOT / "tests" / "cards" / "zoo").glob("*.yaml"))
    else:
        cards = []
    cards += sorted((ROOT / "policies").glob("hopper-*/card.yaml"))
    for path in cards:
        card = load_card(path)
        out.append(Entry(card.name, path, "design", _task(card.task)))
    for spec in trained_population():
        path = pop_dir / spec["name"] / "card.yaml"
        if spec["split"] in PARTS and path.exists():  # the sealed parts wait for their frozen designs
            out.append(Entry(spec["name"], path, spec["split"], spec["task"]))
    return out


def shard(spec: str) -> tuple[int, int]:
    """``--shard K/N`` as (K, N): this process measures every N-th policy from the K-th. Refused
    in one line unless 0 <= K < N (a K of N or more repeats another shard's policies, or none)."""
    try:
        k, n = (int(x) for x in spec.split("/"))
    except ValueError:
        raise SystemExit(f"--shard {spec!r}: expected K/N, e.g. 0/2 and 1/2 for two processes") from None
    if not 0 <= k < n:
        raise SystemExit(f"--shard {spec}: K must be 0 to {n - 1} for N = {n}")
    return k, n


def sealed_population(part: str, pop_dir: Path | None = None) -> tuple[list[Entry], list[str]]:
    """A later untouched part (validation/train_population.py's split ``part``): its entries, and the
    names not trained yet."""
    pop_dir = Path(pop_dir or ROOT / ".cache" / "population")
    specs = [s for s in trained_population() if s["split"] == part]
    have = [s for s in specs if (pop_dir / s["name"] / "card.yaml").exists()]
    return ([Entry(s["name"], pop_dir / s["name"] / "card.yaml", part, s["task"]) for s in have],
            [s["name"] for s in specs if s not in have])


def missing_trained(pop_dir: Path | None = None) -> list[str]:
    pop_dir = Path(pop_dir or ROOT / ".cache" / "population")
    return [s["name"] for s in trained_population()
            if s["split"] in PARTS and not (pop_dir / s["name"] / "card.yaml").exists()]


def _task(name: str) -> str:
    return name.split("-v")[0]


def realities_of(part: str):
    """(module, realities, nominal reality) a part's true drops come from."""
    if part == "untouched":
        return realities_heldout, realities_heldout.REALITIES, realities_heldout.NOMINAL
    later = {"untouched2": realities_heldout2, "untouched3": realities_heldout3}
    if part in later:
        return later[part], later[part].REALITIES, later[part].NOMINAL
    if part not in CHOOSING_PARTS:  # a misspelt part would otherwise be measured in the choosing realities
        raise ValueError(f"no realities for part {part!r}: {', '.join((*PARTS, *later))}")
    return realities, realities.REALITIES, realities.Reality("nominal", "none")


def _digest(*paths: Path) -> str:
    h = hashlib.sha256()
    for p in paths:
        for f in sorted(p.rglob("*.py")) if p.is_dir() else [p]:
            h.update(f.read_bytes())
    return h.hexdigest()


def _policy_key(entry: Entry) -> hashlib._Hash:
    """The card and every file beside its policy (weights, normalisation statistics)."""
    from crosssim.card import load_card
    from crosssim.runner.inputs import path_digest

    card = load_card(entry.card)
    return hashlib.sha256(entry.card.read_bytes() + path_digest(card.policy_file.parent).encode())


SRC = ROOT / "src" / "crosssim"
ROW_SOURCES = (SRC / "sweep.py", SRC / "perturb.py", SRC / "variant.py", SRC / "runner", SRC / "engines",
               SRC / "tasks", SRC / "actuation.py")
"""Source that makes crossval's rows: a change reruns the crossvals (crosssim's row cache then
still skips every episode whose inputs are unchanged)."""


def _returns(entry: Entry, seeds) -> dict[str, list[float]]:
    """Per-episode returns of ``entry`` in the nominal loop (key ``nominal``) and in each reality of
    its part (key: the family), one per seed, from the same loop (bench/realities*.py)."""
    from crosssim.card import load_card
    from crosssim.policies import load_policy
    from crosssim.runner.rollout import Harness

    module, reals, nominal = realities_of(entry.part)
    card = load_card(entry.card)
    harness = Harness.from_card(card)
    policy = load_policy(card, obs_size=harness.obs_size, action_size=harness.action_size, trust=True)
    run = module.run_heldout if entry.part.startswith("untouched") else module.run_reality
    out = {"nominal": [float(v) for v in run(harness, policy, nominal, episode_seeds=seeds)]}
    for r in reals:
        out[r.family] = [float(v) for v in run(harness, policy, r, episode_seeds=seeds)]
    return out


def drops(returns: dict[str, list[float]], idx=None) -> dict[str, float]:
    """True drop per family: 1 - mean reality return / mean nominal return over the same episodes
    (all, or those at positions ``idx``), clipped to [0, 1]."""
    pick = (lambda v: np.asarray(v, float)) if idx is None else (lambda v: np.asarray(v, float)[idx])
    base = float(np.mean(pick(returns["nominal"])))
    return {f: float(np.clip((base - np.mean(pick(v))) / max(abs(base), 1e-9), 0.0, 1.0))
            for f, v in returns.items() if f != "nominal"}


TRUTH_SOURCES = (SRC / "tasks", SRC / "engines" / "mujoco.py", SRC / "engines" / "base.py", SRC / "variant.py",
                 SRC / "scene.py", SRC / "actuation.py", SRC / "frame.py", SRC / "runner" / "harness.py",
                 SRC / "observations.py", SRC / "normalize.py", SRC / "policies")
"""Source a true drop depends on (the realities run MuJoCo alone, outside crossval's harness): a
change to another engine's adapter keeps the cached truths (until 2026-12-02 every engine's did)."""


def _truth_key(entry: Entry, tag: str) -> str:
    """Cache key of a measurement in the part's realities: the policy, ``tag``, the realities' source
    and ``TRUTH_SOURCES``."""
    module = realities_of(entry.part)[0]
    h = _policy_key(entry)
    h.update(tag.encode() + _digest(Path(module.__file__), *TRUTH_SOURCES).encode())
    return h.hexdigest()[:16]


def truth(entry: Entry, episodes: int) -> dict:
    """True drop per family in the part's realities (``drops``), over seeds 0..episodes-1; cached."""
    path = CACHE / "truth" / f"{entry.name}-{_truth_key(entry, f'truth{episodes}')}.json"
    if path.exists():
        return json.loads(path.read_text())
    returns = _returns(entry, range(episodes))
    out = {"nominal_return": float(np.mean(returns["nominal"])),
           "reality_return": {f: float(np.mean(v)) for f, v in returns.items() if f != "nominal"},
           "drop": drops(returns), "realities": [r.name for r in realities_of(entry.part)[1]]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))
    return out


def retest_returns(entry: Entry, seeds: range) -> dict[str, list[float]]:
    """Per-episode returns at ``seeds`` (validation/validate_retest.py), cached per policy and seeds."""
    path = CACHE / "retest" / f"{entry.name}-{_truth_key(entry, f'retest{seeds.start}:{seeds.stop}')}.json"
    if path.exists():
        return json.loads(path.read_text())
    out = _returns(entry, seeds)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))
    return out


def run(entry: Entry, *, fraction: float, engines: tuple[str, ...], episodes: int, sweep_episodes: int,
        seed: int = 0, ladders: str = "") -> Path:
    """crossval rows (results.parquet) of ``entry`` at pass fraction ``fraction`` (the fraction
    decides which rungs the bisection visits); cached. Engines run in this process (``inline``:
    a worker's start-up under load cost more than its episodes). ``ladders``: the name of a
    candidate ladder set the caller has swapped into crosssim.sweep.LADDERS (part of the key)."""
    from crosssim.evaluate import crossval
    from crosssim.runner import CrossvalConfig

    h = _policy_key(entry)
    h.update(f"{engines}{episodes}{sweep_episodes}{fraction}".encode() + _digest(*ROW_SOURCES).encode())
    if seed:  # seed 0 keeps the key the first scoring's rows were cached under
        h.update(f"seed{seed}".encode())
    if ladders:
        h.update(f"ladders:{ladders}".encode())
    tag = (f"-s{seed}" if seed else "") + (f"-{ladders}" if ladders else "")
    out = CACHE / "runs" / f"{entry.name}-f{fraction:g}{tag}-{h.hexdigest()[:16]}"
    from crosssim.runfolder import RunFolder

    rows = RunFolder(out).rows_path
    if not rows.exists():
        crossval(CrossvalConfig(policy=str(entry.card), engines=engines, episodes=episodes,
                                sweep_episodes=sweep_episodes, pass_fraction=fraction, out=str(out), report=False,
                                record=False, workers=1, trust_policy_code=True, seed=seed, inline=True))
    return rows
