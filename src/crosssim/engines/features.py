"""The feature inventory of a scene: every MJCF feature beyond bodies, hinge/slide joints and plain
geoms that the compiled model uses, one entry per element, and the one-line refusal of a column
whose engine does not build one of them.

Every adapter calls ``refuse_unbuilt`` first thing in ``load`` with what it cannot build (a
feature -> why table, or a function of the entry for features it builds only in part): an engine
that would drop a feature without a word (PyBullet and PhysX once ran MuJoCo Playground's G1,
whose feet touch the floor only through ``<pair>``, as a robot falling through the floor) instead
refuses the column, naming the feature, the element and the engine. Elements are named as the
canonical model names them (crosssim.scene.element_name), unnamed ones included.

What counts as a contact here is what PyBullet and PhysX build: a robot geom against a world geom
(contype/conaffinity bits or an explicit pair). MuJoCo combines two geoms' parameters by their
``priority``, else condim and friction by the max; an explicit pair states its own. Self-collision
(two robot bodies whose geoms' bits meet) is listed per body pair, after MuJoCo's body filter
(``body_filtered``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import mujoco
import numpy as np

from crosssim.contacts import world_contacts
from crosssim.errors import EngineFailure
from crosssim.scene import element_name

OBJ = mujoco.mjtObj
GEOM = mujoco.mjtGeom
LABELS = {
    "pair": "<pair> contact",
    "exclude": "<exclude> contact",
    "hfield": "height field",
    "tendon": "tendon",
    "equality": "equality constraint",
    "mesh": "mesh collision geom",
    "ellipsoid": "ellipsoid collision geom",
    "condim": "torsional or rolling friction (condim 4 or 6) of geom",
    "frictionless": "frictionless contact (condim 1) of geom",
    "friction": "friction of the contacts of body",
    "self": "self-collision of the bodies",
    "self_partial": "self-collision of some geoms of the bodies",
    "self_parent": "self-collision of a body with its parent,",
}
"""Feature -> how the refusal names it, before the element's name."""


@dataclass(frozen=True)
class Use:
    """One element of the scene that uses a feature."""

    feature: str
    """A key of LABELS."""
    element: str
    """Its canonical name (crosssim.scene.element_name)."""
    detail: str = ""
    """What it states, for the refusal (e.g. ``geoms foot_geom and floor, friction 2``)."""
    world: bool = True
    """Whether it involves the world body (a pair or an exclude with a world geom or the world
    body): PyBullet and PhysX build contacts between the robot and the world only."""


def inventory(m) -> list[Use]:
    """Every use of a LABELS feature in compiled model ``m``, in MuJoCo's order per feature."""
    name = lambda obj, i: element_name(m, obj, int(i))  # noqa: E731
    out = []
    for p in range(m.npair):
        g1, g2 = int(m.pair_geom1[p]), int(m.pair_geom2[p])
        out.append(Use("pair", name(OBJ.mjOBJ_PAIR, p), f"geoms {name(OBJ.mjOBJ_GEOM, g1)} and "
                       f"{name(OBJ.mjOBJ_GEOM, g2)}, condim {int(m.pair_dim[p])}, friction {m.pair_friction[p, 0]:g}",
                       world=0 in (int(m.geom_bodyid[g1]), int(m.geom_bodyid[g2]))))
    for e in range(m.nexclude):
        b1, b2 = int(m.exclude_signature[e]) >> 16, int(m.exclude_signature[e]) & 0xFFFF
        out.append(Use("exclude", name(OBJ.mjOBJ_EXCLUDE, e), f"bodies {name(OBJ.mjOBJ_BODY, b1)} and "
                       f"{name(OBJ.mjOBJ_BODY, b2)}", world=0 in (b1, b2)))
    contact = contact_geoms(m)
    for g in range(m.ngeom):
        t = int(m.geom_type[g])
        if t == GEOM.mjGEOM_HFIELD:
            out.append(Use("hfield", name(OBJ.mjOBJ_GEOM, g), f"hfield {name(OBJ.mjOBJ_HFIELD, m.geom_dataid[g])}",
                           world=int(m.geom_bodyid[g]) == 0))
        elif t == GEOM.mjGEOM_MESH and g in contact:
            out.append(Use("mesh", name(OBJ.mjOBJ_GEOM, g), "collides as its convex hull in MuJoCo",
                           world=int(m.geom_bodyid[g]) == 0))
        elif t == GEOM.mjGEOM_ELLIPSOID and g in contact:
            out.append(Use("ellipsoid", name(OBJ.mjOBJ_GEOM, g), f"semi-axes {' '.join(f'{s:g}' for s in m.geom_size[g])}"))
    for t in range(m.ntendon):
        if _tendon_acts(m, t):
            out.append(Use("tendon", name(OBJ.mjOBJ_TENDON, t), "with a limit, spring, damping or friction"))
    for e in range(m.neq):
        if m.eq_active0[e]:
            kind = mujoco.mjtEq(int(m.eq_type[e])).name.removeprefix("mjEQ_").lower()
            out.append(Use("equality", name(OBJ.mjOBJ_EQUALITY, e), f"type {kind}"))
    out += _contact_uses(m)
    seen = set()
    for g, h, condim, _ in object_contacts(m):
        if condim != 3 and h not in seen:
            seen.add(h)
            out.append(Use("frictionless" if condim == 1 else "condim", element_name(m, OBJ.mjOBJ_GEOM, h),
                           f"condim {condim} against object {element_name(m, OBJ.mjOBJ_GEOM, g)}", world=False))
    out += _self_uses(m)
    return out


def refuse_unbuilt(m, scene: Path, engine: str, cannot: dict[str, str] | Callable[[Use], str | None]) -> None:
    """EngineFailure in one line for the first use in ``m``'s inventory that ``engine`` cannot
    build: ``cannot`` maps a feature to why, or is a function of the use giving why (None: built)."""
    why_not = cannot if callable(cannot) else (lambda use: cannot.get(use.feature))
    for use in inventory(m):
        why = why_not(use)
        if why:
            detail = f" ({use.detail})" if use.detail else ""
            raise EngineFailure(f"{engine} cannot build {LABELS[use.feature]} '{use.element}'{detail} in "
                                f"{Path(scene).name}: {why}")


def free_objects(m) -> list[int]:
    """Bodies under the world on a free joint besides the first (a free base): objects the robot
    handles (Fetch's block), which PyBullet and PhysX build as bodies of their own."""
    free = int(mujoco.mjtJoint.mjJNT_FREE)
    return [b for b in range(2, m.nbody) if m.body_parentid[b] == 0 and m.body_jntnum[b] == 1
            and int(m.jnt_type[m.body_jntadr[b]]) == free]


def object_contacts(m) -> list[tuple[int, int, int, float]]:
    """(object geom, other geom, condim, sliding friction) of every contact MuJoCo may make between a
    free object's geom and a geom of another body (robot, static bodies or the world), by their bits
    and excludes, combined as MuJoCo combines them (a <pair> naming an object geom is refused by the adapters that build objects)."""
    from crosssim.contacts import combined

    objects = set(free_objects(m))
    excluded = {tuple(sorted((int(s) >> 16, int(s) & 0xFFFF))) for s in m.exclude_signature[:m.nexclude]}
    out = []
    for g in range(m.ngeom):
        b = int(m.geom_bodyid[g])
        if b not in objects:
            continue
        for h in range(m.ngeom):
            other = int(m.geom_bodyid[h])
            if other == b or (other in objects and other < b) or tuple(sorted((b, other))) in excluded:
                continue
            if (m.geom_contype[g] & m.geom_conaffinity[h]) or (m.geom_contype[h] & m.geom_conaffinity[g]):
                out.append((g, h, *combined(m, g, h)))
    return out


def contact_geoms(m) -> set[int]:
    """Geoms that can touch anything: contype/conaffinity bits set, or named by a pair."""
    bits = {g for g in range(m.ngeom) if m.geom_contype[g] or m.geom_conaffinity[g]}
    return bits | {int(g) for g in m.pair_geom1[:m.npair]} | {int(g) for g in m.pair_geom2[:m.npair]}


def body_friction(m) -> dict[int, float]:
    """Sliding friction of each robot body's contacts with the world (0 where condim is 1: MuJoCo
    then has no friction at all); the largest where they differ, which the inventory reports."""
    out: dict[int, float] = {}
    for robot, _, condim, mu in world_contacts(m):
        b = int(m.geom_bodyid[robot])
        out[b] = max(out.get(b, 0.0), 0.0 if condim == 1 else mu)
    return out


def _contact_uses(m) -> list[Use]:
    """condim other than 3 (sliding friction only) on a robot-world contact, and robot bodies whose
    contacts with the world do not share one sliding friction (condim 1 counts as friction 0)."""
    out, seen, per_body = [], set(), {}
    for robot, world, condim, mu in world_contacts(m):
        if condim != 3 and robot not in seen:
            seen.add(robot)
            out.append(Use("frictionless" if condim == 1 else "condim", element_name(m, OBJ.mjOBJ_GEOM, robot),
                           f"condim {condim} against {element_name(m, OBJ.mjOBJ_GEOM, world)}"))
        per_body.setdefault(int(m.geom_bodyid[robot]), set()).add(round(0.0 if condim == 1 else mu, 9))
    for b, mus in per_body.items():
        if len(mus) > 1:
            out.append(Use("friction", element_name(m, OBJ.mjOBJ_BODY, b),
                           f"sliding friction {', '.join(f'{x:g}' for x in sorted(mus))} against the world"))
    return out


def bits_touch(m, g1: int, g2: int) -> bool:
    """MuJoCo's dynamic filter: two geoms may touch when either's contype meets the other's conaffinity."""
    return bool((m.geom_contype[g1] & m.geom_conaffinity[g2]) or (m.geom_contype[g2] & m.geom_conaffinity[g1]))


def body_filtered(m, b1: int, b2: int) -> bool:
    """Whether MuJoCo never collides bodies ``b1`` and ``b2``, whatever their geoms' bits: the same
    weld body (a body without joints is welded to its parent), a weld body and its weld parent
    unless the filterparent flag is off or either is the world (engine_collision_driver.c,
    filterBodyPair), or an ``<exclude>`` of the two."""
    w1, w2 = int(m.body_weldid[b1]), int(m.body_weldid[b2])
    if w1 == w2:
        return True
    parent_on = not m.opt.disableflags & int(mujoco.mjtDisableBit.mjDSBL_FILTERPARENT)
    weld_parent = lambda w: int(m.body_weldid[m.body_parentid[w]])  # noqa: E731
    if parent_on and w1 and w2 and (w1 == weld_parent(w2) or w2 == weld_parent(w1)):
        return True
    return ((min(b1, b2) << 16) + max(b1, b2)) in {int(x) for x in m.exclude_signature[:m.nexclude]}


def geoms_of(m, b: int) -> list[int]:
    """Body ``b``'s geoms whose bits let them touch anything."""
    return [g for g in range(m.body_geomadr[b], m.body_geomadr[b] + m.body_geomnum[b])
            if m.geom_contype[g] or m.geom_conaffinity[g]]


def self_contacts(m) -> list[tuple[int, int, list[tuple[int, int]], int]]:
    """Robot body pairs MuJoCo lets touch through their geoms' bits: (b1, b2, geom pairs that may
    touch, geom pairs of the two bodies' colliding geoms), b1 < b2, neither the world."""
    out = []
    for b1 in range(1, m.nbody):
        for b2 in range(b1 + 1, m.nbody):
            pairs = [(g1, g2) for g1 in geoms_of(m, b1) for g2 in geoms_of(m, b2)]
            touch = [p for p in pairs if bits_touch(m, *p)]
            if touch and not body_filtered(m, b1, b2):
                out.append((b1, b2, touch, len(pairs)))
    return out


def _self_uses(m) -> list[Use]:
    """One use per robot body pair MuJoCo collides: ``self_parent`` where one is the other's parent
    (filterparent off: every other engine's articulation filters parent and child), else
    ``self_partial`` where only some of their geoms may touch, else ``self``."""
    out = []
    for b1, b2, touch, total in self_contacts(m):
        parent = m.body_parentid[b2] == b1 or m.body_parentid[b1] == b2
        feature = "self_parent" if parent else "self" if len(touch) == total else "self_partial"
        geoms = ", ".join(f"{element_name(m, OBJ.mjOBJ_GEOM, g1)}-{element_name(m, OBJ.mjOBJ_GEOM, g2)}" for g1, g2 in touch[:3])
        out.append(Use(feature, f"{element_name(m, OBJ.mjOBJ_BODY, b1)}, {element_name(m, OBJ.mjOBJ_BODY, b2)}",
                       f"{len(touch)} of {total} geom pairs may touch: {geoms}{', ...' if len(touch) > 3 else ''}",
                       world=False))
    return out


def _tendon_acts(m, t: int) -> bool:
    """A tendon acts on the joints only through a limit, a spring, damping, dry friction or armature
    (Humanoid's two tendons have none: inert, built by every engine)."""
    return bool(m.tendon_limited[t] or m.tendon_stiffness[t] or m.tendon_damping[t] or m.tendon_frictionloss[t]
                or getattr(m, "tendon_armature", np.zeros(m.ntendon))[t])
