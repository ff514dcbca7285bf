"""An RL-Zoo agent folder (``<algo>/<Env>-vN_1/``) -> a gymnasium-task card.

Read: ``args.yml`` (algo, env), ``config.yml`` (normalize, env_wrapper, frame_stack),
``env_kwargs.yml``, ``vecnormalize.pkl`` (through an allow-list unpickler: statistics only) and
the model zip beside the folder. The zoo's YAML files are written by PyYAML's full dumper
(``!!python/object/apply:collections.OrderedDict``); that one tag is read as a mapping and every
other python tag is refused. The gymnasium task version is chosen explicitly: mujoco-py ``-v2``
/ ``-v3`` agents run on crosssim's ``-v4`` (their observation layout), ``-v4`` / ``-v5`` on the same.
"""

from __future__ import annotations

import ast
from pathlib import Path

from crosssim.errors import CardError, CrossSimError
from crosssim.importers.common import Imported
from crosssim.strictload import StrictLoader

TIME_FEATURE = "TimeFeatureWrapper"
"""sb3_contrib's wrapper that appends 1 - t / max_steps: crosssim's ``time_feature`` term."""
VERSION_FOR = {"v1": "v4", "v2": "v4", "v3": "v4", "v4": "v4", "v5": "v5"}
"""Gym environment version -> crosssim task version with the same observation layout."""


class ZooLoader(StrictLoader):
    """StrictLoader that also reads RL-Zoo's ``!!python/object/apply:collections.OrderedDict``
    (a list of [key, value] pairs) as a plain mapping; any other python tag stays an error."""

    def construct_ordered_dict(self, node):
        import yaml

        if not isinstance(node, yaml.SequenceNode) or len(node.value) != 1:
            raise yaml.constructor.ConstructorError(None, None, "an OrderedDict takes one list of pairs",
                                                    node.start_mark)
        pairs = self.construct_sequence(node.value[0], deep=True)
        out = {}
        for pair in pairs:
            if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[0], str) or pair[0] in out:
                raise yaml.constructor.ConstructorError(None, None, f"bad or repeated entry {pair!r:.60}",
                                                        node.start_mark)
            out[pair[0]] = pair[1]
        return out


ZooLoader.add_constructor("tag:yaml.org,2002:python/object/apply:collections.OrderedDict",
                          ZooLoader.construct_ordered_dict)


def _yaml(path: Path, what: str) -> dict:
    from crosssim.strictload import load_yaml

    try:
        doc = load_yaml(path, what=what, loader=ZooLoader)
    except CrossSimError as exc:
        raise CardError(str(exc)) from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise CardError(f"{path}: expected a mapping, got {type(doc).__name__}")
    return doc


def _config_folder(source: Path) -> Path:
    if source.is_file():
        source = source.parent
    if (source / "config.yml").is_file():
        return source
    found = sorted(p.parent for p in source.glob("*/config.yml"))
    if len(found) == 1:
        return found[0]
    raise CardError(f"{source}: not an RL-Zoo agent folder (no config.yml in it or in one folder below it)")


def _literal(value, path: Path, key: str):
    """config.yml stores some values as Python source text (``"{'norm_obs': True}"``): read literals only."""
    if not isinstance(value, str):
        return value
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return value


def _wrappers(value) -> list[tuple[str, dict]]:
    """env_wrapper as (class path, kwargs) pairs: a string, a mapping, or a list of either."""
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if isinstance(item, str):
            out.append((item, {}))
        elif isinstance(item, dict):
            out += [(str(k), v if isinstance(v, dict) else {}) for k, v in item.items()]
    return out


def read_rlzoo(source: Path, *, policy: Path | None = None, robot: Path | None = None) -> Imported:
    """A card from an RL-Zoo agent: its folder, the folder holding config.yml, a file in it, or the
    model zip beside it (then that zip is the policy)."""
    if source.suffix == ".zip" and policy is None:
        policy = source
    folder = _config_folder(source)
    out = Imported({}, folder, "rlzoo")
    args = _yaml(folder / "args.yml", "args.yml") if (folder / "args.yml").is_file() else {}
    config = _yaml(folder / "config.yml", "config.yml")
    env = args.get("env") or folder.name
    algo = str(args.get("algo") or folder.parent.parent.name).lower()
    task = _task_for(env, folder)
    task_options = _task_options(folder, args, env, task, out)
    weights = policy or _weights(folder, env, out)
    base = env.rsplit("-", 1)[0]
    card: dict = {"name": f"zoo-{algo}-{base}", "task": task}
    if task_options:
        card["task_options"] = task_options
    card["policy"] = {"file": str(Path(weights).resolve()), "format": "sb3", "algo": algo}
    observation = _observation(folder, config, out)
    if observation:
        card["observation"] = observation
    period = _control_period(task, task_options)
    if period:
        card["control_period"] = period
    card["trained_in"] = "mujoco"
    card["training"] = {"source": "rl-zoo", "env": env, "algo": algo}
    out.card = card
    out.note("claimed: the zoo's evaluations.npz returns are not carried over; add claimed.return for the "
             "harness check")
    return out


def _task_for(env, folder: Path) -> str:
    """The crosssim task for gym id ``env`` (args.yml's), with the same observation layout."""
    if not isinstance(env, str) or "-v" not in env:
        raise CardError(f"{folder / 'args.yml'}: field 'env' is {env!r:.40}; expected a gym id such as Hopper-v3")
    base, version = env.rsplit("-", 1)
    task_version = VERSION_FOR.get(version)
    if task_version is None:
        raise CardError(f"{folder / 'args.yml'}: env {env}: version {version} has no crosssim task version")
    task = f"{base}-{task_version}"
    from crosssim.tasks import task_class

    try:
        task_class(task)
    except CrossSimError as exc:
        raise CardError(f"{folder / 'args.yml'}: env {env} -> task {task}: {exc}") from None
    return task


def _task_options(folder: Path, args: dict, env: str, task: str, out: Imported) -> dict:
    """The card's task_options from the env id and its env_kwargs (env_kwargs.yml, then args.yml's
    ``--env-kwargs``); what has no crosssim counterpart becomes a blocking note on ``out``."""
    base, version = env.rsplit("-", 1)
    task_options: dict = {}
    if task != env:
        out.note(f"env {env} (mujoco-py): run as crosssim's {task} (the same observation layout; MuJoCo's current "
                 "physics, not mujoco-py's)")
    if base == "Ant" and version in ("v2", "v3"):
        task_options["contact_forces"] = "zeroed"  # mujoco-py 2 left Ant's contact forces at zero
        out.note(f"env {env}: its 84 contact-force values were zeros under mujoco-py 2; task_options.contact_forces: "
                 "zeroed")
    env_kwargs = {}
    if (folder / "env_kwargs.yml").is_file():
        env_kwargs = _yaml(folder / "env_kwargs.yml", "env_kwargs.yml")
    from_args = _literal(args.get("env_kwargs"), folder, "env_kwargs")  # `--env-kwargs` given at training
    if isinstance(from_args, dict):
        env_kwargs = {**from_args, **env_kwargs}
    for key, value in env_kwargs.items():
        if key == "use_contact_forces" and base == "Ant":
            task_options["contact_forces"] = "on" if value else "off"
        else:
            out.note(f"env_kwargs.{key}: {value!r:.40} is not a crosssim task option; the task runs gymnasium's "
                     "default", blocking=True)
    return task_options


def _observation(folder: Path, config: dict, out: Imported) -> dict:
    """The card's observation section from config.yml: the time feature wrapper and the
    VecNormalize statistics; other wrappers and frame stacking become blocking notes on ``out``."""
    observation: dict = {}
    wrapper = config.get("env_wrapper")
    wrappers = _wrappers(_literal(wrapper, folder, "env_wrapper")) if wrapper else []
    for name, kwargs in wrappers:
        if name.rsplit(".", 1)[-1] == TIME_FEATURE:
            feature = {"name": "time_feature"}
            unknown = set(kwargs) - {"max_steps", "test_mode"}
            feature.update({k: kwargs[k] for k in ("max_steps", "test_mode") if k in kwargs})
            for k in sorted(unknown):
                out.note(f"env_wrapper {TIME_FEATURE}.{k}: not an option of the time_feature term", blocking=True)
            observation["terms"] = ["task_observation", feature]
        else:
            out.note(f"env_wrapper {name}: crosssim has no counterpart; the policy's input or actions may differ",
                     blocking=True)
    if config.get("frame_stack"):
        out.note(f"frame_stack {config['frame_stack']}: VecFrameStack stacks normalised frames; a card normalises "
                 "after stacking (not imported)", blocking=True)
    normalize = _literal(config.get("normalize"), folder, "normalize")
    norm_obs = bool(normalize.get("norm_obs", True)) if isinstance(normalize, dict) else bool(normalize)
    if norm_obs:
        pkl = folder / "vecnormalize.pkl"
        if not pkl.is_file():
            out.note(f"config.yml says normalize but {pkl.name} is missing: the observation is not normalised "
                     "as in training", blocking=True)
        else:
            from crosssim.importers.vecnormalize import read_vecnormalize

            stats = read_vecnormalize(pkl)
            if stats["norm_obs"]:
                observation["normalize"] = {k: stats[k] for k in ("mean", "var", "clip", "epsilon")}
    return observation


def _weights(folder: Path, env: str, out: Imported) -> Path:
    candidates = [folder.parent / f"{env}.zip", folder / f"{env}.zip", folder.parent / "best_model.zip"]
    found = [p for p in candidates if p.is_file()]
    if not found:
        raise CardError(f"{folder}: no {env}.zip or best_model.zip beside it; pass --policy FILE")
    if found[0].name != "best_model.zip" and (folder.parent / "best_model.zip").is_file():
        out.note(f"best_model.zip is also there; the card uses {found[0].name} (pass --policy for the other)")
    return found[0]


def _control_period(task: str, options: dict) -> float | None:
    """The task's control period [s] (frame skip x the scene's timestep), as cards state it."""
    from crosssim.scene import canonical_model, resolve_scene
    from crosssim.tasks import make_task

    try:
        t = make_task(task, **options)
        return round(t.frame_skip * canonical_model(resolve_scene(t.scene)).timestep, 12)
    except CrossSimError:
        return None
