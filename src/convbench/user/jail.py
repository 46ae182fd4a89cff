"""The sandbox launcher: puts one program into namespaces of its own, with no privilege, and execs it.

Run by path with `python -I -S jail.py FD` (the plan, JSON, is read from file descriptor FD and never appears in a
command line the sandbox could read in /proc; standard library only, nothing of convbench is imported: it starts
in milliseconds and no file a submission could write is read). sandbox.py writes the plan and checks the result
with a probe (jail_probe.py); this file only carries the plan out, step by step, and stops with one line on stderr
and exit status 125 at the first step that fails.

    outer process (the parent's uid)     new mount, PID, network, IPC and UTS namespaces (and a user namespace when
                                         not run as root), then fork; waits and exits as the inner process did
    inner process (PID 1 of its own)     a new root from a whitelist: system folders and Python read-only, the
                                         submission read-only, its scratch (tmpfs) and build folder as the plan
                                         says, a fresh /proc, a /dev with null, zero, random and the one GPU's
                                         nodes; /tmp and /dev/shm are size-limited tmpfs; then pivot_root onto it
    and (as root, where the machine has them) memory and process control groups the inner process joins (Cgroup)
    then, before exec                    resource limits (processes, file size, files, no core dumps); a uid and gid
                                         of no account (as root: uid BASE + this launcher's PID, unique among live
                                         sandboxes, so the process limit is per sandbox), no supplementary groups,
                                         an empty capability bounding set, no capabilities; no_new_privs; a seccomp
                                         filter refusing the calls that reach outside (mount, namespaces, ptrace,
                                         BPF, keys, modules, ...); parent-death signal SIGKILL

The program then runs as PID 2 under a minimal init (PID 1, which reaps orphans and ends with the program).
Everything in the new PID namespace dies with its PID 1, and PID 1 dies with this launcher, which dies with its
parent: a sandbox leaves no process behind.
"""

import contextlib
import ctypes
import errno
import json
import os
import platform
import resource
import signal
import socket
import struct
import sys
import time

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
CLONE_NEW_ANY = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 1, 2, 4
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, PR_CAP_AMBIENT = 1, 24, 38, 22, 47
PR_CAP_AMBIENT_CLEAR_ALL, SECCOMP_MODE_FILTER, PR_SET_DUMPABLE = 4, 2, 4
CAP_LAST_CAP_MAX = 63

# x86-64 system call numbers (seccomp filters by number; other architectures run without the filter, and the
# self-test says so)
SYSCALLS_X86_64 = {
    "pivot_root": 155, "syslog": 103, "ptrace": 101, "uselib": 134, "adjtimex": 159, "chroot": 161,
    "acct": 163, "settimeofday": 164, "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169,
    "sethostname": 170, "setdomainname": 171, "iopl": 172, "ioperm": 173, "init_module": 175,
    "delete_module": 176, "quotactl": 179, "lookup_dcookie": 212, "clock_settime": 227, "add_key": 248,
    "request_key": 249, "keyctl": 250, "kexec_load": 246, "unshare": 272, "perf_event_open": 298,
    "fanotify_init": 300, "name_to_handle_at": 303, "open_by_handle_at": 304, "clock_adjtime": 305, "setns": 308,
    "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "finit_module": 313, "kexec_file_load": 320,
    "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "pidfd_getfd": 438, "mount_setattr": 442,
}
CLONE_X86_64, CLONE3_X86_64, PIVOT_ROOT_X86_64, MOUNT_SETATTR, CAPSET_X86_64 = 56, 435, 155, 442, 126
AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ERRNO, SECCOMP_RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
BPF_LD_W_ABS, BPF_JEQ_K, BPF_JGE_K, BPF_JSET_K, BPF_RET_K = 0x20, 0x15, 0x35, 0x45, 0x06

# The folders of the system every program needs, read-only (where one is a symbolic link, as /bin -> usr/bin on a
# merged-/usr system, the link is made instead). /sys is read-only too: CUDA and the CPU count read it.
SYSTEM = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/sys")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.syscall.restype = ctypes.c_long


class Failed(Exception):
    """A step of the plan that could not be carried out: 'step: reason'."""


def _check(result: int, step: str) -> int:
    if result < 0:
        e = ctypes.get_errno()
        raise Failed(f"{step}: {os.strerror(e)} (errno {errno.errorcode.get(e, e)})")
    return result


def _mount(source, target, fstype, flags, data, step):
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), step)


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                ("userns_fd", ctypes.c_uint64)]


def _read_only(target: str, step: str) -> None:
    """The mount at `target` and every mount below it read-only, nosuid, nodev (mount_setattr, Linux 5.12; before
    that the top mount alone)."""
    attr = _MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, 0, 0)
    r = _libc.syscall(MOUNT_SETATTR, AT_FDCWD, target.encode(), AT_RECURSIVE, ctypes.byref(attr),
                      ctypes.sizeof(attr))
    if r < 0 and ctypes.get_errno() == errno.ENOSYS:
        _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None, step)
    elif r < 0:
        _check(r, step)


def _makedirs(path: str) -> None:
    os.makedirs(path, mode=0o755, exist_ok=True)


def _bind(host: str, inside: str, writable: bool, device: bool = False) -> None:
    """Bind host (as seen under /oldroot) at /newroot/inside; read-only unless `writable`."""
    source = "/oldroot" + host
    target = "/newroot" + inside
    if os.path.isdir(source):
        _makedirs(target)
    else:
        _makedirs(os.path.dirname(target))
        if not os.path.lexists(target):
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY | os.O_EXCL | os.O_NOFOLLOW, 0o644))
    _mount(source, target, None, MS_BIND | MS_REC, None, f"bind {host}")
    if writable:
        _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV, None, f"bind {host} (nosuid)")
    elif device:
        _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC, None, f"bind {host} (device)")
    else:
        _read_only(target, f"bind {host} read-only")


def _tmpfs(inside: str, size: int, mode: str, owner: tuple[int, int] | None = None) -> None:
    target = "/newroot" + inside
    _makedirs(target)
    data = f"size={int(size)},mode={mode}" + (f",uid={owner[0]},gid={owner[1]}" if owner else "")
    _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, data, f"tmpfs {inside}")


def _nvidia_proc(keep: list[str]) -> None:
    """/proc/driver/nvidia/gpus lists only the GPUs in `keep` (their PCI addresses): the driver then offers the
    sandbox no other card (their device nodes are absent too)."""
    gpus = "/newroot/proc/driver/nvidia/gpus"
    if not os.path.isdir(gpus):
        return
    present = os.listdir(gpus)
    _mount("tmpfs", gpus, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=65536,mode=0555", "tmpfs nvidia gpus")
    for name in present:
        if name in keep:
            os.mkdir(f"{gpus}/{name}")
            _mount(f"/oldroot/proc/driver/nvidia/gpus/{name}", f"{gpus}/{name}", None, MS_BIND | MS_REC, None,
                   "bind nvidia gpu")
    _read_only(gpus, "nvidia gpus read-only")


def build_root(plan: dict, uid: int, gid: int) -> None:
    """The new root, mounted under /newroot with the host's root at /oldroot; then pivot onto it."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE, None, "make mounts private")
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1048576,mode=0755", "tmpfs base")
    os.chdir("/tmp")
    os.mkdir("newroot")
    os.mkdir("oldroot")
    _check(_libc.syscall(PIVOT_ROOT_X86_64 if platform.machine() == "x86_64" else 41, b".", b"oldroot"),
           "pivot_root (base)")
    os.chdir("/")
    _mount("tmpfs", "/newroot", "tmpfs", MS_NOSUID | MS_NODEV, "size=4194304,mode=0755", "tmpfs root")
    for path in SYSTEM:
        source = "/oldroot" + path
        if os.path.islink(source):
            os.symlink(os.readlink(source), "/newroot" + path)
        elif os.path.isdir(source):
            _bind(path, path, writable=False)
    bound = [p for p in SYSTEM if os.path.isdir("/oldroot" + p) and not os.path.islink("/oldroot" + p)]
    for host, inside in plan["ro"]:
        if host == inside and any(host == b or host.startswith(b.rstrip("/") + "/") for b in bound):
            continue  # already visible, read-only, through a folder bound above
        if os.path.lexists("/oldroot" + host):
            _bind(host, inside, writable=False)
            bound.append(inside)
    for host, inside in plan["rw"]:
        _bind(host, inside, writable=True)
    _makedirs("/newroot/proc")
    _mount("proc", "/newroot/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None, "mount /proc")
    for sensitive in ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"):
        if os.path.exists("/newroot" + sensitive):
            _mount("/newroot" + sensitive, "/newroot" + sensitive, None, MS_BIND | MS_REC, None, f"bind {sensitive}")
            _read_only("/newroot" + sensitive, f"{sensitive} read-only")
    _nvidia_proc(plan.get("gpus_keep") or [])
    _makedirs("/newroot/dev")
    _mount("tmpfs", "/newroot/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=65536,mode=0755", "tmpfs /dev")
    for node in (*DEVICES, *plan.get("devices", [])):
        if os.path.exists("/oldroot" + node):
            _bind(node, node, writable=False, device=True)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"/newroot/dev/{name}")
    sizes = plan["tmpfs"]
    _tmpfs("/dev/shm", sizes["/dev/shm"], "1777")
    _tmpfs("/tmp", sizes["/tmp"], "1777")
    _tmpfs(plan["scratch"], sizes["scratch"], "0700", owner=(uid, gid))
    # the skeleton itself read-only: nothing but the tmpfs folders above can be written
    _mount(None, "/newroot", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None, "root read-only")
    _check(_libc.umount2(b"/oldroot", MNT_DETACH), "detach the host's root")
    os.chdir("/newroot")
    _check(_libc.syscall(PIVOT_ROOT_X86_64 if platform.machine() == "x86_64" else 41, b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "detach the base")
    os.chdir("/")


def seccomp_program() -> bytes | None:
    """The BPF filter: another architecture's or the x32 ABI's calls are refused (the process is killed), the
    calls of SYSCALLS_X86_64 fail with EPERM, clone3 with ENOSYS (so that the C library falls back to clone, whose
    flags a filter can read), clone with any CLONE_NEW* flag with EPERM; everything else is allowed."""
    if platform.machine() != "x86_64":
        return None
    prog = [(BPF_LD_W_ABS, 0, 0, 4), (BPF_JEQ_K, 1, 0, AUDIT_ARCH_X86_64), (BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
            (BPF_LD_W_ABS, 0, 0, 0), (BPF_JGE_K, 0, 1, X32_SYSCALL_BIT), (BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS)]
    for nr in sorted(SYSCALLS_X86_64.values()):
        prog += [(BPF_JEQ_K, 0, 1, nr), (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.EPERM)]
    prog += [(BPF_JEQ_K, 0, 1, CLONE3_X86_64), (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS)]
    # clone(flags, ...): the low 32 bits of the first argument (seccomp_data.args[0] at offset 16, little-endian)
    prog += [(BPF_JEQ_K, 0, 3, CLONE_X86_64), (BPF_LD_W_ABS, 0, 0, 16), (BPF_JSET_K, 0, 1, CLONE_NEW_ANY),
             (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.EPERM)]
    prog += [(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW)]
    return b"".join(struct.pack("=HBBI", *ins) for ins in prog)


def _install_seccomp(program: bytes) -> None:
    buffer = ctypes.create_string_buffer(program)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program) // 8, ctypes.addressof(buffer))
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


def _empty_bounding_set() -> None:
    """No exec can ever gain a capability again (needs CAP_SETPCAP: done while the process still has it)."""
    for cap in range(CAP_LAST_CAP_MAX + 1):
        r = _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        if r < 0 and ctypes.get_errno() == errno.EINVAL:
            break  # past the kernel's last capability
        _check(r, f"drop capability {cap} from the bounding set")
    _check(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")


def _zero_capabilities() -> None:
    """The effective, permitted and inheritable sets emptied (after a setuid from root they already are)."""
    header = struct.pack("=Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = ctypes.create_string_buffer(24)  # two zeroed {effective, permitted, inheritable}
    _check(_libc.syscall(CAPSET_X86_64 if platform.machine() == "x86_64" else 91, ctypes.c_char_p(header), data),
           "capset")


def confine(plan: dict, uid: int, gid: int, as_root: bool) -> None:
    """Limits, identity, capabilities, no_new_privs, seccomp: the last steps before exec."""
    limits = plan["limits"]
    for name, value in (("RLIMIT_NPROC", limits["nproc"]), ("RLIMIT_FSIZE", limits["fsize"]),
                        ("RLIMIT_NOFILE", limits["nofile"]), ("RLIMIT_CORE", 0)):
        which = getattr(resource, name)
        hard = resource.getrlimit(which)[1]
        value = int(value) if hard == resource.RLIM_INFINITY else min(int(value), hard)
        resource.setrlimit(which, (value, value))
    socket.sethostname("sandbox")
    _empty_bounding_set()
    if as_root:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)  # from root to an ordinary uid: the capability sets are cleared
    _zero_capabilities()
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "parent-death signal")  # reset by setuid
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    program = seccomp_program()
    if program is not None and plan.get("seccomp", True):
        _install_seccomp(program)
    os.umask(0o002)  # the build folder is shared by the submission's sandboxes through its group


class Cgroup:
    """The sandbox's memory and process limits as control groups, where this machine lets the launcher make them
    (as root, the memory and pids controllers of cgroup v1, or v2 where this process's group delegates them):
    the kernel then counts every page the sandbox's processes use, shared ones and /dev/shm's once, and stops the
    group at the limit. Named convbench-<launcher PID> beside nothing but under this process's own group, so that
    the parent (worker.py) can read its usage and the launcher its out-of-memory count. Without one, worker.py
    watches the processes' resident memory instead."""

    def __init__(self, memory: int, processes: int):
        self.dirs: dict[str, str] = {}
        name = f"convbench-{os.getpid()}"
        groups = {}
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for c in controllers.split(",") if controllers else ["unified"]:
                    groups[c] = path
        for controller in ("memory", "pids"):
            if controller in groups and os.path.isdir(f"/sys/fs/cgroup/{controller}"):
                folder = f"/sys/fs/cgroup/{controller}{groups[controller].rstrip('/')}/{name}"
            elif "unified" in groups and os.path.exists("/sys/fs/cgroup/cgroup.subtree_control"):
                parent = f"/sys/fs/cgroup{groups['unified'].rstrip('/')}"
                try:
                    with open(f"{parent}/cgroup.subtree_control") as f:
                        if controller not in f.read().split():
                            continue
                except OSError:
                    continue
                folder = f"{parent}/{name}"
            else:
                continue
            try:
                os.makedirs(folder, exist_ok=True)
                v2 = folder.startswith("/sys/fs/cgroup/") and not folder.startswith(f"/sys/fs/cgroup/{controller}/")
                limit_file, value = (("memory.max" if v2 else "memory.limit_in_bytes"), memory) \
                    if controller == "memory" else ("pids.max", processes)
                with open(f"{folder}/{limit_file}", "w") as f:
                    f.write(str(int(value)))
                self.dirs[controller] = folder
            except OSError:
                with contextlib.suppress(OSError):
                    os.rmdir(folder)

    def join(self, pid: int) -> None:
        for folder in dict.fromkeys(self.dirs.values()):
            with open(f"{folder}/cgroup.procs", "w") as f:
                f.write(str(pid))

    def out_of_memory(self) -> tuple[int, int]:
        """(times the kernel killed a process of the group for memory, the group's peak bytes)."""
        folder = self.dirs.get("memory")
        if folder is None:
            return 0, 0
        kills = peak = 0
        for events in ("memory.events", "memory.oom_control"):
            with contextlib.suppress(OSError), open(f"{folder}/{events}") as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        kills = int(value)
        for name in ("memory.peak", "memory.max_usage_in_bytes"):
            with contextlib.suppress(OSError, ValueError), open(f"{folder}/{name}") as f:
                peak = int(f.read())
        return kills, peak

    def remove(self) -> None:
        """The groups go once their processes are gone (the kernel ends them as the namespace's init ends)."""
        for folder in dict.fromkeys(self.dirs.values()):
            for _ in range(100):
                try:
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError as e:
                    if e.errno != errno.EBUSY:  # read-only here (its mount namespace): the worker removes them
                        break
                    time.sleep(0.02)  # busy: its last processes are still being torn down


def _user_namespace_maps(uid: int, gid: int, outer_uid: int, outer_gid: int) -> None:
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {outer_uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {outer_gid} 1")


def main(argv: list[str]) -> int:
    with os.fdopen(int(argv[0]), "rb") as f:
        plan = json.loads(f.read())
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "parent-death signal")
    if os.getppid() == 1:
        return 125  # the parent is already gone
    as_root = os.geteuid() == 0
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
    if as_root:
        uid, gid = int(plan["uid_base"]) + os.getpid(), int(plan["gid"])
        _check(_libc.unshare(flags), "unshare")
    else:
        uid, gid = int(plan["user_uid"]), int(plan["user_gid"])
        outer_uid, outer_gid = os.getuid(), os.getgid()
        _check(_libc.unshare(flags | CLONE_NEWUSER), "unshare (with a user namespace)")
        _user_namespace_maps(uid, gid, outer_uid, outer_gid)
    cgroup = Cgroup(int(plan["memory"]), int(plan["limits"]["nproc"])) if as_root else None
    joined_read, joined_write = os.pipe()
    pid = os.fork()
    if pid:
        # outer: put the inner process in the groups before it goes on, then report its end as ours
        os.close(joined_read)
        try:
            if cgroup is not None:
                cgroup.join(pid)
        finally:
            os.close(joined_write)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                break
            except InterruptedError:
                continue
        code = os.waitstatus_to_exitcode(status)
        if cgroup is not None:
            kills, peak = cgroup.out_of_memory()
            cgroup.remove()
            if kills:
                sys.stderr.write(f"sandbox: out of memory: its processes used more than the {plan['memory']} bytes "
                                 f"they may (peak {peak} bytes)\n")
                return 137
        return 128 - code if code < 0 else code
    os.close(joined_write)
    os.read(joined_read, 1)  # until the outer process has put this one in its groups
    os.close(joined_read)
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "parent-death signal")
    build_root(plan, uid, gid)
    confine(plan, uid, gid, as_root)
    # PID 1 stays behind as the namespace's init: not dumpable, so the program (same uid) cannot read its memory,
    # environment or descriptors through /proc/1
    _check(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "not dumpable")
    program = os.fork()
    if program == 0:
        os.chdir(plan["cwd"])
        os.execve(plan["argv"][0], plan["argv"], plan["env"])
    return _init(program)


def _init(program: int) -> int:
    """PID 1 of the namespace, as little as an init can be: it reaps every orphan, and when the program ends it
    ends with the program's status, which ends everything else in the namespace. (The program is not PID 1 itself:
    PID 1 does not die of the signals it sends itself, and a kernel that kills its own process must die.)"""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            return 125
        if pid == program:
            code = os.waitstatus_to_exitcode(status)
            return 128 - code if code < 0 else code


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (Failed, OSError, ValueError, KeyError) as e:
        sys.stderr.write(f"sandbox: {e}\n")
        sys.stderr.flush()
        os._exit(125)
