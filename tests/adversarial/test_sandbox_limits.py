"""Issue 27, points 2 and 10-11: a submission is bounded in everything it can use, and leaves nothing behind. What was
found: 1 GiB of kernel output went to a host /tmp file (the grader's memory growing); 1 GiB left in /dev/shm beyond
the memory limit; 512 MiB left in the cache; 300 processes; no whole-submission time limit (175 s under a 10 s
per-call limit). Each test is one such kernel, on the CPU."""

from __future__ import annotations

import contextlib
import os
import resource
import time

import pytest
import torch
from sandboxhelp import attack_kernel, require_sandbox, run_attack

from convbench import user
from convbench.core.errors import UsageError
from convbench.user import sandbox


@pytest.fixture(autouse=True)
def _sandbox():
    require_sandbox("cpu")


def sandbox_processes(uid: int) -> list[int]:
    """PIDs of this machine's processes running as `uid` (a sandbox's: UID_BASE + its launcher's PID)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    found.append(int(entry))
            except OSError:
                continue
    return found


def test_output_is_bounded_and_escaped(tmp_path):
    """200 MiB printed in one call, with terminal escapes: the grader keeps the last 64 KiB, escaped, and its own
    memory does not grow with the output."""
    path = attack_kernel(tmp_path, "loud.py", """
        line = "\\x1b[2J\\x1b[31mred alert " + "x" * 1000 + "\\n"
        for _ in range(200 * 1024):
            sys.stdout.write(line)
        sys.stdout.flush()
        seen["printed"] = True
    """)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    impl = user.load(path)
    worker = impl.fn.worker
    worker.quiet = True
    impl(torch.randn(1, 1, 5, 5), torch.randn(1, 1, 3, 3))
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    text = worker.captured_text()
    assert worker.output_total > 190 << 20 and len(text) < 80 << 10
    assert "bytes before these not kept" in text and "\x1b" not in text and "\\x1b[2J" in text
    assert grown_mib < 100, f"the grader grew by {grown_mib:.0f} MiB"


@pytest.mark.parametrize("folder, limit", [("/dev/shm", sandbox.SHM_BYTES), ("/tmp", sandbox.TMP_BYTES),
                                           (sandbox.SCRATCH, sandbox.SCRATCH_BYTES)])
def test_its_own_folders_are_bounded_and_gone_after(tmp_path, folder, limit):
    """Fill /dev/shm, /tmp or /scratch: the write stops at the folder's size (or the file size limit), and nothing
    of it is on the host afterwards."""
    marker = f"convbench-fill-{os.getpid()}-{folder.strip('/').replace('/', '-')}"
    seen = run_attack(attack_kernel(tmp_path, "fill.py", f"""
        import errno
        written = 0
        chunk = b"x" * (16 << 20)
        try:
            with open({folder!r} + "/" + {marker!r}, "wb") as f:
                while written < {limit} + (512 << 20):
                    f.write(chunk); f.flush(); written += len(chunk)
        except OSError as e:
            seen["error"] = errno.errorcode.get(e.errno, str(e.errno))
        seen["written"] = written
    """))
    assert seen["error"] in ("ENOSPC", "EFBIG") and seen["written"] <= limit, seen
    assert not any(p.name == marker for p in (tmp_path.parent.glob("*"))) and not os.path.exists(f"/tmp/{marker}")
    assert not os.path.exists(f"/dev/shm/{marker}")


def test_processes_are_bounded_and_none_outlives_the_sandbox(tmp_path):
    """A fork bomb (children that sleep), and a daemon that leaves its session: forks stop at the limit, and once
    the sandbox is closed no process of its uid is left on the machine."""
    path = attack_kernel(tmp_path, "forks.py", """
        import errno, time
        children = 0
        try:
            for _ in range(5000):
                pid = os.fork()
                if pid == 0:
                    time.sleep(600); os._exit(0)
                children += 1
        except OSError as e:
            seen["error"] = errno.errorcode.get(e.errno, str(e.errno))
        seen["children"] = children
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(600)
            os._exit(0)
    """)
    impl = user.load(path)
    worker = impl.fn.worker
    worker.quiet = True
    uid = sandbox.UID_BASE + worker.proc.pid
    with contextlib.suppress(UsageError):  # with every process slot taken, its own threads may fail next: its loss
        impl(torch.randn(1, 1, 5, 5), torch.randn(1, 1, 3, 3))
    text = worker.captured_text()
    assert '"error": "EAGAIN"' in text and '"children": ' in text, text[-500:]
    children = int(text.split('"children": ')[1].split("}")[0].split(",")[0])
    assert children < sandbox.PROCESSES
    worker.close()
    deadline = time.monotonic() + 10
    while sandbox_processes(uid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not sandbox_processes(uid)


def test_a_whole_submission_has_a_time_limit(tmp_path, monkeypatch):
    """Each call within the per-call limit, but one after the other without end: the whole submission stops at
    its own limit (the finding: 175 s under a 10 s per-call limit)."""
    monkeypatch.setenv("CONVBENCH_SANDBOX_TOTAL_TIMEOUT", "6")
    impl = user.load(attack_kernel(tmp_path, "dawdle.py", "import time; time.sleep(1.5)"))
    impl.fn.worker.quiet = True
    calls = 0
    with pytest.raises(UsageError, match=r"dawdle\.py: used up the 6 s a submission may run in the sandbox") as e:
        for _ in range(20):
            impl(torch.randn(1, 1, 5, 5), torch.randn(1, 1, 3, 3))
            calls += 1
    # stopped at its limit: no more than 6 s of 1.5 s calls got through (a loaded machine gets fewer, never more)
    assert e.value.verdict == "timeout" and calls <= 4, calls


def test_a_bad_limit_setting_is_one_line_before_anything_starts(tmp_path, monkeypatch):
    """CONVBENCH_SANDBOX_TIMEOUT=abc was one line and then a BrokenPipeError: now the line alone, no child."""
    monkeypatch.setenv("CONVBENCH_SANDBOX_TIMEOUT", "abc")
    with pytest.raises(UsageError, match=r"CONVBENCH_SANDBOX_TIMEOUT=abc is not a positive number of seconds"):
        user.load(attack_kernel(tmp_path, "fine.py", "pass"))


def test_memory_is_bounded(tmp_path, monkeypatch):
    """6 GiB asked for under a 2 GiB limit: stopped (by the kernel, through the sandbox's memory group, or by the
    watch), in one line naming the limit."""
    monkeypatch.setenv("CONVBENCH_SANDBOX_MEMORY", "2")
    impl = user.load(attack_kernel(tmp_path, "hog.py", "a = [bytearray(256 << 20) for _ in range(24)]"))
    impl.fn.worker.quiet = True
    with pytest.raises(UsageError, match=r"hog\.py: used (\d+\.\d GiB of memory, over|more than) the sandbox's 2\.0 GiB"):
        impl(torch.randn(1, 1, 5, 5), torch.randn(1, 1, 3, 3))


def test_memory_is_said_in_units_that_mean_something():
    """The finding: "used 0.0 GiB of memory, over the sandbox's 0.0 GiB". Under a GiB, MiB."""
    from convbench.user.worker import _gib

    assert (_gib(256 << 20), _gib(1 << 20), _gib(3 << 29)) == ("256 MiB", "1 MiB", "1.5 GiB")
