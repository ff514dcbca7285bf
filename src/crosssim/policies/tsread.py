"""A TorchScript archive's module tree and tensors, read as data: nothing of the archive runs.

``torch.jit.load`` compiles the archive's code and may run a scripted ``__setstate__``; it is
called only inside crosssim's policy sandbox (crosssim.policies.sandbox). Outside it, crosssim
needs only the weights of nets it can rebuild itself (crosssim.policies.chain): this module
reads ``data.pkl`` with an Unpickler whose ``find_class`` hands out inert stand-ins for the
archive's own ``__torch__`` classes and torch's tensor-rebuild functions (as
crosssim.policies.torchzip does for state dicts), and nothing else. Member names are checked as
the TorchScript allow-list checks them (crosssim.policies.tscheck) before anything is read.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path


from crosssim.errors import PolicyLoadError
from crosssim.policies.limits import check_file_size
from crosssim.policies.torchzip import Unsupported, _Unpickler, storage_reader


class ScriptObject:
    """One object of the archive (a module, usually): its class name and its attributes in the
    order the archive stores them (registration order: parameters, buffers, submodules)."""

    qualname = ""
    """The archive's class name, e.g. ``__torch__.torch.nn.modules.linear.___torch_mangle_1.Linear``."""
    state: dict = {}  # replaced, never mutated: pickle's BUILD gives each object its own
    """Attribute -> ScriptObject, numpy array (a tensor) or plain value; empty when the archive
    stores a state that is not a mapping (a scripted ``__getstate__``): such a module is opaque."""

    @property
    def kind(self) -> str:
        """The class's own name (``Linear``, ``Sequential``, a user class)."""
        return self.qualname.rsplit(".", 1)[-1]

    def __setstate__(self, state) -> None:  # pickle's BUILD: stored, never interpreted as code
        self.state = dict(state) if isinstance(state, dict) else {}


_CLASSES: dict[str, type] = {}


def _script_class(qualname: str) -> type:
    """An inert subclass of ScriptObject per archive class name (pickle's NEWOBJ needs a type)."""
    if qualname not in _CLASSES:
        if len(_CLASSES) > 10_000:
            raise Unsupported("too many classes")
        _CLASSES[qualname] = type("ScriptObject", (ScriptObject,), {"qualname": qualname})
    return _CLASSES[qualname]


def _as_list(values):
    return list(values)


class _ScriptUnpickler(_Unpickler):
    _JIT = {"build_intlist": _as_list, "build_doublelist": _as_list, "build_boollist": _as_list,
            "build_tensorlist": _as_list, "restore_type_tag": lambda value, tag: value}

    def find_class(self, module, name):
        if module == "__torch__" or module.startswith("__torch__."):
            return _script_class(f"{module}.{name}")
        if module == "torch.jit._pickle" and name in self._JIT:
            return self._JIT[name]
        if (module, name) == ("torch", "device"):
            return str
        return super().find_class(module, name)


def read_module(path: Path, *, source: bytes | None = None) -> ScriptObject:
    """The archive's top module, with its tensors as numpy arrays. PolicyLoadError (one line)
    for anything that is not a TorchScript archive this reader knows; runs nothing from it."""
    from crosssim.policies.tscheck import read_members

    path = Path(path)
    if source is None:
        check_file_size(path)
    try:
        with zipfile.ZipFile(path if source is None else io.BytesIO(source)) as zf:
            members = read_members(zf, path)
            pickle = next((n for n in members if n.endswith("/data.pkl") and n.count("/") == 1), None)
            if pickle is None:
                raise PolicyLoadError(f"{path}: not a TorchScript file (no data.pkl inside)")
            prefix = pickle[: -len("data.pkl")]
            read_storage = storage_reader(zf, prefix, path)

            top = _ScriptUnpickler(members[pickle], read_storage).load()
    except zipfile.BadZipFile as exc:
        raise PolicyLoadError(f"{path}: not a TorchScript file (not a zip archive: {exc})") from None
    except OSError as exc:
        raise PolicyLoadError(f"{path}: cannot read the file ({exc})") from None
    except (Unsupported, Exception) as exc:
        if isinstance(exc, PolicyLoadError):
            raise
        raise PolicyLoadError(f"{path}: its data.pkl is not a TorchScript module crosssim can read as data "
                              f"({type(exc).__name__}: {str(exc)[:100]})") from None
    if not isinstance(top, ScriptObject):
        raise PolicyLoadError(f"{path}: its data.pkl holds no TorchScript module")
    return top
