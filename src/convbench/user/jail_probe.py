"""The sandbox's self-test, inside: what a process in the sandbox can see and do, as one JSON object on stdout.

Run by sandbox.self_test in a sandbox made exactly as a submission's is (`python -I -S jail_probe.py ARGS_JSON`,
standard library only). It tries what an escaping kernel would try and reports what happened; sandbox.py holds the
expectations and judges. ARGS_JSON: {"absent": [paths that must not exist], "writable": [paths that must be]}.
"""

import ctypes
import errno
import json
import os
import resource
import socket
import sys


def _errno_of(fn) -> str:
    """'ok', or the errno name the attempt failed with."""
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def _status() -> dict:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"):
                out[key] = value.strip()
    return out


def _libc_call(name: str, *args) -> str:
    libc = ctypes.CDLL(None, use_errno=True)
    r = getattr(libc, name)(*args)
    return "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))


def _write(path: str) -> str:
    def attempt():
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
        os.close(fd)
        os.unlink(path)

    return _errno_of(attempt)


def _size(path: str) -> int | None:
    try:
        st = os.statvfs(path)
        return st.f_blocks * st.f_frsize
    except OSError:
        return None


def _connect() -> str:
    def attempt():
        with socket.create_connection(("1.1.1.1", 53), timeout=2):
            pass

    try:
        return _errno_of(attempt)
    except (TimeoutError, socket.timeout):
        return "timeout"


def main(args: dict) -> dict:
    limits = {name: resource.getrlimit(getattr(resource, name))[0]
              for name in ("RLIMIT_NPROC", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE")}
    return {
        "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups(),
        "status": _status(),
        "setuid_root": _errno_of(lambda: os.setuid(0)),
        "write_root": _write("/convbench-probe"),
        "write_system": _write(os.path.join(sys.prefix, "convbench-probe")),
        "writable": {p: _write(os.path.join(p, "convbench-probe")) for p in args.get("writable", [])},
        "sizes": {p: _size(p) for p in ("/tmp", "/dev/shm", *args.get("writable", []))},
        "interfaces": sorted(name for _, name in socket.if_nameindex()),
        "connect": _connect(),
        "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
        "mount": _libc_call("mount", b"tmpfs", b"/tmp", b"tmpfs", 0, None),
        "unshare_user": _libc_call("unshare", 0x10000000),
        "gpu_nodes": sorted(n for n in os.listdir("/dev") if n.startswith("nvidia")),
        "nvidia_gpus": sorted(os.listdir("/proc/driver/nvidia/gpus")) if os.path.isdir(
            "/proc/driver/nvidia/gpus") else [],
        "present": [p for p in args.get("absent", []) if os.path.lexists(p)],
        "limits": limits,
        "hostname": socket.gethostname(),
        "cgroups": open("/proc/self/cgroup").read().split(),
    }


if __name__ == "__main__":
    sys.stdout.write(json.dumps(main(json.loads(sys.argv[1]))) + "\n")
