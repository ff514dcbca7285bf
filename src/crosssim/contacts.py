"""Contacts of the robot with the world as MuJoCo makes them: which robot geom may touch which world
geom, with what condim and sliding friction (explicit ``<pair>``s with their own parameters, then
the geoms whose contype/conaffinity bits meet, combined by ``priority``, else by the max). The
canonical model's floor friction (the audit's) and the engines' feature inventory read it."""

from __future__ import annotations

import numpy as np


def world_contacts(m) -> list[tuple[int, int, int, float]]:
    """(robot geom, world geom, condim, sliding friction) of every robot-world contact MuJoCo may
    make: explicit pairs with their own parameters, then geoms whose bits meet (not both in a
    pair, not excluded), combined as MuJoCo combines them."""
    out, paired = [], set()
    for p in range(m.npair):
        g1, g2 = int(m.pair_geom1[p]), int(m.pair_geom2[p])
        paired |= {(g1, g2), (g2, g1)}
        if (m.geom_bodyid[g1] == 0) != (m.geom_bodyid[g2] == 0):
            robot, world = (g2, g1) if m.geom_bodyid[g1] == 0 else (g1, g2)
            out.append((robot, world, int(m.pair_dim[p]), float(m.pair_friction[p, 0])))
    excluded = {int(s) for s in m.exclude_signature[:m.nexclude]}
    world = [g for g in range(m.ngeom) if m.geom_bodyid[g] == 0]
    for g in range(m.ngeom):
        b = int(m.geom_bodyid[g])
        if b == 0 or b in {int(s) & 0xFFFF for s in excluded if int(s) >> 16 == 0}:
            continue
        for w in world:
            touch = (m.geom_contype[g] & m.geom_conaffinity[w]) or (m.geom_contype[w] & m.geom_conaffinity[g])
            if touch and (g, w) not in paired:
                out.append((g, w, *combined(m, g, w)))
    return out


def combined(m, a: int, b: int) -> tuple[int, float]:
    """(condim, sliding friction) of a contact of geoms ``a`` and ``b`` (MuJoCo's mj_contactParam)."""
    pa, pb = int(m.geom_priority[a]), int(m.geom_priority[b])
    if pa != pb:
        g = a if pa > pb else b
        return int(m.geom_condim[g]), float(m.geom_friction[g, 0])
    return max(int(m.geom_condim[a]), int(m.geom_condim[b])), float(max(m.geom_friction[a, 0], m.geom_friction[b, 0]))


def geom_world_friction(m) -> np.ndarray:
    """Sliding friction of each geom's contacts with the world as MuJoCo combines it (0 where condim
    is 1: no friction at all), the largest where it has several; NaN for a geom without any."""
    out = np.full(m.ngeom, np.nan)
    for robot, _, condim, mu in world_contacts(m):
        mu = 0.0 if condim == 1 else mu
        out[robot] = mu if np.isnan(out[robot]) else max(out[robot], mu)
    return out
