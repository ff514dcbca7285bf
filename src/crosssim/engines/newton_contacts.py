"""Contact wrench per body for EngineNewton, in MuJoCo's ``cfrc_ext`` convention.

``cfrc_ext`` is [torque, force], world-aligned, the torque taken about the centre of mass of the
robot (MuJoCo's ``subtree_com`` of the root). SolverMuJoCo runs MuJoCo itself, so its own
``cfrc_ext`` is read (``mj_rnePostConstraint`` / MuJoCo-Warp's ``rne_postconstraint``), exactly
as EngineMuJoCo does. Featherstone and semi-implicit share one penalty contact model; it is
evaluated again at the current state (Newton's ``eval_body_contact_forces``), which gives each
body's contact force and torque about its COM.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from crosssim.errors import CrossSimError
from crosssim.frame import quat_rotate


def contact_wrench(model, state) -> np.ndarray:
    name = model.solver_name
    if name == "mujoco-c":
        import mujoco

        solver = model.solver
        mujoco.mj_rnePostConstraint(solver.mj_model, solver.mj_data)
        return from_mujoco(model, np.asarray(solver.mj_data.cfrc_ext))
    if name == "mujoco-warp":
        import mujoco_warp

        solver = model.solver
        with wp.ScopedDevice(model.nm.device):
            mujoco_warp.rne_postconstraint(solver.mjw_model, solver.mjw_data)
        return from_mujoco(model, solver.mjw_data.cfrc_ext.numpy()[0])
    if name in ("featherstone", "semi-implicit"):
        return _penalty_wrench(model, state)
    raise CrossSimError(f"newton ({name}): contact wrenches are not available for this solver")


def from_mujoco(model, cfrc_ext: np.ndarray, to_newton: np.ndarray | None = None) -> np.ndarray:
    """Reorder SolverMuJoCo's bodies (its own MuJoCo model) into canonical body order;
    ``to_newton``: Newton body (of one world's layout) of each MuJoCo body, default world 0's."""
    if to_newton is None:
        to_newton = model.solver.mjc_body_to_newton.numpy()[0]
    out = np.zeros((len(model.canonical.body_names), 6))
    where = {int(nb): k for k, nb in enumerate(model.body_index)}
    for mj_body, nb in enumerate(to_newton):
        if nb >= 0 and int(nb) in where:
            out[where[int(nb)]] = cfrc_ext[mj_body]
    return out


def _penalty_wrench(model, state) -> np.ndarray:
    from newton._src.solvers.semi_implicit.kernels_contact import eval_body_contact_forces

    nm, s0 = model.nm, state.s0
    model.pipeline.collide(s0, model.contacts)
    body_f = wp.zeros(nm.body_count, dtype=wp.spatial_vector, device=nm.device)
    eval_body_contact_forces(nm, s0, model.contacts, False, body_f)
    f = body_f.numpy().astype(float)  # (force, torque about the body COM), world frame
    X = s0.body_q.numpy().astype(float)
    com = np.array([X[b, :3] + quat_rotate(np.array([X[b, 6], *X[b, 3:6]]), model.body_com[b])
                    for b in range(nm.body_count)])
    mass = nm.body_mass.numpy().astype(float)
    robot_com = (mass[:, None] * com).sum(axis=0) / max(mass.sum(), 1e-12)
    out = np.zeros((len(model.canonical.body_names), 6))
    for k, b in enumerate(model.body_index):
        force, torque = f[b, :3], f[b, 3:]
        out[k, :3] = torque + np.cross(com[b] - robot_com, force)
        out[k, 3:] = force
    return out
