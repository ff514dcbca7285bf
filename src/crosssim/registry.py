"""One way to extend crosssim: a built-in table per kind, extended by entry points.

Engines, tasks, observation terms, policy loaders and perturbations are each a table from a name
to an object. crosssim lists its own entries in code; an installed distribution adds entries, or
replaces one of the same name, through the entry-point group of that kind (``crosssim.tasks``,
...; docs/extending.md). A plugin is imported only when one of its entries is asked for.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

from crosssim.errors import CrossSimError


def plugin_targets(group: str) -> dict[str, str]:
    """``name -> "module:attr"`` for every entry point of ``group`` in the installed distributions.

    Where two distributions register one name, the one found first on ``sys.path`` wins, as an
    import would.
    """
    return dict(_plugin_targets(group, tuple(sys.path)))


@functools.lru_cache(maxsize=64)
def _plugin_targets(group: str, path: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    # Scanning every distribution costs ~20 ms; the answer changes only with sys.path.
    from importlib.metadata import entry_points

    found: dict[str, str] = {}
    for ep in entry_points(group=group):
        found.setdefault(ep.name, ep.value)
    return tuple(found.items())


def import_target(target: str) -> Any:
    """The object ``"package.module:attr"`` names (attr may be dotted). ImportError and
    AttributeError pass through: the caller knows what to tell the user."""
    module_name, _, attr = target.partition(":")
    obj = importlib.import_module(module_name.strip())
    for part in attr.strip().split(".") if attr.strip() else ():
        obj = getattr(obj, part)
    return obj


class Registry:
    """One kind of extension: built-in entries, then the plugins of entry-point group ``group``.

    A built-in entry is either the object itself or a ``"module:attr"`` string imported on first
    use (engines, whose modules import heavy libraries); a plugin entry is always such a string.
    ``missing(name, target, exc)`` is the error for an entry whose module cannot be imported
    (engines: EngineUnavailable with the install hint); by default a CrossSimError naming it.
    """

    def __init__(self, kind: str, group: str, builtins: Mapping[str, Any], *,
                 missing: Callable[[str, str, ImportError], Exception] | None = None):
        self.kind, self.group, self.builtins, self.missing = kind, group, dict(builtins), missing

    def targets(self) -> dict[str, Any]:
        """Every entry by name, unloaded: built-ins first, plugins replacing any of the same name."""
        return {**self.builtins, **plugin_targets(self.group)}

    def names(self) -> list[str]:
        return sorted(self.targets())

    def __contains__(self, name: object) -> bool:
        return name in self.targets()

    def load(self, name: str) -> Any:
        """The entry ``name``; CrossSimError naming the known entries, or the plugin that fails to import."""
        targets = self.targets()
        if name not in targets:
            near = difflib.get_close_matches(str(name), list(targets), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise CrossSimError(f"unknown {self.kind} {name!r}{hint}; known: {', '.join(sorted(targets))}")
        target = targets[name]
        if not isinstance(target, str):
            return target
        try:
            return import_target(target)
        except ImportError as exc:
            if self.missing is None:
                raise self._cannot_load(name, target, exc) from None
            raise self.missing(name, target, exc) from None
        except AttributeError as exc:
            raise self._cannot_load(name, target, exc) from None

    def _cannot_load(self, name: str, target: str, exc: Exception) -> CrossSimError:
        source = "built-in" if self.builtins.get(name) == target else f"entry point in group {self.group!r}"
        return CrossSimError(f"{self.kind} {name!r} = {target} ({source}) cannot be loaded: {exc}")

    def load_all(self) -> dict[str, Any]:
        """Every entry, loaded, by name (sorted)."""
        return {name: self.load(name) for name in self.names()}
