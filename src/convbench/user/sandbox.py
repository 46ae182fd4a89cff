"""The sandbox a submission runs in, from the trusted side: what it mounts, which limits and identity it gets, and
the self-test that proves each property on this machine before any submission runs.

jail.py carries a plan out (namespaces, a whitelisted root, no privilege); this module writes the plan. A
submission's process sees:

    read-only   the system (/usr, /etc, /lib..., /sys), Python and its packages, convbench's own code, the
                submission (at /submission/NAME), its build folder while it runs (read-write only while nvcc builds
                it, when none of the submission's code runs)
    its own     /scratch (its cache, HOME, numba / Triton / CuPy caches), /tmp and /dev/shm: tmpfs of bounded size,
                gone when the process ends, seen by no other sandbox
    devices     null, zero, full, random, urandom, and on a GPU grader that GPU's nodes alone
    absent      everything else: /home, /root, /run, /var, the database, the staff's weights and test images,
                convbench's cache, other submissions
    identity    as root: uid UID_BASE + the launcher's PID (unique among live sandboxes), gid SANDBOX_GID, no
                groups; otherwise the user's own uid in a user namespace. No capabilities, no_new_privs, seccomp.
    no network  an empty network namespace (only a loopback that is down)
    limits      processes, file size, open files, no core dumps; memory and wall time are watched by worker.py

`self_test(device)` runs jail_probe.py in such a sandbox and checks every line above; `convbench serve`, `worker`
and `grade` run it at start and refuse to grade untrusted code where it fails (worker.py falls back to a plain child
process, with a note, only for a user's own kernel in `run`, `verify`, `bench`).
"""

from __future__ import annotations

import functools
import json
import os
import platform
import site
import subprocess
import sys
import sysconfig
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from shutil import which

import torch

from convbench.core.errors import UsageError
from convbench.core.paths import cache_dir

JAIL = Path(__file__).with_name("jail.py")
PROBE = Path(__file__).with_name("jail_probe.py")
UID_BASE = 1_000_000_000  # + the launcher's PID (at most 2^22): uids no account has
SANDBOX_GID = 999_999_999  # the group of every sandbox: it owns the build folders (setgid, group-writable)
INSIDE_UID = 65534  # without root: the user's own uid, seen inside its user namespace as nobody
SCRATCH = "/scratch"
SUBMISSION = "/submission"
BUILDS = "/builds"
TMP_BYTES = 1 << 30
SHM_BYTES = 1 << 30
SCRATCH_BYTES = 2 << 30
FILE_BYTES = 1 << 30  # the largest file a sandboxed process may write
OPEN_FILES = 4096
# Every thread counts as a process here: PyTorch starts one per core, CUDA a few, nvcc a handful of children
PROCESSES = max(512, 4 * (os.cpu_count() or 1))
# The environment a submission's process may see: no database URLs, tokens or passwords of the grader's
ENV_NAMES = {"PATH", "LANG", "LANGUAGE", "TZ", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_DEVICE_ORDER",
             "CONVBENCH_COMPILE_TIMEOUT", "PYTHONUNBUFFERED"}
ENV_PREFIXES = ("LC_", "NVIDIA_", "NCCL_", "NVSHMEM_", "TORCH_", "PYTORCH_", "TRITON_", "OMP_", "MKL_", "OPENBLAS_",
                "NUMBA_NUM_THREADS")
FIX = ("run convbench as root, or allow unprivileged user namespaces (Debian: sysctl kernel.unprivileged_userns_clone="
       "1; Ubuntu: sysctl kernel.apparmor_restrict_unprivileged_userns=0)")


class SandboxUnavailable(UsageError):
    """The sandbox cannot be made here (one line: what failed and the fix)."""


@dataclass(frozen=True)
class Gpu:
    """The one GPU a sandbox may open: its device nodes and its folder name in /proc/driver/nvidia/gpus."""

    nodes: tuple[str, ...]
    bus: str


@dataclass(frozen=True)
class Mounts:
    """What one sandbox sees besides the system: (host path, path inside) pairs."""

    read_only: tuple[tuple[str, str], ...] = ()
    writable: tuple[tuple[str, str], ...] = ()
    gpu: Gpu | None = None


def as_root() -> bool:
    return os.geteuid() == 0


def python_paths() -> list[str]:
    """The folders this Python and convbench run from (read-only inside): prefixes, site-packages, convbench's
    own source folder, the CUDA toolkit's nvcc lives in."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             str(Path(sys.executable).resolve().parent), str(Path(__file__).resolve().parents[2])}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        paths.add(sysconfig.get_paths()[key])
    paths.update(site.getsitepackages())
    for entry in sys.path:  # editable installs and PYTHONPATH entries that hold packages
        if entry and Path(entry).is_dir() and Path(entry).name in ("site-packages", "dist-packages"):
            paths.add(entry)
    nvcc = which("nvcc") or next((str(p / "bin" / "nvcc") for p in
                                  (Path(os.environ.get("CUDA_HOME", "/nonexistent")), Path("/usr/local/cuda"))
                                  if (p / "bin" / "nvcc").is_file()), None)
    if nvcc:
        paths.add(str(Path(nvcc).resolve().parents[1]))
    paths.update(nsight_compute_paths())
    real = sorted({str(Path(p).resolve()) for p in paths if p and Path(p).exists()})
    # a folder inside another one listed is already there
    return [p for p in real if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in real)]


def nsight_compute_paths() -> list[str]:
    """Where Nsight Compute is installed, read-only inside, so that a grade's feedback can run ncu in the sandbox
    (user/ncu_counters.py): the `ncu` launcher looks for its nsight-compute folder beside the toolkit or under
    /opt/nvidia."""
    ncu = which("ncu")
    if not ncu:
        return []
    folders = [Path(ncu).resolve().parents[1], Path("/opt/nvidia")]
    return [str(p) for folder in folders if folder.is_dir() for p in sorted(folder.glob("nsight-compute*"))]


def gpu_of_this_process() -> Gpu:
    """The device nodes of the GPU this process uses (torch's current device), found by its UUID in
    /proc/driver/nvidia/gpus/*/information; SandboxUnavailable where that cannot be told."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    uuid = str(getattr(props, "uuid", "")).lower().removeprefix("gpu-")
    root = Path("/proc/driver/nvidia/gpus")
    found = []
    for info in sorted(root.glob("*/information")) if root.is_dir() else []:
        fields = {}
        for line in info.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
        found.append((info.parent.name, fields.get("Device Minor", ""), fields.get("GPU UUID", "").lower()))
    match = [(bus, minor) for bus, minor, u in found if uuid and u.removeprefix("gpu-") == uuid]
    if not match and len(found) == 1:
        match = [(found[0][0], found[0][1])]
    if not match or not match[0][1].isdigit():
        raise SandboxUnavailable(f"cannot tell which /dev/nvidiaN is this process's GPU (UUID {uuid or '?'}; "
                                 f"{len(found)} GPU(s) in /proc/driver/nvidia/gpus); set CUDA_VISIBLE_DEVICES to one "
                                 "GPU the driver lists")
    bus, minor = match[0]
    nodes = [n for n in ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", f"/dev/nvidia{minor}")
             if Path(n).exists()]
    return Gpu(tuple(nodes), bus)


def environment(extra: dict[str, str]) -> dict[str, str]:
    """The submission's environment: the allowed variables of ours, then `extra`."""
    env = {k: v for k, v in os.environ.items() if k in ENV_NAMES or k.startswith(ENV_PREFIXES)}
    if os.environ.get("CONVBENCH_GRADER_SET_OMP_WAIT_POLICY") == "1":  # the grader's own (cli/main.quiet_openmp)
        env.pop("OMP_WAIT_POLICY", None)
    home = f"{SCRATCH}/home"
    env.update(HOME=home, USER="sandbox", LOGNAME="sandbox", TMPDIR="/tmp", CONVBENCH_CACHE=f"{SCRATCH}/cache",
               NUMBA_CACHE_DIR=f"{SCRATCH}/numba", TRITON_CACHE_DIR=f"{SCRATCH}/triton",
               CUPY_CACHE_DIR=f"{SCRATCH}/cupy", XDG_CACHE_HOME=f"{SCRATCH}/.cache", PYTHONDONTWRITEBYTECODE="1",
               CONVBENCH_FAST_CALL="0")  # built-in rungs graded as submissions: their calls as a submission's
    env.update(extra)
    return env


@dataclass(frozen=True)
class Launch:
    """How to start a sandboxed program: `argv` with `env`, the plan readable on descriptor `plan_fd` (pass it with
    pass_fds; close it in the parent after the start)."""

    argv: list[str]
    env: dict[str, str]
    plan_fd: int


def command(argv: list[str], env: dict[str, str], mounts: Mounts, cwd: str = SCRATCH,
            memory: int = 1 << 62) -> Launch:
    """What runs `argv` in a sandbox with `mounts`: jail.py, its plan in a pipe (never on a command line), and an
    environment of nothing but a PATH (the program gets `env`, from the plan). `memory`: the bytes its processes
    may use together, where a memory control group can be made (cgroup_usage reads what they use)."""
    read_only = [(p, p) for p in python_paths()] + list(mounts.read_only)
    read_only.sort(key=lambda pair: pair[1].count("/"))  # a folder before what is bound inside it
    plan = {
        "argv": argv, "env": env, "cwd": cwd,
        "uid_base": UID_BASE, "gid": SANDBOX_GID, "user_uid": INSIDE_UID, "user_gid": INSIDE_UID,
        "ro": read_only, "rw": list(mounts.writable),
        "devices": list(mounts.gpu.nodes) if mounts.gpu else [],
        "gpus_keep": [mounts.gpu.bus] if mounts.gpu else [],
        "scratch": SCRATCH, "tmpfs": {"/tmp": TMP_BYTES, "/dev/shm": SHM_BYTES, "scratch": SCRATCH_BYTES},
        "limits": {"nproc": PROCESSES, "fsize": FILE_BYTES, "nofile": OPEN_FILES}, "memory": int(memory),
        "seccomp": True,
    }
    data = json.dumps(plan).encode()
    read, write = os.pipe()
    if len(data) > 60000:  # more than a pipe holds unread: a thread writes it while the launcher starts
        def feed():
            with os.fdopen(write, "wb") as f:
                f.write(data)

        threading.Thread(target=feed, daemon=True).start()
    else:
        with os.fdopen(write, "wb") as f:
            f.write(data)
    return Launch([sys.executable, "-I", "-S", str(JAIL), str(read)], {"PATH": "/usr/bin:/bin"}, read)


def _cgroup_folders(launcher_pid: int | None = None) -> list[Path]:
    """The control groups of sandboxes beside this process's own (of one launcher, or every one), as jail.py makes
    them: convbench-<launcher PID> under this process's group of each controller (cgroup v1) or of v2."""
    with open("/proc/self/cgroup") as f:
        groups = {}
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for c in controllers.split(",") if controllers else ["unified"]:
                groups[c] = path.rstrip("/")
    pattern = f"convbench-{launcher_pid}" if launcher_pid is not None else "convbench-*"
    parents = [Path(f"/sys/fs/cgroup/{c}{groups[c]}") for c in ("memory", "pids") if c in groups]
    if "unified" in groups:
        parents.append(Path(f"/sys/fs/cgroup{groups['unified']}"))
    return [f for parent in parents if parent.is_dir() for f in parent.glob(pattern)]


def cgroup_usage(launcher_pid: int) -> int | None:
    """Bytes the sandbox started by the launcher with this PID uses now (its memory control group, which counts
    shared pages and /dev/shm once), or None where it has none."""
    for folder in _cgroup_folders(launcher_pid):
        for name in ("memory.usage_in_bytes", "memory.current"):
            try:
                return int((folder / name).read_text())
            except (OSError, ValueError):
                continue
    return None


def remove_cgroups(launcher_pid: int) -> None:
    """The control groups of a launcher that was killed before it could remove them itself, once their processes
    are gone; and any other sandbox's whose launcher is gone (a grader killed mid-job)."""
    folders = _cgroup_folders(launcher_pid)
    for folder in _cgroup_folders():
        try:
            os.kill(int(folder.name.rsplit("-", 1)[1]), 0)
        except ProcessLookupError:
            folders.append(folder)
        except (ValueError, PermissionError):
            continue
    for folder in dict.fromkeys(folders):
        for _ in range(50):
            try:
                folder.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.02)


# ---------------------------------------------------------------------------------------------------- self-test


@dataclass(frozen=True)
class SelfTest:
    ok: bool
    backend: str  # "namespaces, as root" | "namespaces, user namespace" | "none"
    properties: dict[str, str] = field(default_factory=dict)  # property -> what was seen
    problem: str = ""  # one line: the first property that failed, and the fix


def _judge(seen: dict, gpu: Gpu | None, absent: tuple[str, ...]) -> list[tuple[str, bool, str]]:
    status = seen["status"]
    caps = {k: int(status.get(k, "1"), 16) for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}
    sizes = seen["sizes"]
    limits = seen["limits"]
    want_nodes = sorted(Path(n).name for n in gpu.nodes if Path(n).name.startswith("nvidia")) if gpu else []
    x86 = platform.machine() == "x86_64"
    return [
        ("unprivileged uid", seen["uid"] != 0 and seen["euid"] != 0 and seen["setuid_root"] == "EPERM",
         f"uid {seen['uid']}, setuid(0) {seen['setuid_root']}"),
        ("no capabilities", not any(caps.values()), " ".join(f"{k} {v:x}" for k, v in caps.items())),
        ("no_new_privs", status.get("NoNewPrivs") == "1", f"NoNewPrivs {status.get('NoNewPrivs')}"),
        ("seccomp filter", status.get("Seccomp") == "2" or not x86,
         f"Seccomp {status.get('Seccomp')}" + ("" if x86 else f" (none on {platform.machine()})")),
        ("read-only root", seen["write_root"] in ("EROFS", "EACCES") and seen["write_system"] in ("EROFS", "EACCES"),
         f"/ {seen['write_root']}, {sys.prefix} {seen['write_system']}"),
        ("private scratch", seen["writable"].get(SCRATCH) == "ok", f"{SCRATCH} {seen['writable'].get(SCRATCH)}"),
        ("bounded /tmp, /dev/shm, /scratch",
         all(sizes.get(p) is not None and sizes[p] <= limit * 1.01 for p, limit in
             (("/tmp", TMP_BYTES), ("/dev/shm", SHM_BYTES), (SCRATCH, SCRATCH_BYTES))),
         ", ".join(f"{p} {(sizes.get(p) or 0) / 2**30:.2f} GiB" for p in ("/tmp", "/dev/shm", SCRATCH))),
        ("no network", seen["interfaces"] in ([], ["lo"]) and seen["connect"] != "ok",
         f"interfaces {seen['interfaces']}, connect {seen['connect']}"),
        ("own PID namespace", len(seen["pids"]) <= 3 and 1 in seen["pids"], f"PIDs {seen['pids'][:8]}"),
        ("mount refused", seen["mount"] == "EPERM", f"mount {seen['mount']}"),
        ("new namespaces refused", seen["unshare_user"] == "EPERM", f"unshare {seen['unshare_user']}"),
        ("only its GPU", seen["gpu_nodes"] == want_nodes and seen["nvidia_gpus"] == ([gpu.bus] if gpu else []),
         f"/dev {seen['gpu_nodes'] or 'none'}, /proc/driver/nvidia/gpus {seen['nvidia_gpus'] or 'none'}"),
        ("private files absent", not seen["present"], f"present: {seen['present']}" if seen["present"] else
         f"{len(absent)} path(s) absent"),
        ("memory and process groups", True,
         "the kernel's (memory counts /dev/shm and shared pages once)" if any(
             ("memory" in line.split(":")[1] or line.startswith("0::")) and "/convbench-" in line
             for line in seen["cgroups"]) else "none here: memory watched as resident sets, /dev/shm bounded by its "
         "size"),
        ("limits", limits["RLIMIT_NPROC"] <= PROCESSES and limits["RLIMIT_FSIZE"] <= FILE_BYTES
         and limits["RLIMIT_CORE"] == 0,
         f"processes {limits['RLIMIT_NPROC']}, file {limits['RLIMIT_FSIZE'] / 2**30:.1f} GiB, core "
         f"{limits['RLIMIT_CORE']}"),
    ]


def must_be_absent() -> tuple[str, ...]:
    """Paths no sandbox may see: homes, system state, convbench's cache, the service's database folder and the
    staff's folders ($CONVBENCH_SANDBOX_HIDE, set by `serve`)."""
    hidden = [p for p in os.environ.get("CONVBENCH_SANDBOX_HIDE", "").split(os.pathsep) if p]
    candidates = ["/root", "/home", "/run", "/var", str(cache_dir()), *hidden]
    bound = python_paths()
    out: list[str] = []

    def add(path: Path, depth: int = 0) -> None:
        """`path`, or where a bound folder lies inside it (Python under /root/.pyenv), the entries beside the way to
        it, level by level."""
        p = str(path)
        if any(p == q or p.startswith(q.rstrip("/") + "/") for q in bound) or not path.exists():
            return
        inside = [q for q in bound if q.startswith(p.rstrip("/") + "/")]
        if not inside:
            out.append(p)
            return
        if depth < 8 and path.is_dir() and not path.is_symlink():
            try:
                for child in sorted(path.iterdir())[:200]:
                    add(child, depth + 1)
            except OSError:
                pass

    for c in dict.fromkeys(str(Path(c).resolve()) for c in candidates):
        add(Path(c))
    return tuple(out)


@functools.cache
def self_test(device: str = "cpu") -> SelfTest:
    """Run the probe in a sandbox made as a submission's is, and check every property (cached per process)."""
    backend = "namespaces, as root" if as_root() else "namespaces, user namespace"
    if platform.system() != "Linux":
        return SelfTest(False, "none", {}, f"the sandbox needs Linux namespaces; this is {platform.system()}")
    try:
        gpu = gpu_of_this_process() if device == "cuda" else None
    except SandboxUnavailable as e:
        return SelfTest(False, backend, {}, str(e))
    absent = must_be_absent()
    args = {"absent": list(absent), "writable": [SCRATCH]}
    argv = [sys.executable, "-I", "-S", str(PROBE), json.dumps(args)]
    launch = command(argv, environment({}), Mounts(gpu=gpu))
    try:
        out = subprocess.run(launch.argv, env=launch.env, pass_fds=(launch.plan_fd,), capture_output=True, text=True,
                             timeout=120, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return SelfTest(False, backend, {}, f"the sandbox did not start ({type(e).__name__}); {FIX}")
    finally:
        os.close(launch.plan_fd)
    if out.returncode != 0:
        why = (out.stderr.strip().splitlines() or [f"exit status {out.returncode}"])[-1][:300]
        fix = ("the system refused a step of it (a container that forbids mount namespaces?)" if as_root() else FIX)
        return SelfTest(False, backend, {}, f"the sandbox could not be made here ({why}); {fix}")
    try:
        seen = json.loads(out.stdout)
        checks = _judge(seen, gpu, absent)
    except (ValueError, KeyError, TypeError) as e:
        return SelfTest(False, backend, {}, f"the sandbox's self-test gave no readable answer ({type(e).__name__})")
    properties = {name: ("ok: " if good else "FAILED: ") + text for name, good, text in checks}
    failed = [(name, text) for name, good, text in checks if not good]
    problem = "" if not failed else (f"the sandbox's self-test failed: {failed[0][0]} ({failed[0][1]}); "
                                     "grading untrusted code here would not be safe")
    return SelfTest(not failed, backend, properties, problem)


def require(device: str, allow_unsandboxed: bool = False) -> SelfTest:
    """The self-test, passed; else a SandboxUnavailable naming the failure (unless `allow_unsandboxed`: trusted
    code only, the caller says so wherever results are shown)."""
    result = self_test(device)
    if not result.ok and not allow_unsandboxed:
        raise SandboxUnavailable(f"{result.problem}; or, for trusted code only, pass --allow-unsandboxed")
    return result
