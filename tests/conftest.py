"""Shared test fixtures: where the course's files are, and a CUDA marker that skips with a reason."""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

# The session's own cache (resized data, compiled kernels, measured ceilings, tuning): tests never touch the user's
# ~/.cache/convbench. Set before convbench is imported (core/jit.py reads it for numba's cache at import).
_CACHE = tempfile.mkdtemp(prefix="convbench-test-cache-")
os.environ["CONVBENCH_CACHE"] = _CACHE
os.environ.pop("NUMBA_CACHE_DIR", None)
os.environ["COLUMNS"] = "80"  # tables as an 80-column terminal shows them, whatever terminal runs the tests
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)

import pytest  # noqa: E402
import torch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# ../shared/fixtures beside the repository; $CONVBENCH_FIXTURES where that folder travels elsewhere (the GPU machine)
FIXTURES = Path(os.environ.get("CONVBENCH_FIXTURES") or REPO.parent / "shared" / "fixtures")


def fixture_file(*parts: str) -> Path:
    """A file from ../shared/fixtures (the course's original files); skip where it is absent. Never copy them."""
    path = FIXTURES.joinpath(*parts)
    if not path.is_file():
        pytest.skip(f"course fixture {path} is absent (it lives in ../shared/fixtures beside the repository)")
    return path


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU here (torch.cuda.is_available() is False); run on the device machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter):
    from test_kernels_compile import REPORT

    if REPORT:
        terminalreporter.section("nvcc -arch=sm_90 resource usage")
        for line in REPORT:
            terminalreporter.write_line(line)
