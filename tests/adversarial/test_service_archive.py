"""Issue 27, point 3: uploads are archives from an attacker. A 400 KB gzip bomb made of one huge PAX header cost the
server 0.6 GB and most of a minute, parsed on the event loop (/api/health stalled); a tar holding `sub` (a file)
then `sub/k.py` raised a raw FileExistsError. Now every header is bounded before tarfile reads it, every byte
tarfile reads comes through a reader bounded in total, the parse runs in a worker thread, and a tree that cannot be
one (a file that is also a folder, a name twice) is one line. Unpacking creates files with O_EXCL | O_NOFOLLOW."""

from __future__ import annotations

import io
import os
import tarfile
import threading
import time
import tracemalloc
import zlib

import pytest
from servicehelp import Server, add_team, database_url, run_convbench

pytest.importorskip("fastapi", reason="the service extra is not installed: pip install -e '.[test,service]'")

import httpx  # noqa: E402

from convbench.core.errors import UsageError  # noqa: E402
from convbench.service import archive  # noqa: E402


def _gzip_stream(*parts) -> bytes:
    """gzip of the concatenated parts (bytes, or (record, count) repeated count times), compressed as it goes: the
    test never holds the expanded stream."""
    gz = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = []
    for part in parts:
        if isinstance(part, bytes):
            out.append(gz.compress(part))
            continue
        record, count = part
        chunk = record * (1 << 14)
        while count > 0:
            n = min(count, 1 << 14)
            out.append(gz.compress(chunk[: n * len(record)]))
            count -= n
    out.append(gz.flush())
    return b"".join(out)


def _header(name: str, kind: bytes, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, size
    return info.tobuf(format=tarfile.USTAR_FORMAT)


def pax_bomb(header_bytes: int = 256 << 20) -> bytes:
    """A gzip'd tar whose first entry is a PAX header of header_bytes of tiny records (the attack's shape)."""
    record = b"18 comment=xxxxxx\n"
    count = header_bytes // len(record)
    pad = (-count * len(record)) % 512
    return _gzip_stream(_header("././@PaxHeader", tarfile.XHDTYPE, count * len(record)), (record, count),
                        b"\0" * pad, _header("k.py", tarfile.REGTYPE, 0), b"\0" * 1024)


def _tar(*entries: tuple[str, bytes | None]) -> bytes:
    """A gzip'd tar of (name, content) entries in order; content None: a folder."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, content in entries:
            info = tarfile.TarInfo(name)
            if content is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


@pytest.mark.parametrize("make, fragment", [
    (lambda: pax_bomb(), "extended header"),
    (lambda: _gzip_stream(*[_header("././@LongLink", tarfile.GNUTYPE_LONGNAME, 512) + b"a" * 512] * 3000,
                          _header("k.py", tarfile.REGTYPE, 0), b"\0" * 1024), "in a row"),
    (lambda: _gzip_stream(*[_header("././@PaxHeader", tarfile.XHDTYPE, archive.MAX_HEADER)
                            + b"0" * archive.MAX_HEADER + _header(f"sub/k{i}.py", tarfile.REGTYPE, 0)
                            for i in range(400)], b"\0" * 1024), "extended header"),
    (lambda: _gzip_stream(_header("k.py", tarfile.REGTYPE, 0), (b"\0", 1 << 28)), None),
], ids=["pax-bomb", "gnu-longname-chain", "many-pax-headers", "zeros-after-the-end"])
def test_header_bombs_stop_at_the_bound(make, fragment):
    """The attack: headers tarfile would read whole and parse in Python (a 256 MB PAX header, a chain of GNU long
    names, many PAX headers each at the per-header bound, of digits: Python 3.11's PAX parser takes time quadratic in
    a header's size on those), or a stream that goes on after the archive's end. Each is a one-line refusal within
    two seconds, holding a few MB at most."""
    bomb = make()
    assert len(bomb) < 2 << 20  # it fits the default upload limit
    tracemalloc.start()
    began = time.monotonic()
    try:
        archive.top_name(bomb)
        refused = None
    except UsageError as e:
        refused = str(e)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    seconds = time.monotonic() - began
    if fragment is None:  # 256 MB of zeros after the end: tarfile stops at the end blocks, never reads them
        assert refused is None
    else:
        assert refused is not None and fragment in refused and "\n" not in refused, refused
    assert seconds < 2 and peak < 64 << 20, (seconds, peak)


@pytest.mark.parametrize("entries, fragment", [
    ([("sub", b"x"), ("sub/k.py", b"y")], "both as a file and as the folder"),
    ([("sub/k.py", b"x"), ("sub/k.py", b"y")], "twice"),
    ([("sub/a", b"x"), ("sub/a", None)], "twice"),
    ([("sub/" + "k" * 300 + ".py", b"x")], "over 255 characters"),
], ids=["file-then-folder", "file-twice", "file-then-dir", "long-name"])
def test_trees_that_cannot_be_are_one_line_and_write_nothing(tmp_path, entries, fragment):
    """The attack: entries no folder can hold at once (a raw FileExistsError before), or a name no file system
    takes. Refused when the upload is read (so a bad upload never reaches a grader) and by unpack, nothing
    written."""
    data = _tar(*entries)
    with pytest.raises(UsageError, match=fragment):
        archive.top_name(data)
    with pytest.raises(UsageError, match=fragment):
        archive.unpack(data, tmp_path)
    assert not any(tmp_path.iterdir())


def test_unpack_never_overwrites_nor_follows_a_link(tmp_path):
    """The attack on the unpacking itself: a file, or a link to one outside, already where the archive puts a file
    (a reused folder). O_EXCL | O_NOFOLLOW: one line, the link's target untouched."""
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    into = tmp_path / "into"
    (into / "sub").mkdir(parents=True)
    os.symlink(outside, into / "sub" / "k.py")
    with pytest.raises(UsageError, match="cannot unpack the archive"):
        archive.unpack(_tar(("sub/k.py", b"evil")), into)
    assert outside.read_text() == "keep"


def test_a_bomb_upload_does_not_stall_the_server(tmp_path):
    """The attack end to end: the PAX bomb uploaded to a real `serve` while /api/health is asked every 50 ms. The
    upload is refused with one line; health answers throughout (the parse runs in a worker thread), and the server
    holds no more memory for it than the bound."""
    psutil = pytest.importorskip("psutil")
    url = database_url("sqlite", tmp_path)
    token = add_team(url, "mallory")
    server = Server(url, tmp_path).start()
    try:
        rss_before = psutil.Process(server.proc.pid).memory_info().rss
        bomb = pax_bomb(512 << 20)
        gaps: list[float] = []
        stop = threading.Event()

        def poll() -> None:
            while not stop.is_set():
                began = time.monotonic()
                assert httpx.get(f"{server.url}/api/health", timeout=10).status_code == 200
                gaps.append(time.monotonic() - began)
                time.sleep(0.05)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        time.sleep(0.3)
        replies = [server.api("POST", "/api/submissions", token, files={"file": ("k.tar.gz", bomb)})
                   for _ in range(3)]
        time.sleep(0.3)
        stop.set()
        poller.join(15)
        for reply in replies:
            assert reply.status_code == 400 and "extended header" in reply.json()["error"], reply.text
        assert gaps and max(gaps) < 1.0, gaps
        grown = psutil.Process(server.proc.pid).memory_info().rss - rss_before
        assert grown < 100 << 20, grown
        folder = tmp_path / "sub"
        folder.mkdir()
        (folder / "k.py").write_text("def conv_forward(x, k):\n    return x\n")
        ok = run_convbench("submit", folder, "--server", server.url, "--token", token, "--no-wait")
        assert ok.returncode == 0, ok.stderr  # the server goes on taking uploads
    finally:
        server.kill()
