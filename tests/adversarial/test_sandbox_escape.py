"""Issue 27, points 1 and 2: a submitted kernel must not get out of its sandbox. What was found: the child ran as uid
0 with nearly every capability; it unmounted the tmpfs over /tmp, remounted / read-write and wrote on the host,
read the hidden database folder's name from /proc/1/cmdline, and read other teams' files. Each test below is one
of those attempts (and its relatives), made by a real kernel from inside the sandbox, on the CPU."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest
from sandboxhelp import attack_kernel, require_sandbox, run_attack

from convbench.user import sandbox


@pytest.fixture(autouse=True)
def _sandbox():
    require_sandbox("cpu")


def test_the_self_test_proves_every_property():
    """Not an attack: the self-test at `grade` / `serve` / `worker` start, whose every line must hold here."""
    result = sandbox.self_test("cpu")
    assert result.ok, result.problem
    assert len(result.properties) >= 14 and all(v.startswith("ok: ") for v in result.properties.values())


def test_no_privilege_inside(tmp_path):
    """uid 0, capabilities, setuid(0), a new user namespace (for capabilities of its own), ptrace of its parent."""
    seen = run_attack(attack_kernel(tmp_path, "priv.py", """
        import ctypes, errno
        seen["uid"] = os.getuid()
        seen["status"] = {l.split(":")[0]: l.split(":")[1].strip() for l in open("/proc/self/status")
                          if l.startswith(("Cap", "NoNewPrivs", "Seccomp"))}
        try:
            os.setuid(0); seen["setuid"] = "ok"
        except OSError as e:
            seen["setuid"] = errno.errorcode[e.errno]
        libc = ctypes.CDLL(None, use_errno=True)
        seen["unshare"] = libc.unshare(0x10000000) == 0
        seen["ptrace"] = libc.ptrace(16, os.getppid(), 0, 0) == 0  # PTRACE_ATTACH
    """))
    assert seen["uid"] != 0 and seen["setuid"] == "EPERM"
    assert all(int(seen["status"][k], 16) == 0 for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh"))
    assert seen["status"]["NoNewPrivs"] == "1" and seen["status"]["Seccomp"] == "2"
    assert seen["unshare"] is False and seen["ptrace"] is False


def test_mounts_cannot_be_changed_and_the_host_cannot_be_written(tmp_path):
    """The first finding's attack: unmount the tmpfs over /tmp, remount / read-write, write on the host."""
    marker = f"convbench-escape-{uuid.uuid4().hex}"
    sys_prefix = sys.prefix
    seen = run_attack(attack_kernel(tmp_path, "mounts.py", f"""
        import ctypes, errno
        libc = ctypes.CDLL(None, use_errno=True)
        seen["umount_tmp"] = libc.umount2(b"/tmp", 2) == 0
        seen["remount_root"] = libc.mount(None, b"/", None, 32 | 4096, None) == 0
        for target in ("/{marker}", "/usr/{marker}", {str(tmp_path / marker)!r}, {sys_prefix!r} + "/{marker}"):
            try:
                open(target, "w").write("x"); seen[target] = "written"
            except OSError as e:
                seen[target] = errno.errorcode[e.errno]
    """))
    assert seen["umount_tmp"] is False and seen["remount_root"] is False
    written = [k for k, v in seen.items() if v == "written"]
    assert not written, written
    assert not list(Path("/").glob(marker)) and not (tmp_path / marker).exists()


def test_nothing_secret_in_proc_and_no_other_process(tmp_path):
    """/proc/1/cmdline gave away the hidden database folder; /proc listed the host's processes; the environment held
    the grader's variables (database URL, tokens)."""
    os.environ["CONVBENCH_DB"] = "postgresql://grader:s3cret@db/course"
    try:
        seen = run_attack(attack_kernel(tmp_path, "procs.py", """
            seen["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
            seen["cmdline1"] = open("/proc/1/cmdline", "rb").read().decode(errors="replace")
            seen["environ"] = {k: v for k, v in os.environ.items()}
            seen["cwd"] = os.getcwd()
        """))
    finally:
        del os.environ["CONVBENCH_DB"]
    assert len(seen["pids"]) <= 3, seen["pids"]
    assert "s3cret" not in str(seen) and "CONVBENCH_DB" not in seen["environ"]
    assert str(tmp_path) not in seen["cmdline1"] and "convbench-submission" not in seen["cmdline1"]


def test_private_folders_are_absent_not_hidden(tmp_path, monkeypatch):
    """The database folder, the staff's files, convbench's cache and the homes are not in the sandbox at all (no
    tmpfs to unmount over them), and neither are other submissions: not the folder this one came from."""
    staff = tmp_path / "staff"
    staff.mkdir()
    (staff / "weights-86.bin").write_bytes(b"secret weights")
    monkeypatch.setenv("CONVBENCH_SANDBOX_HIDE", str(staff))
    sandbox.self_test.cache_clear()
    other = tmp_path / "other-team.py"
    other.write_text("SECRET = 'the other team'\n")
    from convbench.core.paths import cache_dir

    cache = cache_dir()
    (tmp_path / "mine").mkdir()
    # the homes, /run, /var: absent, but for the way to this machine's Python where it lives in one (pyenv's)
    private = [str(staff), str(other), str(cache), str(tmp_path), *sandbox.must_be_absent()]
    assert str(staff) in sandbox.must_be_absent()
    seen = run_attack(attack_kernel(tmp_path / "mine", "peek.py", f"""
        for p in {private!r}:
            seen[p] = os.path.exists(p)
        seen["submission"] = sorted(os.listdir(os.path.dirname(os.path.abspath(__file__))))
    """))
    sandbox.self_test.cache_clear()
    present = [p for p, there in seen.items() if there is True]
    assert not present, present
    assert seen["submission"] == ["peek.py"]  # a Python file with nothing beside it: only itself


def test_no_network(tmp_path):
    """A kernel that phones home: no interface but loopback, no route."""
    seen = run_attack(attack_kernel(tmp_path, "net.py", """
        import socket
        seen["interfaces"] = [n for _, n in socket.if_nameindex()]
        try:
            socket.create_connection(("1.1.1.1", 53), timeout=2); seen["connect"] = "connected"
        except OSError as e:
            seen["connect"] = type(e).__name__
    """))
    assert seen["interfaces"] in ([], ["lo"]) and seen["connect"] != "connected"


def test_graded_files_side_by_side_do_not_see_each_other(tmp_path):
    """`grade a.py b.py` with both in one folder (a class's files side by side): each sees itself alone."""
    from convbench.measure.timed_calls import open_submission
    from convbench.user.worker import as_impl

    attack_kernel(tmp_path, "b.py", "seen['b'] = True")
    worker = open_submission(attack_kernel(tmp_path, "a.py", """
        seen["listing"] = sorted(os.listdir(os.path.dirname(os.path.abspath(__file__))))
        seen["b_there"] = any(os.path.exists(p) for p in ("b.py", "/submission/b.py"))
    """))
    try:
        impl = as_impl(worker)
        import torch

        impl(torch.randn(1, 1, 5, 5), torch.randn(1, 1, 3, 3))
        text = worker.captured_text()
    finally:
        worker.remove()
    assert '"listing": ["a.py"]' in text and '"b_there": false' in text, text[-1000:]
