"""Files convbench's own code keeps in its cache (core/cachefile.py): a symlink planted there (a sandboxed kernel can
write into the cache) is never followed, whatever name it takes: the old fixed temporary names, the final name, a
folder. The victim stays untouched and the cache is still right."""

from __future__ import annotations

import json
import os
import stat
import time

import numpy as np
import pytest

import convbench.data.fashion_mnist as fm
from convbench.core import cachefile
from convbench.core.gpu import tuning
from convbench.data.idx import write_idx
from convbench.measure import ceilings

VICTIM = b"the grading service's database: must survive\n"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CONVBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def victim(tmp_path):
    path = tmp_path / "victim" / "service.db"
    path.parent.mkdir()
    path.write_bytes(VICTIM)
    path.chmod(0o640)
    return path


def untouched(victim) -> bool:
    return (victim.read_bytes() == VICTIM and stat.S_IMODE(victim.stat().st_mode) == 0o640
            and sorted(os.listdir(victim.parent)) == ["service.db"])


def plant(link, target) -> None:
    link.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.symlink(target, link)


def old_temp_names(name: str) -> list[str]:
    """What the old code wrote through: `<name>.<pid>.tmp`, this process's pid and its neighbours."""
    return [f"{name}.{pid}.tmp" for pid in range(os.getpid() - 3, os.getpid() + 4)]


def test_resized_set_never_writes_through_a_planted_symlink(tmp_path, cache, victim, monkeypatch):
    monkeypatch.setattr(fm, "SYSTEM_DIR", tmp_path / "system")
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (12, 28, 28), dtype=np.uint8)
    (tmp_path / "d").mkdir()
    write_idx(tmp_path / "d" / fm.SPLITS["t10k"][0], images)
    write_idx(tmp_path / "d" / fm.SPLITS["t10k"][1], rng.integers(0, 10, 12, dtype=np.uint8))
    src = fm.locate(data_dir=tmp_path / "d")
    name = f"t10k-40px-{fm._checksum(src.images)}-{fm.RECIPE}.npy"
    for tmp in old_temp_names(name):
        plant(cache / tmp, victim)
    plant(cache / name, victim)  # the final name too: read, it is "not a regular file"; written, it is replaced

    out = fm.resized(images, 40, src, "t10k", quiet=True)

    assert untouched(victim)
    assert stat.S_ISREG(os.lstat(cache / name).st_mode)  # the symlink itself was replaced by the cache file
    assert sorted(os.listdir(cache)) == [name]  # the planted temporary names are gone, no leftover of ours
    np.testing.assert_array_equal(np.load(cache / name), out)
    np.testing.assert_array_equal(out[5], fm.resize_course(images[5], 40))
    np.testing.assert_array_equal(fm.resized(images, 40, src, "t10k", quiet=True), out)  # and it is read back


def test_the_cache_folder_is_made_private(tmp_path, cache):
    images = np.zeros((2, 28, 28), np.uint8)
    src = fm.DataSource(tmp_path, "test", tmp_path / "i", tmp_path / "l")
    (tmp_path / "i").write_bytes(b"x")
    fm.resized(images, 30, src, "t10k", quiet=True)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    cachefile.write_bytes(cache / "ceilings" / "m.json", b"{}")
    assert stat.S_IMODE((cache / "ceilings").stat().st_mode) == 0o700
    assert stat.S_IMODE((cache / "ceilings" / "m.json").stat().st_mode) == 0o600


def test_ceilings_never_write_through_a_planted_symlink(cache, victim, monkeypatch):
    monkeypatch.setattr(ceilings, "measure", lambda device: ceilings.Ceilings("m", device, 1e10, 1e11, None, "now"))
    path = ceilings.cache_file("cpu")
    for tmp in old_temp_names(path.name) + [f".{path.name}.abcdefgh.tmp"]:
        plant(path.parent / tmp, victim)
    plant(path, victim)  # the final name: the old code refused it and never cached again

    c, fresh = ceilings.load("cpu")

    assert fresh and untouched(victim)
    assert stat.S_ISREG(os.lstat(path).st_mode) and json.loads(path.read_text())["measured"] == "now"
    assert sorted(os.listdir(path.parent)) == [path.name]
    assert ceilings.load("cpu") == (c, False)  # cached, and read back


def test_a_folder_of_the_cache_planted_as_a_symlink_is_replaced_not_followed(cache, victim, monkeypatch, capsys):
    monkeypatch.setattr(ceilings, "measure", lambda device: ceilings.Ceilings("m", device, 1e10, 1e11, None, "now"))
    cache.mkdir(mode=0o700)
    plant(cache / "ceilings", victim.parent)  # the old code wrote the ceilings into the victim's folder

    ceilings.load("cpu")

    assert untouched(victim)
    assert stat.S_ISDIR(os.lstat(cache / "ceilings").st_mode)
    assert json.loads(ceilings.cache_file("cpu").read_text())["measured"] == "now"
    assert "was a symlink (not made by convbench); removed it" in capsys.readouterr().err


def test_tuning_choices_never_write_through_a_planted_symlink(cache, victim):
    tuning._table.cache_clear()
    path = tuning.user_file()
    for tmp in old_temp_names(path.name):
        plant(path.parent / tmp, victim)
    plant(path, victim)

    tuning.record("gpu-test", "C1M4K7H86W86", {"TILE": 16})

    assert untouched(victim)
    assert stat.S_ISREG(os.lstat(path).st_mode)
    assert json.loads(path.read_text()) == {"gpu-test": {"C1M4K7H86W86": {"TILE": 16}}}
    assert sorted(os.listdir(path.parent)) == [path.name]
    tuning._table.cache_clear()


def test_the_temporary_file_is_created_exclusively(cache, victim, monkeypatch):
    """Even a symlink planted at the very random name a write draws is not opened through (O_EXCL | O_NOFOLLOW):
    the write fails, the victim stays as it was, and nothing is left."""
    monkeypatch.setattr(cachefile.secrets, "token_hex", lambda n: "feedface")
    target = cache / "tuning" / "x.json"
    plant(target.parent / ".x.json.feedface.tmp", victim)
    monkeypatch.setattr(cachefile, "_clean_leftovers", lambda fd, where: None)  # keep it there for the test
    with pytest.raises(FileExistsError):
        cachefile.write_bytes(target, b"new")
    assert untouched(victim) and not target.exists()


def test_leftovers_are_cleaned_by_age(cache):
    folder = cache / "ceilings"
    folder.mkdir(parents=True)
    stale, fresh = folder / ".a.json.0123456789abcdef.tmp", folder / "a.json.4242.tmp"
    stale.write_bytes(b"a writer killed an hour ago")
    fresh.write_bytes(b"a writer at work")
    old = time.time() - cachefile.LEFTOVER_AGE_S - 60
    os.utime(stale, (old, old))
    other = folder / "notes.txt"
    other.write_bytes(b"not a temporary file")
    cachefile.write_bytes(folder / "b.json", b"{}")
    assert sorted(os.listdir(folder)) == ["a.json.4242.tmp", "b.json", "notes.txt"]


def test_reading_refuses_what_is_not_a_regular_file(cache, victim):
    (cache / "ceilings").mkdir(parents=True)
    os.mkfifo(cache / "ceilings" / "fifo.json")  # opened without O_NONBLOCK, a FIFO would hang the reader
    plant(cache / "ceilings" / "link.json", victim)
    for name in ("fifo.json", "link.json"):
        with pytest.raises(cachefile.NotRegular):
            cachefile.read_bytes(cache / "ceilings" / name)
    with pytest.raises(FileNotFoundError):
        cachefile.read_bytes(cache / "ceilings" / "absent.json")


def test_an_output_file_whose_temporary_name_became_a_symlink_is_refused(tmp_path, victim):
    """measure/outfiles.py: a temporary file swapped for a symlink while it was written is never renamed into place
    nor chmod-ed through (the old code made the victim world-readable and renamed the link over the target)."""
    from convbench.core.errors import UsageError
    from convbench.measure import outfiles

    target = tmp_path / "out" / "grades.json"
    target.parent.mkdir()
    with pytest.raises(UsageError, match="was replaced by a symlink"), outfiles.temp_beside(target) as tmp:
        tmp.unlink()
        os.symlink(victim, tmp)
    assert untouched(victim) and os.listdir(target.parent) == []
