"""TorchScript archives checked against an allow-list before ``torch.jit.load`` sees them.

A TorchScript file is a program: ``torch.jit.load`` compiles the Python-syntax source stored
under ``code/`` and runs the module's ``__setstate__`` while loading; the forward runs at every
step. The source can call any operator torch registers, ``torch.from_file(path, shared=True)``
(read and write any file) among them. This module reads that source with Python's ``ast``
(never executing it) and accepts only operators a control policy needs: linear layers,
recurrent cells, activations, elementwise math, reductions, indexing, reshaping, tensor creation
without file arguments, and the list/tuple/int builtins TorchScript's printer emits. The
pickles beside the code (``data.pkl``, ``constants.pkl``, debug tables) are read opcode by
opcode with ``pickletools`` and may name only tensor-rebuilding functions and the archive's own
classes; nothing is unpickled. Anything else is refused with one line naming the operator and
the member that calls it.
"""

from __future__ import annotations

import ast
import functools
import io
import pickletools
import re
import zipfile
from pathlib import Path

from crosssim.errors import PolicyLoadError
from crosssim.policies.limits import check_archive, check_file_size, read_member

# aten operators (printed ``torch.<name>`` or ``ops.aten.<name>``). In-place variants of
# allowed math are fine: they only touch tensors the module owns.
_MATH = """add sub mul div neg abs exp expm1 log log1p log2 log10 sqrt rsqrt pow square reciprocal sign
    sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh atanh sigmoid erf erfc floor ceil round
    trunc frac remainder fmod floor_divide floordiv clamp clamp_min clamp_max clip minimum maximum fmin fmax
    where lerp addmm addmv addcmul addcdiv rsub true_divide mul_ add_ sub_ div_ neg_ clamp_ clamp_min_
    clamp_max_ sigmoid_ tanh_ exp_ mean sum prod max min amax amin argmax argmin norm std var logsumexp
    cumsum any all isnan isinf isfinite nan_to_num eq ne lt le gt ge logical_and logical_or logical_not
    logical_xor bitwise_not __and__ __or__ __xor__ __not__ __is__ __isnot__ __contains__ __getitem__
    __range_length __derive_index neg mm matmul bmm linear dot mv outer einsum baddbmm"""
_NN = """relu relu_ relu6 hardtanh hardtanh_ elu elu_ selu selu_ celu celu_ leaky_relu leaky_relu_ gelu silu
    silu_ mish mish_ softplus softsign tanhshrink hardsigmoid hardsigmoid_ hardswish hardswish_ prelu
    threshold threshold_ glu logsigmoid log_sigmoid softmax log_softmax _softmax layer_norm group_norm
    batch_norm instance_norm dropout dropout_ feature_dropout alpha_dropout conv1d conv2d
    _convolution convolution avg_pool1d max_pool1d adaptive_avg_pool1d lstm gru rnn_tanh rnn_relu
    lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell embedding normalize"""
_SHAPE = """cat concat stack hstack vstack reshape view flatten unflatten unsqueeze squeeze permute transpose t
    contiguous expand expand_as repeat select slice index index_select narrow chunk split unbind gather
    masked_fill masked_fill_ size dim numel len to type_as detach clone copy_ zero_ fill_ float double
    int long bool zeros ones full zeros_like ones_like full_like tensor scalar_tensor
    arange linspace eye flip roll tril triu diag topk sort movedim swapaxes view_as reshape_as
    index_put_ index_put index_fill_ scatter scatter_ scatter_add tile broadcast_to"""
_BUILTIN = """format list append extend insert pop clear keys values items get dict tuple str warn
    Int Float Bool ScalarImplicit IntImplicit FloatImplicit device dtype is_floating_point
    requires_grad_ __interpolate _set_item __isinstance"""
ALLOWED_OPS = frozenset((_MATH + " " + _NN + " " + _SHAPE + " " + _BUILTIN).split())
"""Operators a TorchScript control policy may call (torch.<op> / ops.aten.<op>)."""

ALLOWED_PRIM = frozenset("""RaiseException device dtype layout unchecked_unwrap_optional
    min max abs data is_cuda is_cpu requires_grad shape NumToTensor TupleIndex Uninitialized
    isinstance rangelist is_nested is_sparse is_quantized is_mkldnn is_meta grad""".split())
"""``ops.prim.<op>`` calls allowed (type and shape queries, raising an exception)."""

ALLOWED_NAMES = frozenset("""int float bool str len range annotate isinstance getattr
    uninitialized min max abs round enumerate zip hasattr list tuple divmod complex""".split())
"""Bare-name calls the TorchScript printer emits (Python builtins TorchScript implements itself)."""

REFUSED_NAMES = {"print": "print (writes to the terminal)"}

CAST_TYPES = frozenset("Tensor int float bool str NoneType Device List Tuple Optional Dict".split())
"""Names an ``unchecked_cast`` target may be built from. The cast is not checked when it runs:
cast to one of the archive's classes, an object of another class reads past its slots (an
out-of-bounds read), so only the printer's own use is allowed: a local unwrapped to a plain type
(Tensor, scalars, lists), and to a Tuple only where the function tests that local against None."""

CODE_MEMBER_LIMIT = 1 << 20
"""Largest uncompressed TorchScript code member [bytes]: Python's ``ast`` needs about 700 bytes of
memory per byte of source at worst (4 MiB of ``a=1`` took 2.8 GB); a control policy's largest
code member is a few kilobytes (the G1 LSTM's rnn.py: 8 KB)."""
CODE_TOTAL_LIMIT = 2 << 20
"""Largest sum of an archive's code members [bytes]."""

_STORAGES = ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool",
             "ComplexFloat", "ComplexDouble")
ALLOWED_GLOBALS = frozenset(
    {("collections", "OrderedDict"), ("torch._utils", "_rebuild_tensor_v2"), ("torch._utils", "_rebuild_tensor"),
     ("torch", "device")}
    | {("torch", f"{t}Storage") for t in _STORAGES}
    | {("torch.jit._pickle", n) for n in ("build_intlist", "build_doublelist", "build_boollist", "build_tensorlist",
                                          "build_tensor_from_id", "restore_type_tag")})
"""Callables the archive's pickles may name, besides the archive's own ``__torch__`` classes."""


def _refuse(path: Path, member: str, what: str) -> PolicyLoadError:
    return PolicyLoadError(
        f"{path}: refused before loading: {member} {what}, which a control policy does not need "
        "(TorchScript is checked against an allow-list, docs/security.md); pass --trust-policy-code only "
        "for a file you trust")


def _dotted(node: ast.AST) -> str | None:
    """'a.b.c' for a Name/Attribute chain, None for anything else (a call result, a subscript)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


class _CodeCheck(ast.NodeVisitor):
    """Walks one code file; ``problem`` is the first refused construct, described for a user."""

    def __init__(self, defined: set[str]):
        self.defined = defined
        self.problem: str | None = None
        self.locals: set[str] = set()
        self.tested: set[str] = set()
        """Locals the function tests against None (``torch.__is__(v, None)``): Optionals."""

    def _fail(self, what: str) -> None:
        if self.problem is None:
            self.problem = what

    def visit_Import(self, node):
        for alias in node.names:
            if not alias.name.startswith("__torch__"):
                self._fail(f"imports {alias.name}")

    def visit_ImportFrom(self, node):
        self._fail(f"imports from {node.module}")

    def visit_FunctionDef(self, node):
        outer = self.locals
        # The printer calls through a local only when it holds one of the archive's functions
        # (``_57 = __torch__...._apply_permutation``). A local bound to anything else (a Tensor
        # method taken as a value: ``f = x.set_``) must not be callable, so only locals bound
        # to ``__torch__`` names, and never rebound otherwise, may be called.
        bound: dict[str, bool] = {}
        for sub in ast.walk(node):
            if isinstance(sub, ast.Assign):
                ok = (_dotted(sub.value) or "").startswith("__torch__.")
                for target in sub.targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            bound[name.id] = bound.get(name.id, True) and ok
            elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store) and sub.id not in bound:
                bound[sub.id] = False  # loop targets, augmented assignments, ...
        for arg in node.args.args + node.args.kwonlyargs:
            bound[arg.arg] = False
        self.locals = {name for name, ok in bound.items() if ok}
        outer_tested, self.tested = self.tested, {
            sub.args[0].id for sub in ast.walk(node)
            if isinstance(sub, ast.Call) and _dotted(sub.func) in ("torch.__is__", "torch.__isnot__")
            and len(sub.args) == 2 and isinstance(sub.args[0], ast.Name)
            and isinstance(sub.args[1], ast.Constant) and sub.args[1].value is None}
        self.generic_visit(node)
        self.locals, self.tested = outer, outer_tested

    def visit_Name(self, node):
        if node.id in ("torch", "ops") and isinstance(node.ctx, ast.Load):
            # Reached only for a bare use (chains are checked whole in visit_Attribute), such
            # as getattr(torch, "from_file"), which would name any operator by a string.
            self._fail(f"uses {node.id} as a value")

    def visit_Attribute(self, node):
        name = _dotted(node)
        if name is None:
            self.generic_visit(node)
            return
        root, *rest = name.split(".")
        if root == "torch":
            if len(rest) != 1:
                self._fail(f"uses {name}")
            elif rest[0] not in ALLOWED_OPS:
                self._fail(f"calls {name}")
        elif root == "ops":
            if len(rest) != 2:
                if len(rest) < 2:
                    return  # ``ops.prim`` as the prefix of a chain the parent checks
                self._fail(f"uses {name}")
            elif rest[0] == "aten":
                if rest[1] not in ALLOWED_OPS:
                    self._fail(f"calls {name}")
            elif rest[0] == "prim":
                if rest[1] not in ALLOWED_PRIM:
                    self._fail(f"calls {name}")
            else:
                self._fail(f"calls the custom operator {name}")
        elif root == "__torch__":
            if rest and rest[-1] not in self.defined and ".".join(rest) not in self.defined:
                self._fail(f"refers to {name}, which the archive does not define")
        # Other roots (self, CONSTANTS, a local) are attribute reads; method calls are checked in visit_Call.

    def _check_cast(self, node: ast.Call) -> None:
        """``unchecked_cast(T, v)``: only the printer's Optional unwrap to a plain type."""
        if len(node.args) != 2 or node.keywords:
            self._fail("calls unchecked_cast in a form torch's printer does not write")
            return
        target, value = node.args
        for sub in ast.walk(target):
            if isinstance(sub, ast.Name) and sub.id in CAST_TYPES or isinstance(
                    sub, (ast.Subscript, ast.Tuple, ast.expr_context)) or \
                    isinstance(sub, ast.Constant) and sub.value is None:
                continue
            self._fail(f"calls unchecked_cast to {_dotted(sub) or 'a computed type'} (an unchecked type pun, "
                       "which reads memory out of bounds)")
            return
        if not isinstance(value, ast.Name):
            self._fail("calls unchecked_cast on an expression (the printer casts only locals)")
        elif any(isinstance(sub, ast.Name) and sub.id == "Tuple" for sub in ast.walk(target)) \
                and value.id not in self.tested:
            # A tuple of another arity would unpack past its end: only the Optional[Tuple] unwrap.
            self._fail("calls unchecked_cast to a Tuple on a value it never tests against None (an unchecked "
                       "type pun)")

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Name) and func.id == "unchecked_cast":
            self._check_cast(node)
        elif isinstance(func, ast.Name):
            if func.id in REFUSED_NAMES:
                self._fail(f"calls {REFUSED_NAMES[func.id]}")
            elif func.id not in ALLOWED_NAMES and func.id not in self.locals:
                self._fail(f"calls {func.id}")
        elif isinstance(func, ast.Attribute):
            name = _dotted(func)
            root = name.split(".")[0] if name else None
            if root not in ("torch", "ops", "__torch__"):
                # A method call on a value: TorchScript prints builtin operators as torch.<op>,
                # so a method call is one of the archive's own classes, defined in its code. A
                # hand-written archive could define a dummy method named like a Tensor method
                # (``set_``) so that ``(t).set_(...)`` passes here but compiles to the Tensor's.
                # Any registered operator name counts (``_reshape_alias`` is in no dir() but reads
                # out of bounds), so a method name is either allowed or the archive's own non-operator.
                if func.attr in ALLOWED_OPS:
                    pass
                elif func.attr in _tensor_methods():
                    self._fail(f"calls method {func.attr}, a Tensor method outside the allow-list")
                elif func.attr not in self.defined:
                    self._fail(f"calls method {func.attr}, which the archive does not define")
        else:
            self._fail("calls a computed function")
        self.generic_visit(node)


@functools.lru_cache(1)
def _tensor_methods() -> frozenset[str]:
    import torch

    operators = {s.name.split("::", 1)[-1] for s in torch._C._jit_get_all_schemas()}
    return frozenset(dir(torch.Tensor)) | frozenset(dir(torch)) | frozenset(operators)


def _definitions(trees: dict[str, ast.Module]) -> set[str]:
    """Every class, method and function name the archive's code defines (short and qualified)."""
    names = set()
    for member, tree in trees.items():
        module = member.split("code/", 1)[-1].removesuffix(".py").replace("/", ".")
        for node in ast.walk(tree):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                names.add(node.name)
                names.add(f"{module.removeprefix('__torch__.').removeprefix('__torch__')}.{node.name}".lstrip("."))
    return names


def _pickle_globals(data: bytes):
    """(module, name) of every GLOBAL/INST/STACK_GLOBAL in a pickle, without unpickling it."""
    memo: dict[int, object] = {}
    recent: list[object] = []
    for op, arg, _ in pickletools.genops(data):
        if op.name in ("GLOBAL", "INST"):
            module, _, name = str(arg).partition(" ")
            yield module, name
            recent.append(None)
        elif op.name == "STACK_GLOBAL":
            if len(recent) < 2 or not all(isinstance(v, str) for v in recent[-2:]):
                yield "<computed>", "<computed>"
            else:
                yield recent[-2], recent[-1]
            recent.append(None)
        elif op.name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "STRING", "BINSTRING",
                         "SHORT_BINSTRING"):
            recent.append(arg)
        elif op.name in ("BINGET", "LONG_BINGET", "GET"):
            recent.append(memo.get(int(arg)))
        elif op.name in ("BINPUT", "LONG_BINPUT", "PUT"):
            memo[int(arg)] = recent[-1] if recent else None
        elif op.name == "MEMOIZE":
            memo[len(memo)] = recent[-1] if recent else None
        else:
            recent.append(None)


_MEMBER = re.compile(r"""(?x)
      data\.pkl | constants\.pkl | version | byteorder | \.data/version | \.data/serialization_id
    | (data | constants | traced_inputs)/[0-9]+ | traced_inputs\.pkl
    | code/(\w+/)*\w+\.py(\.debug_pkl)?
    | extra/[\w.-]+
    | ([\w.]+/)*""", re.ASCII)
"""What torch.jit.save writes under the archive's folder (and folder entries a repacker adds)."""


def read_members(zf: zipfile.ZipFile, path: Path) -> dict[str, bytes]:
    """The bytes of every member torch could read as code or pickle, by full name, after refusing
    any member a TorchScript archive does not have. torch's zip reader (miniz) looks members up
    case-insensitively (``code/__torch__.PY`` serves as ``code/__torch__.py``), so names are
    compared exactly, no two may differ only in case, and every name must be one torch writes."""
    infos = check_archive(zf, path)
    if not infos or "/" not in infos[0].filename:
        raise PolicyLoadError(f"{path}: not a TorchScript file torch.jit.load can read (no archive folder)")
    root = infos[0].filename.split("/", 1)[0] + "/"  # torch names the archive after its first member's folder
    seen: dict[str, str] = {}
    members: dict[str, bytes] = {}
    code_total = 0
    for info in infos:
        name = info.filename
        if not name.isascii():
            raise PolicyLoadError(f"{path}: member {name!r} has a non-ASCII name; refused")
        twin = seen.setdefault(name.lower(), name)
        if twin != name:
            raise PolicyLoadError(f"{path}: the archive holds members {twin!r} and {name!r}, which torch's zip reader "
                                  "takes for one (it ignores case); refused")
        rel = name[len(root):] if name.startswith(root) else None
        if rel is None or not _MEMBER.fullmatch(rel) or rel.endswith("/") and info.file_size:
            raise PolicyLoadError(f"{path}: member {name!r} is no part of a TorchScript archive torch.jit.save "
                                  "writes; refused (an unknown member could be read as code)")
        if rel.endswith(".py"):
            code_total += info.file_size
            if info.file_size > CODE_MEMBER_LIMIT or code_total > CODE_TOTAL_LIMIT:
                raise PolicyLoadError(f"{path}: its TorchScript code is over crosssim's limit of "
                                      f"{CODE_MEMBER_LIMIT >> 10} KiB per file and {CODE_TOTAL_LIMIT >> 10} KiB in "
                                      "all (a control policy's code is a few KiB); refused")
            members[name] = read_member(zf, name, path, limit=CODE_MEMBER_LIMIT)
        elif rel.endswith((".pkl", ".debug_pkl")):
            members[name] = read_member(zf, name, path)
    return members


def check_torchscript(path: Path, *, source: bytes | None = None) -> None:
    """Raise PolicyLoadError (one line) unless ``path`` is a TorchScript zip whose code and
    pickles use only allowed operators and callables. Reads the file (or ``source``, its bytes
    already read: the sandbox's child checks what it will load); runs nothing from it."""
    path = Path(path)
    if source is None:
        check_file_size(path)
    try:
        with zipfile.ZipFile(path if source is None else io.BytesIO(source)) as zf:
            members = read_members(zf, path)
    except zipfile.BadZipFile as exc:
        # torch.jit.load also reads a flatbuffer format that is not a zip; crosssim checks zips only.
        raise PolicyLoadError(f"{path}: not a TorchScript file torch.jit.load can read (not a zip archive: {exc})") from None
    except OSError as exc:
        raise PolicyLoadError(f"{path}: cannot read the policy file ({exc})") from None
    if not any(n.endswith("/data.pkl") and n.count("/") == 1 for n in members):
        raise PolicyLoadError(f"{path}: not a TorchScript file torch.jit.load can read (no data.pkl inside)")
    trees = {}
    for name, raw in members.items():
        if name.endswith(".py"):
            try:
                trees[name] = ast.parse(raw.decode("utf-8"), filename=name)
            except (SyntaxError, UnicodeDecodeError, ValueError, RecursionError) as exc:
                raise PolicyLoadError(f"{path}: cannot read its TorchScript code {name} ({type(exc).__name__})") from None
    defined = _definitions(trees)
    for name, tree in trees.items():
        check = _CodeCheck(defined)
        try:
            check.visit(tree)
        except RecursionError:
            check.problem = "nests code too deeply"
        if check.problem:
            raise _refuse(path, name, check.problem)
    for name, raw in members.items():
        if name.endswith((".pkl", ".debug_pkl")):
            try:
                for module, attr in _pickle_globals(raw):
                    if module == "__torch__" or module.startswith("__torch__."):
                        continue  # the archive's own TorchScript classes, checked above
                    if (module, attr) not in ALLOWED_GLOBALS:
                        raise _refuse(path, name, f"names {module}.{attr} in a pickle")
            except PolicyLoadError:
                raise
            except Exception as exc:  # pickletools raises ValueError and friends on damaged data
                raise PolicyLoadError(f"{path}: damaged pickle {name} ({type(exc).__name__}: {str(exc)[:100]})") from None

