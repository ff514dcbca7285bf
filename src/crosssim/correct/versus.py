"""A corrected policy against its base: the same crossval on both, compared per engine and family.

A residual learned from corrections can fix the gap it was corrected on and open another (issue
37: the pendulum's corrected policy fell sooner with 2 steps of latency, and crossval's verdict
stayed "medium (timing)" without a word). The corrected card names its base
(``training.base.card``, written by ``crosssim correct train``); crossval runs the base with the
same settings and writes the comparison to summary.json's ``correction`` with every regression
named (docs/correction.md, "Corrected vs base in crossval").
"""

from __future__ import annotations

import math
from pathlib import Path

SURVIVAL_DROP = 0.1
"""A regression: the share of nominal episodes that survive falls by more than this (absolute)."""
RETURN_DROP = 0.1
"""A regression: the nominal mean return falls by more than this share of the base's |return|."""
MARGIN_DROP = 0.1
"""A regression: a family's margin falls by more than this share of the base's, and the corrected
margin's 95 % interval lies wholly below the base's point estimate (one engine's own margin, which
has no interval: by more than twice this)."""


def base_card(card) -> Path | None:
    """The base card a corrected card names (``training.base.card``, relative to the card), or None."""
    document = getattr(card, "document", None)
    training = getattr(document, "training", None) or {}
    base = (training.get("base") or {}).get("card") if isinstance(training, dict) else None
    if not base:
        return None
    return (Path(card.path).parent / str(base)).resolve()


def base_outside(card, base: Path) -> str | None:
    """Why a base card is not read, when the corrected card lies in a repository (a pull request's
    checkout) and its base outside it: a pull request could otherwise make crossval read any file
    on the runner as a card, as a card symlinked outside is refused (crosssim.card). A corrected
    card outside any repository (``crosssim correct train``'s output folder) is the user's own."""
    from crosssim.card import repo_root

    root = repo_root(Path(card.path).resolve().parent)
    if root is None or base.resolve().is_relative_to(root.resolve()):
        return None
    return (f"{card.path}: training.base.card {base} lies outside {root}; the base is not run and the corrected "
            "policy not compared with it (commit the base card beside it)")


def _survival(e) -> float:
    return float("nan") if not e.episodes else 1.0 - float(e.terminated_early)


def _finite(*xs) -> bool:
    return all(x is not None and math.isfinite(x) for x in xs)


def _engines(base, corrected, regressions: list[str]) -> dict:
    out = {}
    for name in corrected.engines:
        b, c = base.engines.get(name), corrected.engines[name]
        if b is None:
            continue
        row = {"base": {"survival": _survival(b), "mean_return": b.mean_return},
               "corrected": {"survival": _survival(c), "mean_return": c.mean_return}}
        out[name] = row
        bs, cs = row["base"]["survival"], row["corrected"]["survival"]
        if _finite(bs, cs) and bs - cs > SURVIVAL_DROP:
            regressions.append(f"{name}: nominal survival {bs:.0%} -> {cs:.0%}")
        br, cr = b.mean_return, c.mean_return
        if _finite(br, cr) and br - cr > RETURN_DROP * max(abs(br), 1e-9):
            regressions.append(f"{name}: nominal mean return {br:.4g} -> {cr:.4g}")
    return out


def _families(base, corrected, regressions: list[str]) -> dict:
    if base.risk is None or corrected.risk is None:
        return {}
    out = {}
    for fam, c in corrected.risk.components.items():
        b = base.risk.components.get(fam)
        if b is None:
            continue
        out[fam] = {"base": {"margin": b.margin, "margin_ci95": list(b.margin_ci95), "verdict": b.verdict,
                             "engines": dict(b.engine_margins)},
                    "corrected": {"margin": c.margin, "margin_ci95": list(c.margin_ci95), "verdict": c.verdict,
                                  "engines": dict(c.engine_margins)}}
        if _finite(b.margin, c.margin, c.margin_ci95[1]) and c.margin < (1 - MARGIN_DROP) * b.margin \
                and c.margin_ci95[1] < b.margin:
            regressions.append(f"{fam}: margin {b.margin:.3g} [{b.margin_ci95[0]:.3g}, {b.margin_ci95[1]:.3g}] -> "
                               f"{c.margin:.3g} [{c.margin_ci95[0]:.3g}, {c.margin_ci95[1]:.3g}]")
        for engine, cm in c.engine_margins.items():
            bm = b.engine_margins.get(engine)
            if _finite(bm, cm) and cm < (1 - 2 * MARGIN_DROP) * bm:
                regressions.append(f"{engine} {fam}: margin {bm:.3g} -> {cm:.3g}")
    return out


def _verdict(summary) -> str | None:
    risk = summary.risk
    return None if risk is None else getattr(risk, "verdict", None)


def compare_runs(base, corrected, *, base_card_path: str, base_out: str) -> dict:
    """summary.json's ``correction``: base vs corrected per engine (nominal survival, mean return)
    and per family (margin with its interval, each engine's margin), the verdicts, and the
    regressions (empty: none)."""
    regressions: list[str] = []
    engines = _engines(base, corrected, regressions)
    families = _families(base, corrected, regressions)
    bv, cv = _verdict(base), _verdict(corrected)
    return {"base_card": base_card_path, "base_run": base_out, "engines": engines, "families": families,
            "verdict": {"base": bv, "corrected": cv}, "regressions": regressions}


def _n(x, digits=3) -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}g}"


def format_versus(section: dict) -> str:
    """The comparison as crossval prints it."""
    lines = [f"\nCORRECTED vs BASE ({section['base_card']}; base run {section['base_run']})",
             f"{'engine':<24}{'survival base -> corrected':<30}{'mean return base -> corrected'}"]
    for name, row in section["engines"].items():
        b, c = row["base"], row["corrected"]
        lines.append(f"{name:<24}{_n(100 * b['survival'], 3) + ' % -> ' + _n(100 * c['survival'], 3) + ' %':<30}"
                     f"{_n(b['mean_return'], 4)} -> {_n(c['mean_return'], 4)}")
    if section["families"]:
        lines.append(f"{'family':<24}{'margin base -> corrected [95 %]':<44}per engine")
        for fam, row in section["families"].items():
            b, c = row["base"], row["corrected"]
            text = (f"{_n(b['margin'])} [{_n(b['margin_ci95'][0])}, {_n(b['margin_ci95'][1])}] -> {_n(c['margin'])} "
                    f"[{_n(c['margin_ci95'][0])}, {_n(c['margin_ci95'][1])}]")
            per = ", ".join(f"{e} {_n(b['engines'].get(e))} -> {_n(m)}" for e, m in c["engines"].items())
            lines.append(f"{fam:<24}{text:<44}{per}")
    v = section["verdict"]
    lines.append(f"verdict: base {v['base']}, corrected {v['corrected']}")
    if section["regressions"]:
        lines.append("REGRESSION: the corrected policy is worse than its base in " + "; ".join(section["regressions"]))
    else:
        lines.append("no regression against the base (engines' survival and return, every family's margin)")
    return "\n".join(lines)
