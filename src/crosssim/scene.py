"""Scenes and the canonical model: MuJoCo's compiled model is the source of physical truth.

Every engine adapter loads the same MJCF file and then reconciles its own model against the
:class:`CanonicalModel` read here, so that engines can disagree about physics only.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from crosssim.contacts import geom_world_friction
from crosssim.errors import CrossSimError
from crosssim.limits import check_model_files
from crosssim.mujoco_log import route as route_mujoco_log

GYMNASIUM_PREFIX = "gymnasium:"
ROBOTICS_PREFIX = "gymnasium_robotics:"
"""``gymnasium_robotics:fetch/pick_and_place.xml``: a file of gymnasium-robotics' assets (docs/manipulation.md)."""


def resolve_scene(spec: str | Path, *, base_dir: Path | None = None) -> Path:
    """Turn a scene reference into an existing MJCF path.

    ``gymnasium:hopper.xml`` names a file shipped in gymnasium's MuJoCo assets (pinned by the
    installed package, no network); ``gymnasium_robotics:fetch/push.xml`` one of gymnasium-robotics'
    assets (found without importing the package); anything else is a path, relative to ``base_dir`` if given.
    """
    spec = str(spec)
    if spec.startswith(ROBOTICS_PREFIX):
        import importlib.util

        found = importlib.util.find_spec("gymnasium_robotics")
        if found is None or found.origin is None:
            raise CrossSimError(f"scene {spec!r} needs gymnasium-robotics' assets: pip install 'crosssim[robotics]'")
        path = Path(found.origin).parent / "envs" / "assets" / spec[len(ROBOTICS_PREFIX):]
    elif spec.startswith(GYMNASIUM_PREFIX):
        import importlib.util

        found = importlib.util.find_spec("gymnasium")
        if found is None or found.origin is None:
            raise CrossSimError(
                f"scene {spec!r} needs gymnasium's MuJoCo assets: pip install 'gymnasium[mujoco]'"
            )
        path = Path(found.origin).parent / "envs" / "mujoco" / "assets" / spec[len(GYMNASIUM_PREFIX):]
    else:
        path = Path(spec).expanduser()
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
    if not path.is_file():
        raise CrossSimError(f"robot/scene file not found: {path} (check the card's 'robot' field)")
    return path.resolve()


@dataclass(frozen=True)
class CanonicalModel:
    """Physical parameters of a scene as MuJoCo compiles them, in MuJoCo's index order.

    Joint arrays cover every joint except a free base; body arrays cover every body except
    the world. Units are SI.
    """

    path: Path
    timestep: float
    """Physics step [s] from ``<option timestep>``."""
    gravity: np.ndarray
    """Gravity [m/s^2], world frame."""
    integrator: int
    """MuJoCo's mjtIntegrator: 0 Euler (semi-implicit), 1 RK4, 2 implicit, 3 implicitfast."""
    nq: int
    nv: int
    free_base: bool
    """Whether the root body hangs on a free joint (legged robots) or on explicit joints (slides,
    hinges, a ball joint: any mix in the root body)."""
    root_body: str
    """Name of the body whose pose is the 'base' (the first body below the world)."""
    body_names: tuple[str, ...]
    body_mass: np.ndarray
    """Body masses [kg]."""
    body_inertia: np.ndarray
    """Principal moments of inertia [kg m^2], (nbody, 3), in MuJoCo's inertial frame."""
    body_ipos: np.ndarray
    """Centre of mass in the body frame [m], (nbody, 3)."""
    body_iquat: np.ndarray
    """Orientation of the principal inertial frame in the body frame (w, x, y, z)."""
    joint_names: tuple[str, ...]
    joint_type: tuple[str, ...]
    """'hinge' or 'slide' per joint (free and ball joints of the base are not listed)."""
    joint_qposadr: np.ndarray
    joint_dofadr: np.ndarray
    joint_limited: np.ndarray
    joint_range: np.ndarray
    """Joint ranges [rad or m], (njoint, 2); meaningful where ``joint_limited``."""
    joint_damping: np.ndarray
    """Viscous joint damping [N m s/rad or N s/m]."""
    joint_armature: np.ndarray
    """Rotor inertia added to the joint [kg m^2 or kg]."""
    joint_frictionloss: np.ndarray
    """Dry joint friction [N m or N]."""
    joint_stiffness: np.ndarray
    """Passive joint spring [N m/rad or N/m] towards ``joint_springref``."""
    joint_springref: np.ndarray
    """Spring rest position [rad or m] (MuJoCo's qpos_spring)."""
    geom_body: tuple[str, ...]
    geom_friction: np.ndarray
    """Sliding, torsional, rolling friction per geom."""
    geom_collides: np.ndarray
    """Whether a geom takes part in contacts (contype or conaffinity set)."""
    actuator_names: tuple[str, ...]
    actuator_joint: np.ndarray
    """Index into ``joint_names`` of the joint each actuator drives."""
    actuator_gear: np.ndarray
    actuator_ctrlrange: np.ndarray
    actuator_ctrllimited: np.ndarray
    actuator_kp: np.ndarray
    """Position gain for position actuators, 0 for motors."""
    actuator_kv: np.ndarray
    """Damping gain for position/velocity actuators, 0 for motors."""
    actuator_forcerange: np.ndarray
    actuator_forcelimited: np.ndarray
    qpos0: np.ndarray
    """Default generalized positions (model's qpos0)."""
    keyframes: dict
    ball_joints: tuple[str, ...] = ()
    """Ball joints of the root body (part of the base, as a free joint is; not in ``joint_names``).
    Engines that cannot build them declare so (EngineCapabilities.ball_joints)."""
    ball_qposadr: tuple[int, ...] = ()
    """qpos address of each ball joint's quaternion (w, x, y, z)."""
    geom_world_friction: np.ndarray | None = None
    """Sliding friction of each geom's contacts with the world as MuJoCo combines it (priority,
    pairs, condim 1: crosssim.contacts); NaN for a geom that never touches the world."""

    @property
    def joint_count(self) -> int:
        return len(self.joint_names)

    @property
    def actuator_count(self) -> int:
        return len(self.actuator_names)

    @property
    def total_mass(self) -> float:
        return float(self.body_mass.sum())

    def joint_index(self, name: str) -> int:
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise CrossSimError(
                f"joint {name!r} is not in {self.path.name}; its joints are {list(self.joint_names)}"
            ) from None


def load_mujoco_model(path: Path):
    """A fresh MjModel of the MJCF/URDF file at ``path`` (the caller may change it)."""
    import copy

    files = check_model_files(path)  # before MuJoCo allocates what the file asks for
    stat = Path(path).stat()
    # A harness, its observation check and its task each read the scene: parse (meshes: 1.2-3.5 s
    # for the G1) once per file version, hand out copies; across processes and runs, a scene with
    # meshes loads its compiled model from crosssim.model_cache.
    return copy.copy(_parsed(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size, tuple(files.assets),
                             tuple(files.includes)))


@functools.lru_cache(maxsize=8)
def _parsed(path: str, mtime_ns: int, size: int, assets: tuple = (), includes: tuple = ()):
    import mujoco

    route_mujoco_log()

    from crosssim import model_cache

    cached, key = model_cache.load_cached(Path(path), list(assets), list(includes))
    if cached is not None:
        return cached
    try:
        model = mujoco.MjModel.from_xml_path(path)
    except ValueError as exc:  # mujoco reports parse errors as ValueError
        detail = " ".join(str(exc).split())  # MuJoCo's message spans lines; keep one
        raise CrossSimError(f"MuJoCo cannot compile {path}: {detail}") from None
    model_cache.store(model, key)
    return model


@functools.lru_cache(maxsize=32)
def canonical_model(path: Path) -> CanonicalModel:
    """Read the canonical physical parameters of an MJCF scene (cached per path)."""
    return canonical_from_mj(load_mujoco_model(Path(path)), Path(path))


def canonical_from_mj(m, path: Path) -> CanonicalModel:
    """The canonical parameters of an already compiled ``MjModel`` of scene ``path`` (e.g. one
    with a variant applied: engines audit against the model they were built from)."""
    import mujoco

    route_mujoco_log()

    name = lambda obj, i: element_name(m, obj, i)  # noqa: E731
    types = {int(mujoco.mjtJoint.mjJNT_HINGE): "hinge", int(mujoco.mjtJoint.mjJNT_SLIDE): "slide"}
    free, ball = int(mujoco.mjtJoint.mjJNT_FREE), int(mujoco.mjtJoint.mjJNT_BALL)
    # A ball joint of the root body is part of the base (as a free joint is): its orientation is
    # the base's. Elsewhere, joints are hinges and slides (one coordinate each: policy joints).
    balls = [j for j in range(m.njnt) if int(m.jnt_type[j]) == ball]
    for j in balls:
        if int(m.jnt_bodyid[j]) != 1:
            raise CrossSimError(f"{path}: joint {name(mujoco.mjtObj.mjOBJ_JOINT, j)} is a ball joint below the root "
                                "body; crosssim supports ball joints only in the base (the first body's joints)")
    joints = [j for j in range(m.njnt) if int(m.jnt_type[j]) not in (free, ball)]
    # A free joint is the base's on the first body; elsewhere it floats an object under the world
    # (Fetch's block: crosssim.engines.features.free_objects), never a body inside a tree.
    for j in range(m.njnt):
        b = int(m.jnt_bodyid[j])
        if int(m.jnt_type[j]) == free and b != 1 and int(m.body_parentid[b]) != 0:
            raise CrossSimError(f"{path}: joint {name(mujoco.mjtObj.mjOBJ_JOINT, j)} is a free joint of a body inside "
                                "a tree; crosssim supports free joints on bodies under the world only")
    free_base = any(int(m.jnt_type[j]) == free and int(m.jnt_bodyid[j]) == 1 for j in range(m.njnt))
    bodies = range(1, m.nbody)
    jidx = {j: k for k, j in enumerate(joints)}
    act_joint = []
    for a in range(m.nu):
        if int(m.actuator_trntype[a]) != int(mujoco.mjtTrn.mjTRN_JOINT):
            raise CrossSimError(f"{path}: actuator {a} does not drive a joint directly; not supported")
        if int(m.actuator_trnid[a, 0]) not in jidx:
            raise CrossSimError(f"{path}: actuator {name(mujoco.mjtObj.mjOBJ_ACTUATOR, a)} drives a free or ball "
                                "joint; crosssim drives hinge and slide joints only")
        act_joint.append(jidx[int(m.actuator_trnid[a, 0])])
    # A position actuator has gainprm[0] = kp and biasprm = [0, -kp, -kv]; a motor has bias 0.
    kp = np.where(m.actuator_biastype == int(mujoco.mjtBias.mjBIAS_AFFINE), -m.actuator_biasprm[:, 1], 0.0)
    kv = np.where(m.actuator_biastype == int(mujoco.mjtBias.mjBIAS_AFFINE), -m.actuator_biasprm[:, 2], 0.0)
    keyframes = {}
    for k in range(m.nkey):
        keyframes[name(mujoco.mjtObj.mjOBJ_KEY, k)] = m.key_qpos[k].copy()
    return CanonicalModel(
        path=Path(path),
        timestep=float(m.opt.timestep),
        gravity=m.opt.gravity.copy(),
        integrator=int(m.opt.integrator),
        nq=int(m.nq),
        nv=int(m.nv),
        free_base=free_base,
        root_body=name(mujoco.mjtObj.mjOBJ_BODY, 1),
        body_names=tuple(name(mujoco.mjtObj.mjOBJ_BODY, b) for b in bodies),
        body_mass=m.body_mass[1:].copy(),
        body_inertia=m.body_inertia[1:].copy(),
        body_ipos=m.body_ipos[1:].copy(),
        body_iquat=m.body_iquat[1:].copy(),
        joint_names=tuple(name(mujoco.mjtObj.mjOBJ_JOINT, j) for j in joints),
        joint_type=tuple(types[int(m.jnt_type[j])] for j in joints),
        joint_qposadr=np.array([m.jnt_qposadr[j] for j in joints], dtype=int),
        joint_dofadr=np.array([m.jnt_dofadr[j] for j in joints], dtype=int),
        joint_limited=np.array([bool(m.jnt_limited[j]) for j in joints]),
        joint_range=np.array([m.jnt_range[j] for j in joints]).reshape(-1, 2),
        joint_damping=np.array([m.dof_damping[m.jnt_dofadr[j]] for j in joints]),
        joint_armature=np.array([m.dof_armature[m.jnt_dofadr[j]] for j in joints]),
        joint_frictionloss=np.array([m.dof_frictionloss[m.jnt_dofadr[j]] for j in joints]),
        joint_stiffness=np.array([m.jnt_stiffness[j] for j in joints]),
        joint_springref=np.array([m.qpos_spring[m.jnt_qposadr[j]] for j in joints]),
        geom_body=tuple(name(mujoco.mjtObj.mjOBJ_BODY, int(m.geom_bodyid[g])) if m.geom_bodyid[g] else "world" for g in range(m.ngeom)),
        geom_friction=m.geom_friction.copy(),
        geom_collides=(m.geom_contype != 0) | (m.geom_conaffinity != 0),
        actuator_names=tuple(name(mujoco.mjtObj.mjOBJ_ACTUATOR, a) for a in range(m.nu)),
        actuator_joint=np.array(act_joint, dtype=int),
        actuator_gear=m.actuator_gear[:, 0].copy(),
        actuator_ctrlrange=m.actuator_ctrlrange.copy(),
        actuator_ctrllimited=m.actuator_ctrllimited.astype(bool).copy(),
        actuator_kp=kp.copy(),
        actuator_kv=kv.copy(),
        actuator_forcerange=m.actuator_forcerange.copy(),
        actuator_forcelimited=m.actuator_forcelimited.astype(bool).copy(),
        qpos0=m.qpos0.copy(),
        keyframes=keyframes,
        ball_joints=tuple(name(mujoco.mjtObj.mjOBJ_JOINT, j) for j in balls),
        ball_qposadr=tuple(int(m.jnt_qposadr[j]) for j in balls),
        geom_world_friction=geom_world_friction(m),
    )


def element_name(m, obj, i: int) -> str:
    """The name of element ``i`` of MuJoCo object type ``obj`` (a ``mujoco.mjtObj``): its own, or for
    an unnamed element ``<kind>_<id>`` (``joint_0``, ``body_3``, ``pair_1``), MuJoCo's id in the compiled
    model. Every adapter and the audit name elements through this one function, so an unnamed joint
    (humanoid-gym's XBot-L base) is the same joint everywhere. A synthesised name that an element of
    the same kind already carries gets ``#`` appended until it is free."""
    import mujoco

    route_mujoco_log()

    own = mujoco.mj_id2name(m, obj, i)
    if own is not None:
        return own
    kind = mujoco.mju_type2Str(int(obj)) or "element"
    name = f"{kind}_{i}"
    while mujoco.mj_name2id(m, obj, name) >= 0:
        name += "#"
    return name


def write_mesh_obj(m, mesh: int, folder: Path) -> Path:
    """Mesh ``mesh`` of MjModel ``m`` as a Wavefront OBJ in ``folder`` (vertices as MuJoCo compiled
    them, in the mesh frame), for engines that load meshes from files; written once per folder."""
    path = folder / f"mesh{mesh}.obj"
    if not path.exists():
        v0, nv = m.mesh_vertadr[mesh], m.mesh_vertnum[mesh]
        f0, nf = m.mesh_faceadr[mesh], m.mesh_facenum[mesh]
        # One %-format over the whole array (in C): the G1's 20 meshes took 2.2 s as a Python loop.
        verts = ("v %.9g %.9g %.9g\n" * int(nv)) % tuple(np.asarray(m.mesh_vert[v0:v0 + nv], float).ravel().tolist())
        faces = ("f %d %d %d\n" * int(nf)) % tuple((np.asarray(m.mesh_face[f0:f0 + nf]) + 1).ravel().tolist())
        path.write_text(verts + faces)
    return path
