"""How far PhysX's cooked convex hull of each mesh collision geom lies from MuJoCo's.

MuJoCo collides a mesh as the convex hull of all its vertices (qhull, any vertex count). PhysX
cooks a hull of at most 255 vertices and SAPIEN 3.0.3 cooks fewer still (at most 136 measured; on
the Unitree G1 a hull of 129 vertices became 34, one of 5,583 became 129), so a cooked hull is a
simplification. It is faithful here when no point of either hull lies farther than the profile's
``hull_tolerance`` outside the other; beyond it the column is refused in one line naming the geom
(crosssim.engines.physx.load), never run on a silently smaller or larger robot.
"""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
from scipy.spatial import ConvexHull

from crosssim.engines.features import contact_geoms
from crosssim.errors import EngineFailure
from crosssim.scene import element_name, write_mesh_obj


def hull_vertices(m, mesh: int) -> np.ndarray:
    """The vertices of MuJoCo's convex hull of ``mesh`` (mesh frame), or all its vertices where
    MuJoCo stored no hull."""
    v0, nv = int(m.mesh_vertadr[mesh]), int(m.mesh_vertnum[mesh])
    verts = np.asarray(m.mesh_vert[v0:v0 + nv], float)
    adr = int(m.mesh_graphadr[mesh])
    if adr < 0:
        return verts
    count = int(m.mesh_graph[adr])
    return verts[np.asarray(m.mesh_graph[adr + 2 + count:adr + 2 + 2 * count], dtype=int)]  # vert_globalid


def hull_gap(mj_vertices: np.ndarray, physx_vertices: np.ndarray) -> tuple[float, float]:
    """(how far MuJoCo's hull reaches outside PhysX's, how far PhysX's reaches outside MuJoCo's) [m]."""
    def outside(points, hull_points):
        eq = ConvexHull(hull_points).equations  # unit outward normals n, offsets d: n.x + d <= 0 inside
        return float(max(0.0, (eq[:, :3] @ points.T + eq[:, 3:]).max()))
    return outside(mj_vertices, physx_vertices), outside(physx_vertices, mj_vertices)


def refuse_loose_hulls(m, scene: Path, mesh_dir: Path, tolerance: float) -> None:
    """Cook every colliding mesh geom's hull as the physx column does and refuse, in one line, the
    first whose hull lies more than ``tolerance`` [m] from MuJoCo's."""
    import sapien

    material = sapien.physx.PhysxMaterial(1.0, 1.0, 0.0)
    cooked = {}
    for g in sorted(contact_geoms(m)):
        if int(m.geom_type[g]) != mujoco.mjtGeom.mjGEOM_MESH:
            continue
        k = int(m.geom_dataid[g])
        if k not in cooked:  # SAPIEN caches the cooking by file: the world's build reuses it
            path = write_mesh_obj(m, k, mesh_dir)
            shape = sapien.physx.PhysxCollisionShapeConvexMesh(str(path), np.ones(3, dtype=np.float32), material)
            mj, pxv = hull_vertices(m, k), np.asarray(shape.get_vertices(), float)
            cooked[k] = (len(mj), len(pxv), max(hull_gap(mj, pxv)))
        n_mj, n_px, gap = cooked[k]
        if gap > tolerance:
            raise EngineFailure(
                f"physx cannot build mesh collision geom '{element_name(m, mujoco.mjtObj.mjOBJ_GEOM, g)}' (mesh "
                f"{element_name(m, mujoco.mjtObj.mjOBJ_MESH, k)}, a hull of {n_mj} vertices in MuJoCo) in "
                f"{Path(scene).name}: PhysX's cooking keeps {n_px} of them (255 at most), {gap * 1000:.1f} mm off MuJoCo's "
                f"hull, more than settings.hull_tolerance {tolerance * 1000:g} mm; simplify the mesh or raise it")
