"""Issue 27, points 1 and 6 (findings 2, 4, 5, 7): nothing a submission writes is ever read by trusted code, and
nothing one submission writes reaches the next. What was found: $CONVBENCH_CACHE was bound read-write into the
sandbox, so a kernel replaced numba's cache index with a pickle that the next plain `convbench run` executed as
root; rewrote the cached test set (and its unkeyed checksum) so an honest submission graded next got "wrong
answer"; wrote the ceilings cache; and built CUDA libraries lay in that shared cache for the next kernel to read
or replace. Each test is one such kernel, on the CPU."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import torch
from sandboxhelp import attack_kernel, require_sandbox, run_attack

from convbench import user
from convbench.core.paths import cache_dir
from convbench.user import sandbox


@pytest.fixture(autouse=True)
def _sandbox():
    require_sandbox("cpu")


def tree_digest(folder: Path) -> str:
    """Every file under `folder` by name and content."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def test_the_trusted_cache_is_out_of_reach(capsys, tmp_path):
    """The kernel goes for convbench's cache, wherever $CONVBENCH_CACHE says it is: numba's index, the resized test
    set, the ceilings. The cache is not there; its own $CONVBENCH_CACHE is a private folder; the real one is
    unchanged afterwards, and a plain run still prints the right Correctness."""
    from clihelp import cli

    rc, out, _ = cli(capsys, "run", "--size", "50")  # fills the cache: resized set, numba's compiled kernels
    assert rc == 0
    before = tree_digest(cache_dir())
    seen = run_attack(attack_kernel(tmp_path, "poison.py", f"""
        import glob
        seen["env_cache"] = os.environ.get("CONVBENCH_CACHE")
        seen["real_cache_there"] = os.path.exists({str(cache_dir())!r})
        written = []
        for folder in (os.environ.get("CONVBENCH_CACHE", ""), {str(cache_dir())!r}):
            for name in ("t10k-86px-poison.npy", "ceilings-cpu.json", "numba/index.nbi"):
                try:
                    path = os.path.join(folder, name)
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    open(path, "wb").write(b"poison"); written.append(path)
                except OSError:
                    pass
        seen["written"] = written
    """))
    assert seen["real_cache_there"] is False and seen["env_cache"] != str(cache_dir())
    # what it wrote (a path like the cache's, under its own /tmp) is in its own folders, gone with it
    assert tree_digest(cache_dir()) == before
    rc, out2, _ = cli(capsys, "run", "--size", "50")
    assert rc == 0 and out2.splitlines()[-1] == out.splitlines()[-1]  # the same Correctness line


def test_one_submissions_files_never_reach_the_next(tmp_path):
    """Submission A leaves files everywhere it can write (its cache, /tmp, /dev/shm, HOME); submission B, started
    after it, finds none of them."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    places = ["os.environ['CONVBENCH_CACHE']", "'/tmp'", "'/dev/shm'", "os.environ['HOME']", "os.getcwd()"]
    seen_a = run_attack(attack_kernel(tmp_path / "a", "a.py", f"""
        left = []
        for folder in [{", ".join(places)}]:
            try:
                os.makedirs(folder, exist_ok=True)
                open(os.path.join(folder, "left-by-a"), "w").write("a"); left.append(folder)
            except OSError as e:
                seen[folder] = str(e)
        seen["left"] = left
    """))
    assert len(seen_a["left"]) >= 4, seen_a
    seen_b = run_attack(attack_kernel(tmp_path / "b", "b.py", f"""
        seen["found"] = [f for f in [{", ".join(places)}] if os.path.exists(os.path.join(f, "left-by-a"))]
    """))
    assert seen_b["found"] == []


def test_the_build_folder_is_read_only_while_the_submission_runs(tmp_path):
    """A kernel that tries to replace what was built for it (a CUDA file's libuser.so lies there), or to plant
    something for a later run: the build folder is mounted, read-only."""
    seen = run_attack(attack_kernel(tmp_path, "rebuild.py", """
        import errno
        seen["builds"] = os.environ.get("CONVBENCH_BUILDS")
        try:
            open(os.path.join(seen["builds"], "libuser.so"), "wb").write(b"replaced"); seen["write"] = "ok"
        except OSError as e:
            seen["write"] = errno.errorcode[e.errno]
    """))
    assert seen["builds"] == sandbox.BUILDS and seen["write"] in ("EROFS", "EACCES")


def test_symlinks_planted_for_trusted_writes_lead_nowhere(tmp_path):
    """The finding: symlinks named like the resized set's temp file, pointing at the database, were followed by the
    rebuild. Inside the sandbox the cache folder does not exist, and every folder it can write is its own tmpfs:
    a planted link is gone with it. (Trusted writes refusing to follow links: tests/test_cache_files.py.)"""
    victim = tmp_path / "victim.db"
    victim.write_bytes(b"the database")
    (tmp_path / "k").mkdir()
    seen = run_attack(attack_kernel(tmp_path / "k", "plant.py", f"""
        planted = []
        for folder in ({str(cache_dir())!r}, "/tmp", os.environ["CONVBENCH_CACHE"]):
            try:
                os.makedirs(folder, exist_ok=True)
                for pid in range(1, 200):
                    os.symlink({str(victim)!r}, os.path.join(folder, f"t10k-86px.npy.{{pid}}.tmp"))
                planted.append(folder)
            except OSError:
                pass
        seen["planted"] = planted
    """))
    # planted where it could write (a path like the cache's inside its own /tmp included): none of it is on the host
    assert seen["planted"] and not list(cache_dir().glob("*.tmp")) and victim.read_bytes() == b"the database"
    # the trusted side rebuilding its set now follows nothing
    from convbench.data.fashion_mnist import load_dataset

    assert load_dataset(86, count=10, quiet=True).images.shape == (10, 86, 86)
    assert victim.read_bytes() == b"the database"


def test_a_submissions_own_caches_work(tmp_path):
    """Not an attack: a kernel that uses the caches it is given (numba's, its home) runs, twice."""
    path = tmp_path / "jit.py"
    path.write_text("import numba, numpy as np, torch, torch.nn.functional as F\n"
                    "@numba.njit(cache=True)\ndef twice(a):\n    return a * 2\n"
                    "def conv_forward(x, k):\n    twice(np.ones(3))\n    return F.conv2d(x, k)\n")
    impl = user.load(path)
    x, k = torch.randn(1, 1, 5, 5), torch.randn(1, 1, 3, 3)
    for _ in range(2):
        torch.testing.assert_close(impl(x, k), torch.nn.functional.conv2d(x, k))
    assert os.environ.get("CONVBENCH_CACHE") == str(cache_dir())  # this process's own cache is its own
