"""An upload turned into a queued submission: read with its size bounded, checked (a browser's single file or
`convbench submit`'s archive, what this server can grade), stored by the store."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fastapi import UploadFile
from sqlalchemy.orm import sessionmaker
from starlette.concurrency import run_in_threadpool

from convbench.service import archive, store
from convbench.service.db import Submission, Team
from convbench.service.policy import Policy

GZIP_MAGIC = b"\x1f\x8b"  # convbench submit's archive (a file or a folder); anything else is a browser's file


@dataclass(frozen=True)
class Upload:
    """A submission as sent: its team (already checked), the file, the milestone it says it counts for."""

    team: Team
    file: UploadFile
    milestone: str | None


async def read_upload(upload: UploadFile, policy: Policy) -> bytes:
    """The upload's bytes; no more than the limit is ever read."""
    data = await upload.read(policy.max_upload_bytes + 1)
    if len(data) > policy.max_upload_bytes:
        raise store.Refused(f"the upload is over the {policy.max_upload_bytes} bytes a submission may have", 413)
    if not data:
        raise store.Refused("the upload is empty; choose the kernel file", 400)
    return data


def _browser_file_name(name: str) -> str:
    """A browser's single file: its name alone (some browsers send C:\\fakepath\\NAME), a kernel's suffix."""
    name = store.check_filename(Path((name or "").replace("\\", "/")).name or "the upload")
    if not name.endswith((".cu", ".cuh", ".py")):
        raise store.Refused(f"{name}: upload a kernel file (.cu, .cuh or .py), or use `convbench submit` for "
                            "a folder", 415)
    return name


def queue_upload(sessions: sessionmaker, policy: Policy, team: Team, name: str, data: bytes,
                 milestone: str | None) -> Submission:
    """Check and store an upload (blocking: called in a worker thread)."""
    milestone = store.check_milestone(milestone or policy.current_milestone())
    if data[:2] == GZIP_MAGIC:
        contents = archive.inspect(data)
        name, cuda = contents.top, contents.has_suffix(archive.CUDA_SUFFIXES)
    else:
        name = _browser_file_name(name)
        cuda = name.endswith(archive.CUDA_SUFFIXES)
    if cuda and policy.device == "cpu":  # it would fail to build, and the verdict would blame the file
        raise store.Refused(f"{name}: this server grades on the CPU and only takes Python kernels (.py); submit "
                            "CUDA files (.cu, .cuh) to a server with a GPU", 415)
    if data[:2] != GZIP_MAGIC:
        data = archive.single_file(name, data)
    return store.add_submission(sessions, team, name, data, milestone, policy.deadline(milestone),
                                policy.rate_limit_s)


async def accept(sessions: sessionmaker, policy: Policy, upload: Upload) -> Submission:
    """The upload read (on the event loop, bounded) and queued (the archive's checks and the database in a worker
    thread, never on the event loop)."""
    data = await read_upload(upload.file, policy)
    return await run_in_threadpool(queue_upload, sessions, policy, upload.team, upload.file.filename or "", data,
                                   upload.milestone)
