"""A lockstep batch of EngineNewton episodes as N worlds of one Newton model (SolverMuJoCo on Warp).

One Newton model holds every episode of a batch as its own world, so one solver step advances all
of them: Warp's kernels launch once per step for N worlds instead of N times for one (the per-launch
cost, not the arithmetic, is what a small robot's step spends on Warp's CPU device).

Built from the single-world ``NewtonModel`` of the same compiled model: Newton imports the scene
again, ``ModelBuilder.replicate`` copies it into N worlds, and every per-entity parameter array is
then set to N copies of the reconciled single-world array (``tile_parameters``), so each world is
the single-world model exactly; ``world_mismatches`` checks it after the solver is built.

Stepping is deferred: ``step`` records a world's torques and physics steps, and the first read of a
stepped world (``joint_state``, ``frame``) steps every world with the same pending steps at once.
The lockstep runner plans all rows' physics before it reads any (crosssim.runner.batched), so a
control step is one batched step. A live world that has nothing pending (an episode that ended,
or one planned with another number of steps) is saved before and put back after: it never moves
under another's step. States are worlds; a dropped state's world goes back to the pool.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import warp as wp

import newton
from crosssim.engines.newton_model import NewtonModel, _make_solver, _switch_off_actuators, import_builder
from crosssim.engines.settings import NewtonSettings, settings_of
from crosssim.errors import EngineFailure

STATE_ARRAYS = ("joint_q", "joint_qd", "body_q", "body_qd")
"""Newton state arrays a world's step writes (saved and put back for a world that does not step)."""


@dataclass(eq=False)
class NewtonWorlds:
    """N worlds of one Newton model, one per episode of a lockstep batch."""

    base: NewtonModel
    """The single-world model: canonical model, index maps, audit."""
    n: int
    nm: Any
    solver: Any
    s0: Any
    s1: Any
    control: Any
    joint_f: np.ndarray
    """Generalized forces of every world (Newton dof order), written into ``control`` before a step."""
    nq: int
    """Newton joint coordinates per world."""
    nv: int
    """Newton dofs per world."""
    nbody: int
    """Newton bodies per world."""
    graph: Any = None
    free: list = field(default_factory=list)
    """Worlds no live state holds."""
    live: dict = field(default_factory=dict)
    """world -> weakref of its state."""
    pending: dict = field(default_factory=dict)
    """world -> physics steps recorded by ``step`` and not yet run."""
    physics_steps: int = 0
    """Physics steps of the whole model run so far (one per physics step of a batch that stays in
    lockstep; tests and the benchmark read it)."""

    @property
    def dt(self) -> float:
        return self.base.dt

    @property
    def canonical(self):
        return self.base.canonical


class WorldState:
    """One episode's world in a NewtonWorlds model, owned by the caller."""

    def __init__(self, model: NewtonWorlds, world: int):
        self.owner = weakref.ref(model)
        self.world = world
        self.time = 0.0
        self.torques = np.zeros(model.canonical.joint_count)
        self.joints: tuple[np.ndarray, np.ndarray] | None = None
        model.live[world] = weakref.ref(self)
        weakref.finalize(self, _release, model, world).atexit = False


def _release(model: NewtonWorlds, world: int) -> None:
    model.live.pop(world, None)
    model.pending.pop(world, None)
    model.free.append(world)


def available(base: NewtonModel) -> bool:
    """Whether ``base`` can run a batch as worlds: SolverMuJoCo on Warp only (the one built and
    measured; the other solvers' states swap what the solver keeps, measured 0.75-1.46x of one at a
    time, so their episodes run one at a time)."""
    return base.solver_name == "mujoco-warp" and base.compiled is not None


def build_worlds(base: NewtonModel, n: int) -> NewtonWorlds | None:
    """N worlds of ``base``'s compiled model; None where ``available`` says it cannot."""
    if not available(base) or n < 1:
        return None
    one = import_builder(base.compiled)
    builder = newton.ModelBuilder()
    builder.replicate(one, copy_count=n)  # no spacing: every world at the origin, as the single model
    nm = builder.finalize(device="cpu")
    for kind in ("body", "joint", "shape"):  # a world's entities are one contiguous block, world by world
        where = getattr(nm, f"{kind}_world", None)
        if where is not None and not np.array_equal(where.numpy(), np.repeat(np.arange(n), len(where) // n)):
            raise EngineFailure(f"newton: the replicated model does not hold its {kind}s world by world; "
                                "run with --one-at-a-time (and report this Newton version)")
    tile_parameters(base.nm, nm, n)
    _switch_off_actuators(nm, None)
    nm.set_gravity(tuple(float(g) for g in base.canonical.gravity))
    bad = world_mismatches(base.nm, nm, n)
    if bad:
        raise EngineFailure(f"newton: {n} worlds differ from the single-world model in {', '.join(bad[:5])}; "
                            "run with --one-at-a-time (and report this Newton version)")
    solver_args = settings_of(base.profile, NewtonSettings).solver_args
    solver, _, _ = _make_solver(nm, base.compiled.mj, base.solver_name, solver_args, {})
    control = nm.control()
    _switch_off_actuators(nm, control)
    model = NewtonWorlds(base=base, n=n, nm=nm, solver=solver, s0=nm.state(), s1=nm.state(), control=control,
                         joint_f=np.zeros(nm.joint_dof_count), nq=nm.joint_coord_count // n,
                         nv=nm.joint_dof_count // n, nbody=nm.body_count // n, free=list(range(n - 1, -1, -1)))
    return model


def _per_entity(single, multi, n: int) -> bool:
    """Whether ``multi`` is N world copies of ``single``'s entities (same element type)."""
    return (isinstance(single, wp.array) and isinstance(multi, wp.array) and single.ndim >= 1 and single.shape[0] > 0
            and multi.shape[0] == n * single.shape[0] and multi.shape[1:] == single.shape[1:]
            and single.dtype == multi.dtype)


def _float(a) -> bool:
    return getattr(a.dtype, "_wp_scalar_type_", a.dtype) in (wp.float32, wp.float64, wp.float16)


def _arrays(nm):
    """(name, array) of the model and its MuJoCo namespace."""
    for owner, prefix in ((nm, ""), (getattr(nm, "mujoco", None), "mujoco.")):
        if owner is None:
            continue
        for name, value in vars(owner).items():
            if isinstance(value, wp.array):
                yield prefix + name, owner, name


def tile_parameters(single_nm, nm, n: int) -> None:
    """Every per-entity float array (masses, inertias, joint frames and parameters, friction, solref) and
    the joint target and solref modes of ``nm`` set to N copies of ``single_nm``'s: the reconciliation done
    once on the single-world model holds in every world. Index arrays are not touched (theirs
    point at each world's own entities)."""
    singles = dict((name, getattr(owner, attr)) for name, owner, attr in _arrays(single_nm))
    for name, owner, attr in _arrays(nm):
        single, multi = singles.get(name), getattr(owner, attr)
        if _per_entity(single, multi, n) and (_float(single) or name in ("joint_target_mode", "mujoco.solref_mode")):
            multi.assign(np.concatenate([single.numpy()] * n, axis=0))


def world_mismatches(single_nm, nm, n: int) -> list[str]:
    """Names of per-entity float arrays where some world differs from the single-world model."""
    singles = dict((name, getattr(owner, attr)) for name, owner, attr in _arrays(single_nm))
    bad = []
    for name, owner, attr in _arrays(nm):
        single, multi = singles.get(name), getattr(owner, attr)
        if _per_entity(single, multi, n) and _float(single):
            one = single.numpy()
            if not np.array_equal(multi.numpy().reshape(n, *one.shape), np.broadcast_to(one, (n, *one.shape))):
                bad.append(name)
    return bad


# -- the contract, per world --------------------------------------------------------------------
def put(model: NewtonWorlds, state: WorldState, q1: np.ndarray, qd1: np.ndarray) -> WorldState:
    """Write one world's Newton coordinates (``q1``, ``qd1``: one world's layout) into both state
    buffers, its bodies by forward kinematics, and forget its warm start (a fresh episode)."""
    k = state.world
    qs, vs, bs = slice(k * model.nq, (k + 1) * model.nq), slice(k * model.nv, (k + 1) * model.nv), \
        slice(k * model.nbody, (k + 1) * model.nbody)
    for s in (model.s0, model.s1):
        q, qd = s.joint_q.numpy().copy(), s.joint_qd.numpy().copy()
        q[qs], qd[vs] = q1, qd1
        s.joint_q.assign(q)
        s.joint_qd.assign(qd)
        bq, bqd = s.body_q.numpy().copy(), s.body_qd.numpy().copy()
        newton.eval_fk(model.nm, s.joint_q, s.joint_qd, s)  # every world's bodies; only this one's kept
        bq[bs], bqd[bs] = s.body_q.numpy()[bs], s.body_qd.numpy()[bs]
        s.body_q.assign(bq)
        s.body_qd.assign(bqd)
        s.clear_forces()
    warm = model.solver.mjw_data.qacc_warmstart.numpy().copy()
    warm[k] = 0.0
    model.solver.mjw_data.qacc_warmstart.assign(warm)
    model.pending.pop(k, None)
    state.time, state.joints = 0.0, None
    state.torques = np.zeros(model.canonical.joint_count)
    return state


def _open(model: NewtonWorlds) -> None:
    if model.solver is None:  # close() dropped it: one clear line, not an AttributeError on None
        raise EngineFailure("newton: this batch's worlds model was closed; the lockstep runner builds one per batch")


def new_state(model: NewtonWorlds) -> WorldState:
    _open(model)
    if not model.free:
        raise EngineFailure(f"newton: all {model.n} worlds of this batch hold live states; drop one before resetting "
                            "another, or build the batch with more worlds")
    return WorldState(model, model.free.pop())


def record_step(model: NewtonWorlds, state: WorldState, torques: np.ndarray, n_substeps: int) -> None:
    """Hold ``torques`` for ``n_substeps`` physics steps of ``state``'s world; run at the next read."""
    _open(model)
    if state.world in model.pending:  # stepped twice without a read in between: run the first now
        flush(model, state)
    base, k = model.base, state.world
    state.torques = np.asarray(torques, dtype=float).copy()
    model.joint_f[k * model.nv + base.qd_index] = state.torques
    model.pending[k] = int(n_substeps)
    state.joints = None


def flush(model: NewtonWorlds, state: WorldState) -> None:
    """Run ``state``'s pending physics steps, together with every world pending as many."""
    n = model.pending.get(state.world)
    if n is None:
        return
    group = sorted(k for k, m in model.pending.items() if m == n)
    keep = [k for k, ref in model.live.items() if k not in group and ref() is not None]
    saved = _save(model, keep) if keep else None
    model.control.joint_f.assign(model.joint_f)
    for _ in range(n):
        _physics_step(model)
    if saved is not None:
        _restore(model, keep, saved)
    for k in group:
        del model.pending[k]
        s = model.live[k]()
        for _ in range(n):  # added step by step, as the single-world path does (same rounding)
            s.time += model.dt
        s.joints = None


def _rows(model: NewtonWorlds, name: str, worlds: list[int]) -> np.ndarray:
    per = {"joint_q": model.nq, "joint_qd": model.nv}.get(name, model.nbody)
    return np.concatenate([np.arange(k * per, (k + 1) * per) for k in worlds])


def _save(model: NewtonWorlds, worlds: list[int]) -> dict:
    out = {name: getattr(model.s0, name).numpy()[_rows(model, name, worlds)].copy() for name in STATE_ARRAYS}
    out["warm"] = model.solver.mjw_data.qacc_warmstart.numpy()[worlds].copy()
    return out


def _restore(model: NewtonWorlds, worlds: list[int], saved: dict) -> None:
    for name in STATE_ARRAYS:
        array = getattr(model.s0, name)
        values = array.numpy().copy()
        values[_rows(model, name, worlds)] = saved[name]
        array.assign(values)
    warm = model.solver.mjw_data.qacc_warmstart
    values = warm.numpy().copy()
    values[worlds] = saved["warm"]
    warm.assign(values)


def _physics_step(model: NewtonWorlds) -> None:
    """One physics step of every world, replayed from a graph captured once on the model's buffers."""
    model.physics_steps += 1
    if model.base.capture:
        if model.graph is None:
            with wp.ScopedCapture(device=model.nm.device) as capture:
                _solver_steps(model)
            model.graph = capture.graph
        wp.capture_launch(model.graph)
    else:
        _solver_steps(model)


def _solver_steps(model: NewtonWorlds) -> None:
    h = model.dt / model.base.substeps
    a, b = model.s0, model.s1
    for _ in range(model.base.substeps):
        a.clear_forces()
        model.solver.step(a, b, model.control, None, h)
        a, b = b, a
    if a is not model.s0:
        for name in STATE_ARRAYS:
            wp.copy(getattr(model.s0, name), getattr(a, name))


def world_arrays(model: NewtonWorlds, state: WorldState):
    """(q, qd, body_q, body_qd) of ``state``'s world, in one world's layout, after its pending steps."""
    flush(model, state)
    k = state.world
    s = model.s0
    return (s.joint_q.numpy()[k * model.nq:(k + 1) * model.nq], s.joint_qd.numpy()[k * model.nv:(k + 1) * model.nv],
            s.body_q.numpy()[k * model.nbody:(k + 1) * model.nbody],
            s.body_qd.numpy()[k * model.nbody:(k + 1) * model.nbody])


def contact_wrench(model: NewtonWorlds, state: WorldState) -> np.ndarray:
    """SolverMuJoCo's ``cfrc_ext`` of ``state``'s world: right after a step that world took part in
    (the runner's reads); a world saved and put back meanwhile reads the solver's data of the step
    it sat out, as a single-world state read after another state stepped does."""
    import mujoco_warp

    from crosssim.engines.newton_contacts import from_mujoco

    flush(model, state)
    with wp.ScopedDevice(model.nm.device):
        mujoco_warp.rne_postconstraint(model.solver.mjw_model, model.solver.mjw_data)
    k = state.world
    to_newton = model.solver.mjc_body_to_newton.numpy()[k]
    return from_mujoco(model.base, model.solver.mjw_data.cfrc_ext.numpy()[k],
                       np.where(to_newton >= 0, to_newton - k * model.nbody, -1))

