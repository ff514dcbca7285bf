"""A sealed untouched part cannot be scored before a design is frozen for it, and its report renders
(validation/validate_sealed.py; no policy of the part runs here); the design rounds' rules decide as
written (validation/design_round2.py, design_round3.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "validation"))

import validate_sealed as vu  # noqa: E402
import validation_population as vp  # noqa: E402


def _commit(repo: Path, message: str, path: str = "notes.txt") -> str:
    f = repo / path
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(f.read_text() + "x" if f.exists() else "x")
    subprocess.run(["git", "-C", str(repo), "add", path], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message],
                   check=True)
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def _record(path: Path, seals: dict[str, str], freezes: list[tuple[str, str]]) -> Path:
    """A seals.yaml with each part's seal commit and the freezes (part, commit), newest last."""
    path.write_text(yaml.safe_dump({
        "seals": {part: {"realities": vp.SEALED_PARTS.get(part, vp.SEALED), "commit": c, "blob": "0" * 40}
                  for part, c in seals.items()},
        "freezes": [{"part": part, "commit": c} for part, c in freezes]}))
    return path


@pytest.mark.parametrize("part", sorted(vp.SEALED_PARTS))
@pytest.mark.parametrize("order, scored", [(("seal", "freeze"), True), (("freeze", "seal"), False)])
def test_a_design_counts_as_frozen_only_after_the_seal(tmp_path, part, order, scored):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    _commit(repo, "start")
    made = {step: _commit(repo, "realities: SEALED" if step == "seal" else f"risk: thresholds, {vp.frozen_tag(part)}",
                          vp.SEALED_PARTS[part] if step == "seal" else "notes.txt") for step in order}
    seals = _record(tmp_path / "seals.yaml", {part: made["seal"]}, [(part, made["freeze"])])
    assert (vp.frozen(part, repo, seals) is not None) == scored


def test_a_freeze_for_one_part_does_not_open_another_and_a_later_one_closes_it(tmp_path):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    seal = {part: _commit(repo, "realities: SEALED", vp.SEALED_PARTS[part]) for part in vp.SEALED_PARTS}
    freezes = [("untouched2", _commit(repo, f"risk: {vp.frozen_tag('untouched2')}"))]
    seals = _record(tmp_path / "seals.yaml", seal, freezes)
    first = vp.frozen("untouched2", repo, seals)
    assert first is not None and vp.frozen("untouched3", repo, seals) is None
    assert vu.refusal("untouched2", first, "bb54495", [], vp.latest_freeze(seals)) is None
    freezes.append(("untouched3", _commit(repo, f"risk: new thresholds, {vp.frozen_tag('untouched3')}")))
    seals = _record(tmp_path / "seals.yaml", seal, freezes)
    later = vp.latest_freeze(seals)
    assert vp.frozen("untouched3", repo, seals) == later != first
    assert "no longer ships" in vu.refusal("untouched2", first, "bb54495", [], later)  # its table is the record
    assert vu.refusal("untouched3", later, "a58f373", [], later) is None


def test_a_freeze_outside_heads_history_opens_nothing(tmp_path):
    """A freeze recorded from a branch that was never merged ships no design here."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    seal = _commit(repo, "realities: SEALED", vp.SEALED_PARTS["untouched2"])
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "-b", "side"], check=True)
    freeze = _commit(repo, f"risk: {vp.frozen_tag('untouched2')}")
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "main"], check=True)
    seals = _record(tmp_path / "seals.yaml", {"untouched2": seal}, [("untouched2", freeze)])
    assert vp.frozen("untouched2", repo, seals) is None


def test_a_sealed_file_changed_by_one_byte_is_no_held_out_test(tmp_path):
    """The seal is the file's bytes (git's blob id), so a move keeps it and an edit breaks it."""
    (tmp_path / "validation").mkdir()
    sealed = tmp_path / "validation" / "realities_heldout.py"
    sealed.write_text("REALITIES = ()\n")
    seals = tmp_path / "seals.yaml"
    seals.write_text(yaml.safe_dump({"seals": {"untouched": {
        "realities": vp.SEALED, "commit": "7f7555e", "blob": vp.git_blob(sealed)}}}))
    assert vp.sealed(vp.SEALED, tmp_path, seals) == "7f7555e"
    sealed.write_text("REALITIES = ( )\n")
    assert "CHANGED" in vp.sealed(vp.SEALED, tmp_path, seals)
    assert "not sealed" in vp.sealed("validation/realities_other.py", tmp_path, seals)


def test_the_record_matches_the_files_and_gits_history():
    """Every sealed file still hashes to its seal (it was moved from bench/, not edited), the seal
    commit held that blob at the path recorded, and each freeze descends from its part's seal."""
    record = vp.read_seals()
    assert set(record["seals"]) == {"untouched", *vp.SEALED_PARTS, "untouched4"}  # the 4th: validate_untouched4.py
    assert record["seals"]["untouched"]["realities"] == vp.SEALED
    for part, path in vp.SEALED_PARTS.items():
        assert record["seals"][part]["realities"] == path
    for part, seal in record["seals"].items():
        assert vp.sealed(seal["realities"]) == seal["commit"], part
        assert subprocess.run(["git", "hash-object", str(ROOT / seal["realities"])], capture_output=True,
                              text=True).stdout.strip() == seal["blob"]
    if subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", record["seals"]["untouched"]["commit"]]).returncode:
        pytest.skip("a shallow clone: the seal commits are not here")
    for part, seal in record["seals"].items():
        then = subprocess.run(["git", "-C", str(ROOT), "rev-parse", f"{seal['commit']}:{seal['path']}"],
                              capture_output=True, text=True).stdout.strip()
        assert then == seal["blob"], part
    assert [vp.frozen(part) for part in sorted(vp.SEALED_PARTS)] == ["8d002de", "9fd521c"]
    assert vp.frozen("untouched4") == "159ded1"
    assert vp.latest_freeze() == "159ded1"


@pytest.mark.parametrize("part", sorted(vp.SEALED_PARTS))
def test_scoring_is_refused_until_frozen_sealed_and_trained(part):
    assert f"FROZEN for {part}" in vu.refusal(part, None, "bb54495", [])
    assert "no held-out test" in vu.refusal(part, "abc1234", "bb54495 (CHANGED since: ...)", [])
    assert "not sealed" in vu.refusal(part, "abc1234", "not sealed in git", [])
    assert "ant-ppo-200k-dr-s2" in vu.refusal(part, "abc1234", "bb54495", ["ant-ppo-200k-dr-s2"])
    assert f"--split {part}" in vu.refusal(part, "abc1234", "bb54495", ["x"])
    assert vu.refusal(part, "abc1234", "bb54495", []) is None


def test_the_metrics_table_renders_every_predictor_and_target():
    names = ["-headroom (shipped: engines weighted)", "baseline: random score"]
    part = {"n": 12, "refused": ["x"], "kendall": 0.4, "verdicts": {"high": 3, "medium": 5, "low": 3, "unknown": 0},
            "metrics": {t: {n: (0.5, 0.1) for n in names} for t in ("actuation", "timing", "contact", "all")},
            "ci": {**{t: (0.1, 0.8) for t in ("actuation", "timing", "contact", "all")}, "kendall": (0.0, 0.7)}}
    text = vu.metrics_table(part)
    assert text.count("| 0.50 / 0.100 | 0.50 / 0.100 | [0.10, 0.80] |") == 4
    assert "12 policies (1 refused" in text and "high 3, medium 5, low 3" in text and "0.40 [0.00, 0.70]" in text


def test_design_round2_candidate_adds_play_and_drops_on_the_same_rungs():
    import design_round2 as d2
    from crosssim import sweep

    b = d2.candidate()
    for family, added in (("actuation", "backlash"), ("timing", "obs_drop")):
        assert b[family].levels == sweep.LADDERS[family].levels
        assert b[family].axes[:-1] == sweep.LADDERS[family].axes and b[family].axes[-1][0] == added
        assert all(np.diff(b[family].axes[-1][1]) > 0)  # harsher along the ladder
    assert b["contact"] == sweep.LADDERS["contact"]
    before = dict(sweep.LADDERS)
    with d2.ladders("B"):
        assert sweep.LADDERS["actuation"] == b["actuation"]
    assert sweep.LADDERS == before


def _summary(mean, per_target):
    return {"mean_spearman": mean, "targets": {t: {"pooled": (v, 0.1)} for t, v in per_target.items()}}


def test_design_round2_rule():
    import design_round2 as d2

    a = _summary(0.60, {"actuation": 0.5, "timing": 0.5, "contact": 0.7, "all": 0.7})
    better = _summary(0.65, {"actuation": 0.6, "timing": 0.6, "contact": 0.7, "all": 0.7})
    assert d2.decide(a, better)[0] == "B"
    assert d2.decide(a, _summary(0.61, {"actuation": 0.52, "timing": 0.52, "contact": 0.7, "all": 0.7}))[0] == "A"
    lopsided = _summary(0.66, {"actuation": 0.9, "timing": 0.6, "contact": 0.6, "all": 0.55})  # all falls 0.15
    ships, why = d2.decide(a, lopsided)
    assert ships == "A" and "all" in why


@pytest.mark.parametrize("spec, ok", [("0/2", (0, 2)), ("1/2", (1, 2)), ("2/2", None), ("2", None), ("a/b", None)])
def test_a_shard_spec_names_one_of_n_processes(spec, ok):
    if ok:
        assert vp.shard(spec) == ok
    else:
        with pytest.raises(SystemExit, match="--shard"):
            vp.shard(spec)


def test_design_round3_combined_headroom_adds_the_shares_of_tolerance_used():
    import design_round3 as d3

    assert d3.combined_headroom({"actuation": 1.0, "timing": 1.0, "contact": float("nan")}) == pytest.approx(0.5)
    assert d3.combined_headroom({"actuation": 2.0, "timing": 0.0, "contact": 3.0}) == 0.0
    assert np.isnan(d3.combined_headroom({"actuation": float("nan")}))
    s = {"refused": False, "headroom": {"actuation": 0.5, "timing": 1.0, "contact": 2.0},
         "censored": {"actuation": False, "timing": False, "contact": True}}
    d = d3.as_design(s, "D")
    assert list(d["headroom"].values()) == [pytest.approx(1 / 3.5)] * 3 and all(d["censored"].values())
    assert d3.as_design(s, "A") is s


def test_design_round3_rule():
    import design_round3 as d3

    a = {"all": {"pooled": (0.70, 0.1)}, "kendall": 0.60}
    assert d3.decide(a, {"all": {"pooled": (0.75, 0.1)}, "kendall": 0.58})[0] == "D"
    assert d3.decide(a, {"all": {"pooled": (0.71, 0.1)}, "kendall": 0.70})[0] == "A"  # within the tie
    ships, why = d3.decide(a, {"all": {"pooled": (0.80, 0.1)}, "kendall": 0.50})
    assert ships == "A" and "Kendall" in why


def _scored(verdict, headroom):
    return {"refused": False, "verdict": verdict, "headroom": dict(zip(("actuation", "timing", "contact"), headroom))}


def test_retest_sealed_numbers_ceiling_and_ties():
    import retest_sealed as rs

    recs = []
    for i in range(5):  # the predictor ranks the truth perfectly; the retest truth reverses one pair
        drop = {t: 0.1 * i for t in ("actuation", "timing", "contact", "all")}
        retest = {**drop, "timing": {3: 0.4, 4: 0.3}.get(i, 0.1 * i)}
        recs.append({"task": "Walker2d", "truth": drop, "retest": {**retest, "contact": 1.0},
                     "seed0": _scored("high", [1 - 0.1 * i] * 3), "seed2000": _scored("high" if i else "low", [1 - 0.1 * i] * 3)})
    out = rs.numbers(recs)
    assert out["actuation"]["rel_truth"] == pytest.approx(1.0) and out["actuation"]["ceiling"] == pytest.approx(1.0)
    assert out["timing"]["rel_truth"] == pytest.approx(0.9) and out["timing"]["ceiling"] == pytest.approx(np.sqrt(0.9))
    assert np.isnan(out["contact"]["rel_truth"])  # a retest truth that is all ties ranks nothing
    assert out["same_verdict"] == pytest.approx(0.8)
    text = rs.table({"pooled": out})
    assert "| pooled (n 5) | timing | 0.90 | 1.00 | 0.95 |" in text and "| pooled (n 5) | contact | — |" in text
    assert "pooled 80 %" in text


def test_a_misspelt_part_has_no_realities():
    """Before, any name but the held-out parts' was measured in the choosing parts' realities."""
    with pytest.raises(ValueError, match="untouched4"):
        vp.realities_of("untouched4")
    assert vp.realities_of("selection")[0].__name__ == "realities"
