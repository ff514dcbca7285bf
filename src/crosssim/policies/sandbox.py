"""Policy inference for untrusted files in a sandboxed child process.

The child (``python -m crosssim.policies.sandbox <format>``) imports torch / onnxruntime and
warms them up as soon as it starts (before its request arrives: ``prestart`` starts one while
the caller still builds its harness, and the next SandboxedPolicy of that format takes it),
while it may still read files; it reads the policy file into memory, runs the TorchScript
allow-list check (crosssim.policies.tscheck) on those bytes when asked, then locks itself down
before it parses a byte of the policy with torch or onnxruntime:

- **Landlock** (the ``landlock`` package; Linux >= 5.13): every filesystem access right is
  handled and none is granted, so the child can open no file at all; it keeps only the pipes it
  inherited (requests in, results out) and stderr on /dev/null.
- **seccomp** (``pyseccomp`` over libseccomp): sockets, exec, fork (threads stay allowed), ptrace,
  signals to other processes, mount/namespace/module/keyring/bpf/io_uring calls and the
  metadata changes Landlock does not cover (chmod, chown, xattrs, timestamps) fail with EPERM:
  no network, no new programs, no escape through the kernel's less-used doors.
- **rlimits**: address space (``--policy-memory-mb``), CPU seconds, no file writes, no core
  files; limits cannot be raised again (setrlimit is denied).

The parent talks to it over two pipes with length-prefixed numpy arrays and waits for each
answer with a timeout, so a policy that hangs (on the preflight's zero input, say) is killed
and reported in one line. Namespaces (``unshare``) are not used: they need unprivileged user
namespaces, which many hosts disable, and seccomp already removes the network.
"""

from __future__ import annotations

import codecs
import errno
import functools
import io
import json
import os
import select
import signal
import struct
import subprocess
import sys
import time
import weakref
from pathlib import Path

import numpy as np

from crosssim.errors import PolicyLoadError
from crosssim.policies.base import Policy
from crosssim.text import printable

MEMORY_MB = 4096
"""Default address-space limit of one policy process [MiB] (torch and onnxruntime take ~700)."""
CPU_SECONDS = 3600
"""Default CPU-time limit of one policy process, counted from its lockdown (imports excluded) [s]."""
CALL_TIMEOUT = 60.0
"""Seconds one load (with its zero-input forward) or one forward may take before the policy is
declared hung and killed."""
STARTUP_TIMEOUT = 180.0
"""Seconds the child may take to import torch / onnxruntime on a busy machine."""

ENV_MEMORY, ENV_CPU, ENV_TIMEOUT = "CROSSSIM_POLICY_MEMORY_MB", "CROSSSIM_POLICY_CPU_S", "CROSSSIM_POLICY_TIMEOUT"
ENV_DISABLE = "CROSSSIM_NO_SANDBOX"
"""Set to 1 to treat the sandbox as unavailable (untrusted TorchScript is then refused)."""


def set_memory_limit(memory_mb: int) -> None:
    """Memory limit for every policy process started from now on, here and in worker processes
    (which inherit the environment)."""
    if memory_mb < 256:
        raise PolicyLoadError(f"--policy-memory-mb must be at least 256 (torch alone needs about 700), got {memory_mb}")
    os.environ[ENV_MEMORY] = str(int(memory_mb))


def _limits() -> dict:
    def num(name, default, kind):
        try:
            return kind(os.environ.get(name, default))
        except ValueError:
            return default
    memory_mb = num(ENV_MEMORY, MEMORY_MB, int)
    hard = _hard_memory_mb()
    if hard is not None and hard < memory_mb:
        # The child cannot raise a limit the host set lower (setrlimit would fail, every policy with it).
        if "memory" not in _warned:
            _warned.add("memory")
            print(f"crosssim: warning: this host limits a process's address space to {hard} MiB (ulimit -v), below "
                  f"the policy memory limit of {memory_mb} MiB; policies run under {hard} MiB", file=sys.stderr)
        memory_mb = hard
    return {"memory_mb": memory_mb, "cpu_s": num(ENV_CPU, CPU_SECONDS, int),
            "timeout": num(ENV_TIMEOUT, CALL_TIMEOUT, float)}


def _hard_memory_mb() -> int | None:
    """The host's hard address-space limit [MiB], None when there is none."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    return None if hard == resource.RLIM_INFINITY else hard >> 20


@functools.lru_cache(1)
def unavailable() -> str | None:
    """Why the sandbox cannot be set up on this host, or None when it can."""
    if os.environ.get(ENV_DISABLE) == "1":
        return f"{ENV_DISABLE}=1 is set"
    if not sys.platform.startswith("linux"):
        return f"it needs Linux (Landlock, seccomp); this is {sys.platform}"
    try:
        import landlock
    except ImportError:
        return "the 'landlock' package is missing: pip install landlock"
    try:
        import pyseccomp  # noqa: F401
    except (ImportError, RuntimeError, OSError) as exc:
        return f"seccomp is unavailable ({exc}): pip install pyseccomp, apt install libseccomp2"
    try:
        abi = landlock.landlock_abi_version()
    except Exception as exc:  # SyscallError: kernel without Landlock, or Landlock disabled at boot
        return f"the kernel offers no Landlock ({str(exc).splitlines()[0]})"
    if abi < 1:
        return "the kernel offers no Landlock"
    return None


_warned: set[str] = set()


def open_policy(fmt: str, path: Path, *, obs_size: int, trust: bool, output: str | None = None) -> Policy:
    """The policy at ``path``: in this process when ``trust``, else in a sandboxed process.

    Untrusted TorchScript is checked against the operator allow-list first, and refused when
    the sandbox cannot be set up; untrusted ONNX then runs here (onnxruntime runs no Python),
    with one line saying so.
    """
    if trust:
        return _local(fmt, path, obs_size=obs_size, output=output, check=False)
    reason = unavailable()
    if reason is None:  # the child runs the allow-list check before it locks down: no torch import here
        return SandboxedPolicy(fmt, path, obs_size=obs_size, output=output, check=fmt == "torchscript")
    if fmt == "torchscript":  # not even checked here: the check parses hostile code, only ever locked down
        raise PolicyLoadError(f"{path}: untrusted TorchScript runs only in crosssim's sandbox, which cannot be set up "
                              f"here: {reason}; pass --trust-policy-code only for a file you trust")
    if reason not in _warned:
        _warned.add(reason)
        print(f"crosssim: warning: policy sandbox unavailable ({reason}); running {printable(str(path))} in-process",
              file=sys.stderr)
    return _local(fmt, path, obs_size=obs_size, output=output, check=True)


def _local(fmt, path, *, obs_size, output, check, source: bytes | None = None) -> Policy:
    if fmt == "torchscript":
        from crosssim.policies.torchscript import TorchScriptPolicy

        return TorchScriptPolicy(path, obs_size=obs_size, check=check, source=source)
    from crosssim.policies.onnx import OnnxPolicy

    return OnnxPolicy(path, obs_size=obs_size, output=output, source=source)


# -- the wire: one frame = 4-byte length + kind byte + payload ---------------------------------------

def _frame(kind: bytes, payload: bytes = b"") -> bytes:
    return struct.pack("<I", len(payload) + 1) + kind + payload


def _array_frame(a: np.ndarray) -> bytes:
    a = np.ascontiguousarray(a, dtype=np.float64)
    shape = a.shape if a.ndim == 2 else (0, a.shape[0])  # rows 0: a single observation
    return _frame(b"A", struct.pack("<II", *shape) + a.tobytes())


def _parse_array(payload: bytes) -> np.ndarray:
    rows, cols = struct.unpack_from("<II", payload)
    if len(payload) != 8 + max(rows, 1) * cols * 8:
        raise ValueError("array frame of the wrong length")
    a = np.frombuffer(payload, dtype=np.float64, offset=8)
    return a.reshape(rows, cols) if rows else a.reshape(cols)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes | None:
    """``n`` bytes from ``fd``; None at end of file; TimeoutError past ``deadline`` (monotonic)."""
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, n - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _read_frame(fd: int, deadline: float | None = None, limit: int | None = None) -> tuple[bytes, bytes] | None:
    """One frame; ValueError when its length is over ``limit`` (nothing of it is read then)."""
    head = _read_exact(fd, 4, deadline)
    if head is None:
        return None
    size = struct.unpack("<I", head)[0]
    if limit is not None and size > limit:
        raise ValueError(f"frame of {size} bytes")
    body = _read_exact(fd, size, deadline)
    return None if body is None else (body[:1], body[1:])


# -- the parent's side ------------------------------------------------------------------------------

JSON_REPLY_LIMIT = 64 << 10
"""Largest reply frame the parent reads that is not an action array [bytes]."""
_ENV_KEPT = ("PATH", "HOME", "LANG", "TZ", "TMPDIR", "LD_LIBRARY_PATH")


def _child_env() -> dict[str, str]:
    """The child's environment: no tokens or other secrets of the parent, and a PYTHONPATH
    without the folder crosssim runs in (a checkout under review), unless crosssim itself is
    imported from there (a development run)."""
    env = {k: v for k, v in os.environ.items() if k in _ENV_KEPT or k.startswith(("LC_", "CROSSSIM_"))}
    here = Path.cwd().resolve()
    own = Path(__file__).resolve().parents[2]  # the folder that holds the crosssim package
    keep = [p for p in sys.path if p and (Path(p).resolve() != here or Path(p).resolve() == own)]
    # PYTHONSAFEPATH: the child's own working folder never comes first on sys.path either.
    env.update(OMP_NUM_THREADS="1", PYTHONSAFEPATH="1", PYTHONPATH=os.pathsep.join(keep))
    return env


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for f in (proc.stdin, proc.stdout):
        if f is not None:
            f.close()


def _start(fmt: str) -> subprocess.Popen:
    debug = os.environ.get("CROSSSIM_SANDBOX_DEBUG") == "1"
    return subprocess.Popen(
        [sys.executable, "-m", "crosssim.policies.sandbox", fmt], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=None if debug else subprocess.DEVNULL, env=_child_env())


_spare: dict[str, subprocess.Popen] = {}
"""At most one started, not yet used policy process per format (``prestart``)."""


def prestart(fmt: str) -> None:
    """Start a policy process for ``fmt`` now, so its torch / onnxruntime import runs while the
    caller does other work; the next SandboxedPolicy of that format uses it. It has read no
    request and no file yet: it holds nothing of any policy. Stopped at exit if never used."""
    if fmt not in ("torchscript", "onnx") or unavailable() is not None or any(k[0] == fmt for k in _adopted):
        return
    old = _spare.get(fmt)
    if old is not None and old.poll() is None:
        return
    proc = _spare[fmt] = _start(fmt)
    weakref.finalize(proc, _stop, proc)  # at exit (or when replaced and collected)


def _take(fmt: str) -> subprocess.Popen:
    proc = _spare.pop(fmt, None)
    return proc if proc is not None and proc.poll() is None else _start(fmt)


# -- hand-off: a loaded policy process passed on to one spawned worker ---------------------------------

class _Adopted:
    """The Popen face of a policy process another process started (and will reap): its pipes were
    duplicated into this one. Exit statuses are unknown here; kill is by pid, which cannot be
    reused before the starting process reaps it."""

    returncode = None

    def __init__(self, pid: int, rfd: int, wfd: int):
        self.pid, self.stdout, self.stdin = pid, os.fdopen(rfd, "rb", buffering=0), os.fdopen(wfd, "wb", buffering=0)

    def poll(self):
        return None if not self.stdout.closed else -signal.SIGKILL

    def wait(self, timeout=None):
        return self.poll()

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


_adopted: dict[tuple, tuple] = {}
"""Handed-over loaded policy processes by request key: (pid, read fd, write fd, load reply)."""


def _key(fmt, path, obs_size, output, check) -> tuple:
    return fmt, str(Path(path).resolve()), obs_size, output, bool(check)


class Handoff:
    """A loaded SandboxedPolicy's process, to be used by one ``spawn`` worker instead of a second
    one (torch's import again, the check, the load): put it in the worker Process's arguments;
    unpickling it there registers it for the next SandboxedPolicy with the same request. The
    giver must not use the policy afterwards, and closes it (stopping the process) at the end."""

    def __init__(self, policy: "SandboxedPolicy"):
        self.key, self.pid = policy.key, policy.proc.pid
        self.fds = (policy.proc.stdout.fileno(), policy.proc.stdin.fileno())
        self.info = {"obs_size": policy.obs_size, "action_size": policy.action_size, "batchable": policy.batchable}

    def __reduce__(self):
        from multiprocessing import reduction  # DupFd: only while a spawn Process is being started

        return _adopt, (self.key, self.pid, *(reduction.DupFd(fd) for fd in self.fds), self.info)


def _adopt(key, pid, rfd, wfd, info) -> None:
    _adopted[key] = (pid, rfd.detach(), wfd.detach(), info)
    return None


def handoff(policy) -> Handoff | None:
    """A Handoff of ``policy`` (through a NormalizedPolicy) when it runs in a sandboxed process."""
    inner = getattr(policy, "inner", policy)
    if isinstance(inner, SandboxedPolicy) and inner._finalizer.alive:
        return Handoff(inner)
    return None


class SandboxedPolicy(Policy):
    """A Policy whose forward runs in a sandboxed child process (see the module docstring).
    ``check``: the child runs the TorchScript allow-list check on the file's bytes before it locks
    down and loads them (open_policy asks for it; tests hand hostile files over without it)."""

    def __init__(self, fmt: str, path: Path, *, obs_size: int, output: str | None = None, check: bool = False):
        self.path, self.limits = Path(path), _limits()
        self.action_size = 0
        self.key = _key(fmt, path, obs_size, output, check)
        adopted = _adopted.pop(self.key, None)
        if adopted is not None:  # handed over loaded (Handoff): same request, same load
            pid, rfd, wfd, info = adopted
            self.proc = _Adopted(pid, rfd, wfd)
            self._finalizer = weakref.finalize(self, _stop, self.proc)
        else:
            self.proc = _take(fmt)
            self._finalizer = weakref.finalize(self, _stop, self.proc)
            request = {"fmt": fmt, "path": str(self.path), "obs_size": obs_size, "output": output, "check": check,
                       **self.limits}
            _write_all(self.proc.stdin.fileno(), _frame(b"J", json.dumps(request).encode()))
            self._call(None, timeout=STARTUP_TIMEOUT)  # imported and locked down
            info = self._call(None)  # loaded, zero-input forward done: this one is timed like a forward
        sizes = (info.get("obs_size"), info.get("action_size"))
        if not all(type(n) is int and 0 < n <= 1 << 16 for n in sizes):
            self.close()
            raise PolicyLoadError(f"{self.path}: policy process sent a malformed reply")
        self.obs_size, self.action_size = sizes
        self.batchable = bool(info.get("batchable"))

    def _call(self, request: bytes | None, timeout: float | None = None, rows: int = 0):
        """The child's reply to ``request``: an array (at most ``rows`` x action_size) or a JSON object."""
        limit = max(JSON_REPLY_LIMIT, 9 + 8 * max(rows, 1) * self.action_size)
        timeout = self.limits["timeout"] if timeout is None else timeout
        if self._finalizer.alive is False:
            raise PolicyLoadError(f"{self.path}: the policy process has stopped")
        try:
            if request is not None:
                _write_all(self.proc.stdin.fileno(), request)
            reply = _read_frame(self.proc.stdout.fileno(), time.monotonic() + timeout, limit)
        except TimeoutError:
            self.close()
            raise PolicyLoadError(f"{self.path}: the policy did not answer within {timeout:.0f} s "
                                  "(hung?); its process was killed") from None
        except ValueError:
            self.close()
            raise PolicyLoadError(f"{self.path}: policy process sent a malformed reply") from None
        except (BrokenPipeError, OSError):
            reply = None
        if reply is None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            self.close()
            raise PolicyLoadError(f"{self.path}: the policy process {self._death()}")
        kind, payload = reply
        try:  # the child runs untrusted code: its reply is parsed as hostile input
            if kind == b"A" and rows:
                return _parse_array(payload)
            message = json.loads(payload) if kind == b"J" else None
            if not isinstance(message, dict) or not isinstance(message.get("error", ""), str):
                raise ValueError("not a JSON object")
        except (ValueError, RecursionError, struct.error):
            self.close()
            raise PolicyLoadError(f"{self.path}: policy process sent a malformed reply") from None
        if "error" in message:
            raise PolicyLoadError(printable(message["error"], limit=1000))
        return message

    def _death(self) -> str:
        if isinstance(self.proc, _Adopted):
            return "stopped"
        code = self.proc.returncode
        if code is not None and code < 0:
            try:
                sig = signal.Signals(-code).name
            except ValueError:
                sig = f"signal {-code}"
            if sig == "SIGXCPU":
                return f"used up its CPU-time limit of {self.limits['cpu_s']} s and was killed"
            return f"was killed by {sig}"
        return f"exited (status {code})"

    def reset(self) -> None:
        self._call(_frame(b"R"))

    def act(self, obs: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs, dtype=np.float64)
        return self._call(_array_frame(obs), rows=obs.shape[0] if obs.ndim == 2 else 1)

    def close(self) -> None:
        """Stop the child process (also done when the object is collected)."""
        self._finalizer()


# -- the child's side --------------------------------------------------------------------------------

_DENIED = """socket socketpair connect bind listen accept accept4 execve execveat fork vfork ptrace
    process_vm_readv process_vm_writev mount umount2 unshare setns chroot pivot_root bpf perf_event_open
    io_uring_setup io_uring_enter io_uring_register userfaultfd keyctl add_key request_key kexec_load
    kexec_file_load init_module finit_module delete_module open_by_handle_at name_to_handle_at personality
    chmod fchmod fchmodat chown fchown lchown fchownat setxattr lsetxattr fsetxattr removexattr
    lremovexattr fremovexattr utime utimes utimensat futimesat setrlimit mknod mknodat swapon swapoff
    reboot syslog acct quotactl fanotify_init memfd_secret tkill rt_sigqueueinfo rt_tgsigqueueinfo
    pidfd_send_signal pidfd_open pidfd_getfd memfd_create""".split()


def _restrict(limits: dict) -> None:
    """Apply Landlock (no file access), seccomp (no sockets, exec, processes) and rlimits."""
    import resource

    import landlock
    import pyseccomp as sc

    def lower(kind, soft: int, hard: int) -> None:  # never above what the host allows (that would fail)
        top = resource.getrlimit(kind)[1]
        if top != resource.RLIM_INFINITY:
            soft, hard = min(soft, top), min(hard, top)
        resource.setrlimit(kind, (soft, hard))

    mem = limits["memory_mb"] << 20
    lower(resource.RLIMIT_AS, mem, mem)
    usage = resource.getrusage(resource.RUSAGE_SELF)  # the limit counts from now, not from the imports
    cpu = int(usage.ru_utime + usage.ru_stime) + 1 + limits["cpu_s"]
    lower(resource.RLIMIT_CPU, cpu, cpu + 5)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    landlock.Ruleset().apply()  # every access right handled, none granted: no file can be opened
    f = sc.SyscallFilter(sc.ALLOW)
    for name in _DENIED:
        try:
            f.add_rule(sc.ERRNO(errno.EPERM), name)
        except (ValueError, RuntimeError, OSError):
            pass  # a syscall this architecture or libseccomp version does not know
    # Threads (clone with CLONE_THREAD) stay allowed, new processes do not; clone3 passes its
    # flags in memory seccomp cannot read, so it answers ENOSYS and glibc falls back to clone.
    f.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, 0x10000, 0))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    f.add_rule(sc.ERRNO(errno.EPERM), "kill", sc.Arg(0, sc.NE, os.getpid()))
    f.add_rule(sc.ERRNO(errno.EPERM), "tgkill", sc.Arg(0, sc.NE, os.getpid()))
    f.add_rule(sc.ERRNO(errno.EPERM), "prlimit64", sc.Arg(2, sc.NE, 0))  # reading limits is fine
    f.load()


def _warm_up(fmt: str) -> None:
    """Run each kind of layer once while files can still be read: torch and its CPU kernels
    load some pieces (cpuinfo, kernels) on first use."""
    import crosssim.policies.onnx  # noqa: F401  (the loaders themselves: no imports after the lockdown)
    import crosssim.policies.recurrent  # noqa: F401  (the batched rebuild of stateful TorchScript files)
    import crosssim.policies.torchscript  # noqa: F401

    if fmt == "torchscript":
        import torch

        from crosssim.policies.tscheck import check_torchscript

        torch.set_num_threads(1)
        # The check runs after the lockdown: run it once now on a file of our own, so that what it
        # loads on first use (torch's operator table, zipfile's cp437 codec) is loaded already.
        codecs.lookup("cp437")  # zipfile decodes member names without the UTF-8 flag with it
        own = io.BytesIO()
        torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), own)
        check_torchscript(Path("warm-up.pt"), source=own.getvalue())
        with torch.no_grad():
            x = torch.zeros(1, 1, 4)
            torch.nn.LSTM(4, 4)(x)
            torch.nn.GRU(4, 4)(x)
            torch.nn.Conv1d(1, 1, 3)(x)
            torch.tanh(torch.nn.Linear(4, 4)(x)).numpy()
    else:
        import onnxruntime  # noqa: F401


def _child_main() -> None:
    from crosssim.policies.limits import ARCHIVE_LIMIT
    from crosssim.policies.torchscript import error_line

    rfd, wfd = 0, os.dup(1)
    os.dup2(2, 1)  # stray prints go to stderr (/dev/null), never into the result pipe
    fmt = sys.argv[1] if len(sys.argv) > 1 else None
    warm_error = None
    if fmt is not None:  # started ahead of its request (prestart): import while the parent works
        try:
            _warm_up(fmt)
        except Exception as exc:  # reported once the request names the file
            warm_error = exc
    first = _read_frame(rfd)
    if first is None:
        return
    req = json.loads(first[1])

    def send(obj) -> None:
        _write_all(wfd, _frame(b"J", json.dumps(obj).encode()))

    try:
        if warm_error is not None:
            raise warm_error
        if fmt != req["fmt"]:
            _warm_up(req["fmt"])
        path = Path(req["path"])
        with open(path, "rb") as f:
            source = f.read(ARCHIVE_LIMIT + 1)
        if len(source) > ARCHIVE_LIMIT:
            raise PolicyLoadError(f"{path}: the policy file is over crosssim's limit of {ARCHIVE_LIMIT >> 20} MiB")
        _restrict(req)
        if req.get("check") and req["fmt"] == "torchscript":
            from crosssim.policies.tscheck import check_torchscript

            # After the lockdown: parsing hostile source costs memory (ast) and must not outgrow
            # the limits; it reads the bytes as data, nothing of them runs.
            check_torchscript(path, source=source)
        send({"ready": True})
        policy = _local(req["fmt"], path, obs_size=req["obs_size"], output=req["output"], check=False, source=source)
        del source
    except PolicyLoadError as exc:
        send({"error": str(exc)})
        return
    except MemoryError:
        send({"error": f"{req['path']}: the policy ran out of its memory limit of {req['memory_mb']} MiB while loading"})
        return
    except Exception as exc:
        send({"error": f"{req['path']}: the policy failed to load in the sandbox ({type(exc).__name__}: "
                       f"{error_line(exc)})"})
        return
    send({"obs_size": policy.obs_size, "action_size": policy.action_size, "batchable": bool(policy.batchable)})
    while (msg := _read_frame(rfd)) is not None:
        kind, payload = msg
        try:
            if kind == b"R":
                policy.reset()
                send({})
            else:
                _write_all(wfd, _array_frame(np.asarray(policy.act(_parse_array(payload)), dtype=np.float64)))
        except Exception as exc:
            text = str(exc)
            if isinstance(exc, MemoryError) or "can't allocate memory" in text or "bad_alloc" in text:
                text = f"the policy ran out of its memory limit of {req['memory_mb']} MiB (--policy-memory-mb)"
            else:
                text = f"{type(exc).__name__}: {error_line(exc)}"
            send({"error": f"{req['path']}: {text}"})


if __name__ == "__main__":
    _child_main()
