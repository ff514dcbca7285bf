"""Hints for a harness mismatch: the classic card mistakes, checked at the robot's start pose,
then ranked by running them.

``card_hints`` reads only the card, the canonical model and the first frame (MuJoCo), so its
hints cost nothing and cannot depend on the physics being right. ``rank_suspects`` tries each
classic mistake's fix in turn (a term's scale, sign or presence, a left/right joint swap, the
quaternion order, the history layout and fill, the first call's timing) in short episodes of the
reference engine, and ranks the fixes by how much of the gap to the card's claim each closes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crosssim.text import plural


def card_hints(harness) -> list[str]:
    from crosssim.engines.settings import EngineProfile
    from crosssim.engines.mujoco import EngineMuJoCo
    from crosssim.variant import compile_model

    card, c, act = harness.card, harness.canonical, harness.actuation
    hints = []
    engine = EngineMuJoCo()
    model = engine.load(compile_model(harness.scene), EngineProfile("mujoco", "mujoco"))
    frame = engine.frame(model, engine.reset(model, harness.task.nominal_initial_state(c)))
    o = card.observation
    names = [t.name for t in o.terms]
    if "projected_gravity" in names or "base_ang_vel" in names or "base_lin_vel" in names:
        observer = harness.observer()
        if observer.ctx is not None:
            from crosssim.observations import projected_gravity

            g = projected_gravity(frame, observer.ctx)
            upright = frame.base_quat[0] ** 2 > 0.9
            if upright and g[2] > 0:
                hints.append(f"projected gravity reads {np.round(g, 2).tolist()} with the robot upright at the start: "
                             f"the base quaternion is read in the wrong order (observation.quaternion_order is "
                             f"{o.quaternion_order!r}; crosssim's frames are w, x, y, z)")
    if act.default_pos is not None:
        start = frame.qpos[act.qpos_index]
        off = np.abs(act.default_pos - start)
        worst = int(np.argmax(off))
        if off[worst] > 0.3:
            hints.append(f"action.default_pos differs from the robot's start pose by {off[worst]:.2f} rad at "
                         f"{c.joint_names[act.joint_index[worst]]}: check the default angles and their joint order")
    if card.joints and list(card.joints) != [c.joint_names[j] for j in c.actuator_joint]:
        hints.append("the card's 'joints' order differs from the model's actuator order: it must be the order the "
                     "policy was trained with (URDF order, breadth-first and actuator order all occur)")
    if o.history > 1:
        hints.append(f"observation history of {o.history} frames in {o.layout!r} layout: check whether the policy was "
                     "trained with frame-major (whole frames) or term-major (each term's history) stacking")
    if not hints:
        hints.append(fallback_hint(card))
    return hints


def fallback_hint(card) -> str:
    """What to check in a card when no specific hint applies, naming only what the card maps: a task
    whose observation is its own (a gymnasium task: no terms, joints or default pose) has no joint
    or quaternion order to get wrong."""
    o, act = card.observation, card.action
    if not o.terms and not card.joints and act.default_pos is None:
        return ("check the card: the task version (a v4 agent on a v5 task sees another observation and reward; "
                "write task: <Task>-v4), the observation normalisation (observation.normalize: the statistics it "
                "was trained with), the action mode and scale, the control period (the task's frame skip)")
    parts = ["joint order" if card.joints or act.default_pos is not None or o.terms else ""]
    names = {t.name for t in o.terms}
    if names & {"projected_gravity", "base_ang_vel", "base_lin_vel", "base_quat"}:
        parts.append("quaternion order (w, x, y, z)")
    if act.default_pos is not None:
        parts.append("default pose")
    parts += ["action scale and mode", "observation terms and their scales" if o.terms else "",
              "normalisation", "control period"]
    return "check the card: " + ", ".join(p for p in parts if p)


# -- ranked suspects: which single card fix recovers the claimed behaviour ----------------------------

SUSPECT_EPISODES = 2
"""Episodes per suspect (and for the card as written); seeds seed, seed + 1, ... for every suspect."""
SUSPECT_SECONDS = 2.0
"""Length of each suspect episode [s] of simulated time (at most the task's own episode)."""
SIDES = ((("left", "right"),), (("Left", "Right"),), (("LEFT", "RIGHT"),), (("l_", "r_"),), (("L_", "R_"),),
         (("FL", "FR"), ("RL", "RR"), ("HL", "HR")), (("LF", "RF"), ("LH", "RH")))
"""Name pairs a left/right swap exchanges, by naming style (a quadruped's front and hind pairs
together); the first style found in the card's joints is used."""


@dataclass(frozen=True)
class SuspectScore:
    suspect: str
    """The card fix tried, e.g. "observation.quaternion_order xyzw -> wxyz"."""
    values: dict
    """Each claimed quantity measured with the fix (short episodes, reference engine)."""
    recovered: float
    """Share of the distance from the card as written to its claims that the fix removes (1: all
    of it, 0: none, negative: further away)."""


@dataclass(frozen=True)
class SuspectRanking:
    targets: dict
    """The claims recovered: x_velocity [m/s], return (per step), survival; survival 1 if none
    (for real logs: ``input error`` 0, the logged policy inputs matched)."""
    baseline: dict
    """The same quantities with the card as written."""
    scores: tuple[SuspectScore, ...]
    """Best first."""
    cost: str
    """What the ranking ran, e.g. "31 suspects + the card as written, 2 episodes of 100 control
    steps each in mujoco: 6400 steps"."""

    def hint(self) -> str:
        """One line naming the best suspect (or saying none explains the mismatch)."""
        if not self.scores:
            return f"no suspect to rank ({self.cost})"
        best = self.scores[0]
        claims = ", ".join(self.targets)
        if best.recovered < 0.5:
            return (f"no single card fix recovers the target {claims} (best: {best.suspect}, "
                    f"{100 * best.recovered:.0f} %; ranked {self.cost})")
        change = "; ".join(f"{k} {_num(self.baseline[k])} -> {_num(best.values[k])} (target {_num(v)})"
                           for k, v in self.targets.items())
        others = ", ".join(f"{s.suspect} ({100 * s.recovered:.0f} %)" for s in self.scores[1:3])
        return (f"most likely: {best.suspect} - it removes {100 * best.recovered:.0f} % of the distance to the target "
                f"({change}); next: {others} (ranked {self.cost})")


def _num(x: float) -> str:
    return f"{x:.3g}"


def _swap_sides(joints: tuple[str, ...]) -> tuple[str, ...] | None:
    for style in SIDES:
        swapped = joints
        for a, b in style:
            if any(a in j for j in swapped) and any(b in j for j in swapped):
                swapped = tuple(j.replace(a, "\0").replace(b, a).replace("\0", b) for j in swapped)
        if swapped != joints and sorted(swapped) == sorted(joints):
            return swapped
    return None


def suspects(card) -> list[tuple[str, object]]:
    """(label, card with one fix) for each classic harness mistake the card could hold: each
    observation term's sign, presence (zeroed) and scale (x2, x0.5); a left/right swap of the
    joint order; the other quaternion order; the other history layout and fill; the other first call."""
    from dataclasses import replace

    from crosssim.observations import TermSpec

    o, out = card.observation, []
    for k, term in enumerate(o.terms):
        for label, factor in (("sign flipped", -1.0), ("zeroed", 0.0), ("scale x2", 2.0), ("scale x0.5", 0.5)):
            changed = list(o.terms)
            changed[k] = TermSpec(term.name, np.asarray(term.scale, dtype=float) * factor if np.ndim(term.scale)
                                  else float(term.scale) * factor, term.clip, term.options)
            out.append((f"observation.terms[{k}] ({term.name}) {label}",
                        replace(card, observation=replace(o, terms=tuple(changed)))))
    swapped = _swap_sides(card.joints)
    if swapped:
        out.append(("joints: left and right swapped", replace(card, joints=swapped)))
    if o.terms:
        other = "xyzw" if o.quaternion_order == "wxyz" else "wxyz"
        out.append((f"observation.quaternion_order {o.quaternion_order} -> {other}",
                    replace(card, observation=replace(o, quaternion_order=other))))
    if o.history > 1:
        other = "term_major" if o.layout == "frame_major" else "frame_major"
        out.append((f"observation.history.layout {o.layout} -> {other}",
                    replace(card, observation=replace(o, layout=other))))
        other = "zeros" if o.fill == "first_frame" else "first_frame"
        out.append((f"observation.history.fill {o.fill} -> {other}", replace(card, observation=replace(o, fill=other))))
    other = "after_one_period" if card.first_call == "reset" else "reset"
    out.append((f"first_call {card.first_call} -> {other}", replace(card, first_call=other)))
    return out


def _targets(card, task) -> dict[str, float]:
    """What the ranking recovers: the card's claims (a return as return per step), else survival 1."""
    claims = dict(card.claimed)
    if "return" in claims:
        claims["return"] = claims["return"] / max(1, task.max_steps)
    return claims or {"survival": 1.0}


def _measure(results, steps: int) -> dict[str, float]:
    """Per claim over the short horizon, a fall counting as standing still: forward velocity
    (distance / horizon), return per step of the horizon, share of episodes still running."""
    ok = [r for r in results if r.failure is None]
    if not ok:
        return {"x_velocity": float("nan"), "return": float("nan"), "survival": float("nan")}
    return {"x_velocity": float(np.mean([np.nan_to_num(r.x_velocity) * r.length / steps for r in ok])),
            "return": float(np.mean([r.ret / steps for r in ok])),
            "survival": float(np.mean([not r.terminated for r in ok]))}


def _distance(values: dict, targets: dict) -> float:
    """Sum over claims of |measured - claimed|, each relative to the claim (survival: absolute)."""
    return float(sum(abs(values[k] - c) / (1.0 if k == "survival" else max(abs(c), 1e-9)) for k, c in targets.items()))


def rank_suspects(card, policy, *, engine: str = "mujoco", episodes: int = SUSPECT_EPISODES,
                  seconds: float = SUSPECT_SECONDS, seed: int = 0, harness=None) -> SuspectRanking:
    """Rank ``suspects(card)`` by how much of the distance between the card as written and its
    claims each removes, from ``episodes`` episodes of ``seconds`` per suspect in ``engine``
    (the same seeds for every suspect). ``harness``: the card's as written, when the caller has
    it (a crossval's plan). Cost: (suspects + 1) x episodes short episodes."""
    from crosssim.profiles import load_profile
    from crosssim.runner.harness import Harness
    from crosssim.runner.rollout import run_episode
    from crosssim.runner.simulator import open_engine

    harness = harness or Harness.from_card(card)
    targets = _targets(card, harness.task)
    steps = max(1, min(harness.task.max_steps, int(round(seconds / harness.control_dt))))
    sim = open_engine(load_profile(engine), harness.scene, base=harness.model_variant)

    def measure(h) -> dict[str, float]:
        values = _measure([run_episode(sim, h, policy, episode=i, seed=seed + i, max_steps=steps)
                           for i in range(episodes)], steps)
        return {k: values[k] for k in targets}

    def score(h) -> tuple[dict[str, float], float]:
        values = measure(h)
        return values, _distance(values, targets)

    try:
        baseline, base_distance = score(harness)
        scores = _score_suspects(card, base_distance, score)
    finally:
        sim.close()
    return SuspectRanking(targets, baseline, scores, _cost(len(scores), episodes, steps, engine))


def _score_suspects(card, base: float, score, extra=()) -> tuple[SuspectScore, ...]:
    """Every suspect fix of ``card`` (and the ``extra`` (label, card) ones), best first, by the
    share of ``base`` (the card as written's distance or error) it removes; ``score(harness)``
    gives (values shown, distance). A fix the harness cannot build explains nothing and is left out."""
    from crosssim.runner.harness import Harness

    scores = []
    for label, fixed in suspects(card) + list(extra):
        try:
            values, d = score(Harness.from_card(fixed))
        except Exception:  # noqa: BLE001 - a fix the harness cannot build explains nothing
            continue
        recovered = (base - d) / base if base > 0 and np.isfinite(d) else 0.0
        scores.append(SuspectScore(label, values, float(recovered)))
    scores.sort(key=lambda s: -s.recovered)
    return tuple(scores)


def _cost(suspects: int, episodes: int, steps: int, engine: str) -> str:
    runs = (suspects + 1) * episodes
    return (f"{plural(suspects, 'suspect')} + the card as written, {plural(episodes, 'episode')} of {steps} "
            f"control steps each in {engine}: {runs * steps} steps")


def rank_log_suspects(card, logs) -> SuspectRanking | None:
    """Rank ``suspects(card)`` against real logs that hold the policy's inputs (``obs.*``): each
    fix's inputs are rebuilt from the logged states (crosssim.real.conformance.rebuild) and scored
    by the share of the input error it removes (per term, RMS of logged - rebuilt over the larger
    RMS, capped at 1, averaged over the terms the logs can check). No simulation runs. None when
    no log holds inputs."""
    from crosssim.real.conformance import rebuild
    from crosssim.real.terms import log_group, rms
    from crosssim.runner.harness import Harness

    with_obs = [log for log in logs if log.obs is not None]
    if not with_obs:
        return None

    def error(h) -> float:
        errs = []
        for log in with_obs:
            names, rebuilt, logged = rebuild(h, log)
            for name, r, lg in zip(names, rebuilt, logged):
                need = log_group(h, name)
                if need is None or getattr(log, need) is not None:
                    errs.append(min(rms(lg - r) / max(rms(lg), rms(r), 1e-9), 1.0))
        return float(np.mean(errs)) if errs else float("nan")

    def score(h) -> tuple[dict[str, float], float]:
        e = error(h)
        return {"input error": e}, e

    harness = Harness.from_card(card)
    base = error(harness)
    scores = _score_suspects(card, base, score, _measured_scales(card, harness, with_obs))
    rows = sum(len(log.as_logged) for log in with_obs)
    cost = (f"{len(scores)} suspects + the card as written, inputs rebuilt from {len(with_obs)} logs "
            f"({rows} rows), no simulation")
    return SuspectRanking({"input error": 0.0}, {"input error": base}, scores, cost)


FIXED_SCALES = (-1.0, 0.0, 2.0, 0.5)
"""The scale factors ``suspects`` tries on every term."""


def _measured_scales(card, harness, logs) -> list[tuple[str, object]]:
    """(label, card) with each observation term's scale multiplied by the factor the logs show
    (crosssim.real.conformance.compare_term: a term fed x 57.3 or x 0.1 is no fixed suspect's x2
    or x0.5), for terms whose logged inputs are a scale of the rebuilt ones."""
    from dataclasses import replace

    from crosssim.observations import TermSpec
    from crosssim.real.conformance import compare_term, rebuild
    from crosssim.real.terms import log_group

    per: dict[int, tuple[list, list]] = {}
    names: list[str] = []
    for log in logs:
        names, rebuilt, logged = rebuild(harness, log)
        for k, name in enumerate(names):
            need = log_group(harness, name)
            if need is None or getattr(log, need) is not None:
                per.setdefault(k, ([], []))
                per[k][0].append(logged[k])
                per[k][1].append(rebuilt[k])
    out, o = [], card.observation
    for k, (logged, rebuilt) in sorted(per.items()):
        if k >= len(o.terms):
            continue
        t = compare_term(names[k], np.concatenate(logged), np.concatenate(rebuilt))
        if "scale" not in t["status"] or any(abs(t["scale"] - f) <= 0.03 * max(abs(f), 1.0) for f in FIXED_SCALES):
            continue  # a fixed suspect (sign, x2, x0.5, zeroed) tries it already
        term = o.terms[k]
        changed = list(o.terms)
        changed[k] = TermSpec(term.name, np.asarray(term.scale, dtype=float) * t["scale"], term.clip, term.options)
        hint = f" ({t['hint']})" if t.get("hint") else ""
        out.append((f"observation.terms[{k}] ({term.name}) scale x{t['scale']:.4g}{hint}",
                    replace(card, observation=replace(o, terms=tuple(changed)))))
    return out


def suspect_hint(plan, reference: str) -> str:
    """The ranked-suspects line of a crossval whose harness check failed (``plan``: its
    crosssim.runner.crossval.Plan), run in the reference engine (MuJoCo if that one cannot run here) within the
    run's step cap; a failure to rank is said in the line, never raised."""
    from crosssim.policies import load_policy

    card, config, h = plan.card, plan.config, plan.harness
    seconds = SUSPECT_SECONDS if config.max_steps is None else min(SUSPECT_SECONDS, config.max_steps * h.control_dt)
    try:
        policy = load_policy(card, obs_size=h.obs_size, action_size=h.action_size, trust=config.trust_policy_code)
        try:
            ranking = rank_suspects(card, policy, engine=reference, seconds=seconds, seed=config.seed, harness=h)
        except Exception:  # noqa: BLE001 - the reference may be an engine this process cannot open
            ranking = rank_suspects(card, policy, engine="mujoco", seconds=seconds, seed=config.seed, harness=h)
        return ranking.hint()
    except Exception as exc:  # noqa: BLE001 - advice never costs the run
        return f"(suspects not ranked: {type(exc).__name__}: {str(exc)[:200]})"


def log_suspect_hint(card, logs) -> str:
    """The ranked-suspects line for real logs whose inputs the card does not rebuild; a failure to
    rank is said in the line, never raised."""
    try:
        ranking = rank_log_suspects(card, logs)
        return ranking.hint() if ranking else "no log holds the policy's inputs (obs.*): suspects not ranked"
    except Exception as exc:  # noqa: BLE001 - advice never costs the run
        return f"(suspects not ranked: {type(exc).__name__}: {str(exc)[:200]})"
