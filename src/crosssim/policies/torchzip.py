"""Plain tensor state dicts saved by ``torch.save`` (its zip format) read as numpy arrays, without
importing torch.

Importing torch costs 1-3 s per process, and the SB3 loader only needs a handful of weight
matrices, which it multiplies in numpy anyway. The reader accepts exactly what a state dict of
CPU tensors pickles to: an (Ordered)dict of str -> tensor, each tensor rebuilt by
``torch._utils._rebuild_tensor_v2`` from a storage of one of the plain dtypes below, little-endian.
The pickle is read by an Unpickler whose ``find_class`` hands out only those few names (no
other callable can run); anything else raises :class:`Unsupported`, and the caller falls back
to ``torch.load(weights_only=True)``, which decides as before. Equality with torch.load is
tested on every SB3 zip in the repository (tests/test_torchzip.py).
"""

from __future__ import annotations

import collections
import io
import pickle
import zipfile

import numpy as np

from crosssim.policies.limits import read_member

_DTYPES = {"FloatStorage": "<f4", "DoubleStorage": "<f8", "HalfStorage": "<f2", "LongStorage": "<i8",
           "IntStorage": "<i4", "ShortStorage": "<i2", "CharStorage": "i1", "ByteStorage": "u1", "BoolStorage": "?"}


class Unsupported(Exception):
    """Not a plain tensor state dict this reader knows (the caller uses torch.load). A storage saved
    from a GPU (location "cuda:0") is read like a CPU one, as map_location="cpu" does."""


def _int_tuple(x, what: str) -> tuple[int, ...]:
    if not isinstance(x, tuple) or not all(type(v) is int and v >= 0 for v in x):
        raise Unsupported(what)
    return x


def _rebuild_tensor(storage, offset, size, stride, requires_grad, hooks, metadata=None):
    if not isinstance(storage, np.ndarray) or type(offset) is not int or offset < 0 or hooks or \
            not isinstance(requires_grad, bool):
        raise Unsupported("tensor arguments")
    size, stride = _int_tuple(size, "tensor size"), _int_tuple(stride, "tensor stride")
    if len(size) != len(stride):
        raise Unsupported("tensor stride")
    if 0 in size:
        return np.zeros(size, dtype=storage.dtype)
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= storage.size or int(np.prod(size)) > storage.size:  # a state dict never expands a storage
        raise Unsupported("tensor outside its storage")
    view = np.lib.stride_tricks.as_strided(storage[offset:], shape=size,
                                           strides=tuple(s * storage.itemsize for s in stride), writeable=False)
    return np.array(view)


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, read_storage):
        super().__init__(io.BytesIO(data))
        self._read_storage = read_storage

    def find_class(self, module, name):
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuild_tensor
        if module == "torch" and name in _DTYPES:
            return ("storage type", name)  # a tuple: pickle's BUILD cannot set attributes on it
        raise Unsupported(f"{module}.{name}")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and type(pid[1]) is tuple and len(pid[1]) == 2 and pid[1][0] == "storage type"
                and pid[1][1] in _DTYPES and type(pid[2]) is str and type(pid[3]) is str and type(pid[4]) is int):
            raise Unsupported("storage reference")
        return self._read_storage(pid[2], np.dtype(_DTYPES[pid[1][1]]), pid[4])


def storage_reader(zf: zipfile.ZipFile, prefix: str, path):
    """``read_storage(key, dtype, numel)`` for the Unpickler: member ``<prefix>data/<key>`` as a
    flat array, read once, its size and dtype checked."""
    names = set(zf.namelist())
    storages: dict[str, np.ndarray] = {}

    def read_storage(key: str, dtype: np.dtype, numel: int) -> np.ndarray:
        if key not in storages:
            member = f"{prefix}data/{key}"
            if member not in names:
                raise Unsupported("missing storage")
            buf = read_member(zf, member, path)
            if len(buf) != numel * dtype.itemsize:
                raise Unsupported("storage size")
            storages[key] = np.frombuffer(buf, dtype=dtype)
        if storages[key].dtype != dtype:
            raise Unsupported("storage dtype")
        return storages[key]
    return read_storage


def read_state_dict(raw: bytes, path) -> dict[str, np.ndarray]:
    """The state dict in ``raw`` (a torch.save zip) as numpy arrays; Unsupported when it is
    anything else. Members are read under crosssim.policies.limits (the caller checked the archive)."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(raw))
    except zipfile.BadZipFile:
        raise Unsupported("not a zip") from None
    with zf:
        pickles = [n for n in zf.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(pickles) != 1:
            raise Unsupported("no single data.pkl")
        prefix = pickles[0][: -len("data.pkl")]
        if f"{prefix}byteorder" in set(zf.namelist()) and \
                read_member(zf, f"{prefix}byteorder", path).strip() != b"little":
            raise Unsupported("byte order")
        read_storage = storage_reader(zf, prefix, path)
        try:
            state = _Unpickler(read_member(zf, pickles[0], path), read_storage).load()
        except Unsupported:
            raise
        except Exception as exc:  # a damaged pickle: let torch.load word the error
            raise Unsupported(type(exc).__name__) from None
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, np.ndarray)
                                              for k, v in state.items()):
        raise Unsupported("not a state dict of tensors")
    return state
