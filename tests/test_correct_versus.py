"""A corrected policy against its base in crossval (issue 37): every regression per engine and
family is named, from a table of summaries (crosssim/correct/versus.py)."""

from types import SimpleNamespace as NS

from crosssim.correct.versus import compare_runs, format_versus


def _run(survival, ret, margins, verdict="medium"):
    """A summary with one engine's nominal survival and return and per-family (margin, ci, per engine)."""
    engines = {"mujoco": NS(episodes=6, terminated_early=1 - survival, mean_return=ret)}
    comps = {fam: NS(margin=m, margin_ci95=ci, verdict="medium", engine_margins=per)
             for fam, (m, ci, per) in margins.items()}
    return NS(engines=engines, risk=NS(components=comps, verdict=verdict))


# the pendulum of docs/correction.md: the ungated residual, base vs corrected
BASE = _run(1.0, 300, {"actuation": (1.23, (1.23, 1.24), {"mujoco": 1.23, "pybullet": 1.24}),
                       "timing": (0.701, (0.6, 1.0), {"mujoco": 0.70, "pybullet": 0.71})})


def _compare(corrected):
    return compare_runs(BASE, corrected, base_card_path="base/card.yaml", base_out="run/base")


def test_a_family_that_loses_margin_is_a_regression_even_when_another_gains():
    corrected = _run(1.0, 300, {"actuation": (4.36, (4.18, 5.0), {"mujoco": 4.4, "pybullet": 4.3}),
                                "timing": (0.556, (0.556, 0.556), {"mujoco": 0.55, "pybullet": 0.56})})
    out = _compare(corrected)
    assert len(out["regressions"]) == 3 and all("timing" in r for r in out["regressions"]), out["regressions"]
    assert out["families"]["actuation"]["corrected"]["margin"] == 4.36
    text = format_versus(out)
    assert "REGRESSION" in text and "timing: margin 0.701 [0.6, 1] -> 0.556" in text


def test_survival_and_return_regressions_per_engine():
    out = _compare(_run(0.5, 200, {}))
    assert out["regressions"] == ["mujoco: nominal survival 100% -> 50%", "mujoco: nominal mean return 300 -> 200"]


def test_an_improvement_or_noise_is_not_a_regression():
    same = _run(1.0, 290, {"actuation": (1.2, (1.1, 1.3), {"mujoco": 1.2, "pybullet": 1.2}),
                           "timing": (0.66, (0.6, 0.9), {"mujoco": 0.66, "pybullet": 0.7})})
    out = _compare(same)
    assert out["regressions"] == [] and "no regression" in format_versus(out)


def test_a_base_card_outside_the_repository_is_not_read(tmp_path):
    """training.base.card may not point a pull request's crossval at any file on the runner."""
    from types import SimpleNamespace

    from crosssim.correct.versus import base_outside

    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "policies" / "fixed").mkdir(parents=True)
    card = SimpleNamespace(path=repo / "policies" / "fixed" / "card.yaml")
    assert base_outside(card, repo / "policies" / "base" / "card.yaml") is None
    why = base_outside(card, (repo / "policies" / "fixed" / "../../../elsewhere/card.yaml"))
    assert why and "outside" in why and "training.base.card" in why
    loose = SimpleNamespace(path=tmp_path / "corrected" / "card.yaml")  # correct train's output, in no repository
    assert base_outside(loose, repo / "policies" / "base" / "card.yaml") is None
