"""Shared test fixtures: where the course's files are, a CUDA marker that skips with a reason, and the two tiers.

The default tier (`pytest`) leaves out the tests marked `slow` or `service`: the grading service (its pages, the
browser, PostgreSQL, Dask) and the slow grades and sandbox runs. `pytest --full` runs them too (CI does); so does
`-m EXPR`, and a test named by file or node id runs whatever its tier."""

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


FULL_TIER = ("slow", "service")  # markers of the tests only `pytest --full` runs
# Whole files marked slow: the sandbox attacked through real sandboxed children, several per test (the checks of
# its messages without a child, test_sandbox_protocol.py, stay in the default tier).
SLOW_FILES = {"test_sandbox_caches.py", "test_sandbox_escape.py", "test_sandbox_limits.py", "test_sandbox_timing.py"}
_LEFT_OUT = pytest.StashKey[int]()  # how many the default tier left out, for the summary


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true",
                     help="the full tier: also the tests marked slow or service (the grading service, browser, "
                          "PostgreSQL, slow grades); CI runs it")


def _tiered(config) -> bool:
    """The default tier applies unless --full, a -m expression, or a test file or node named on the command line."""
    named = any("::" in a or a.endswith(".py") for a in config.args)
    return not (config.getoption("--full") or config.getoption("markexpr") or named)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name.startswith("test_service"):  # by name: a new service test file joins the full tier too
            item.add_marker(pytest.mark.service)
        elif item.path.name in SLOW_FILES:
            item.add_marker(pytest.mark.slow)
    if _tiered(config):
        full = {i for i in items if any(i.get_closest_marker(m) for m in FULL_TIER)}
        if full:
            config.hook.pytest_deselected(items=[i for i in items if i in full])
            items[:] = [i for i in items if i not in full]
            config.stash[_LEFT_OUT] = len(full)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU here (torch.cuda.is_available() is False); run on the device machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter, config):
    left = config.stash.get(_LEFT_OUT, 0)
    if left:
        terminalreporter.write_line(f"default tier: {left} tests of the full tier (marked slow or service) not run; "
                                    "pytest --full runs them")
    from test_kernels_compile import REPORT

    if REPORT:
        terminalreporter.section("nvcc -arch=sm_90 resource usage")
        for line in REPORT:
            terminalreporter.write_line(line)


def pytest_sessionfinish(session, exitstatus):
    import sys

    if "ptxas" in sys.modules:  # the compile checks' queue (tests/ptxas.py): nothing left compiling after the run
        sys.modules["ptxas"].shutdown()
