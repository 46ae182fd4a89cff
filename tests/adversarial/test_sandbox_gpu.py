"""Issue 27's GPU cases (finding 5, and 6 on the GPU): built CUDA submissions lay in a shared read-write cache, where
a later kernel could read another team's code or replace its library before a re-time; `--dev-bind /dev` exposed
every GPU; CUDA events inside the submission's process were its to rebind. Each test is one such kernel, run on a
GPU (marked gpu: skipped with a reason where there is none)."""

from __future__ import annotations

import hashlib
import json
import shutil
import textwrap
from pathlib import Path

import pytest
import torch
from sandboxhelp import MARK, require_sandbox

from convbench.measure.grade import GradeSettings, grade_one
from convbench.measure.timed_calls import open_submission
from convbench.user.worker import Calibration, as_impl

pytestmark = pytest.mark.gpu
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "new-forward.cu"


@pytest.fixture(autouse=True)
def _sandbox():
    require_sandbox("cuda")


def graded(path: Path):
    """The file graded on the GPU at 100 images, with a calibration of its own."""
    calibration = Calibration()
    try:
        return grade_one(path, GradeSettings(sizes=(100,), device="cuda", random_shapes=2, seed=5),
                         calibration=calibration)
    finally:
        calibration.close()


def test_the_self_test_on_a_gpu_grader():
    """The GPU grader's own self-test: every property, and its one GPU."""
    from convbench.user import sandbox

    result = sandbox.self_test("cuda")
    assert result.ok, result.problem
    assert result.properties["only its GPU"].startswith("ok: ") and "nvidia" in result.properties["only its GPU"]


def test_a_kernel_opens_no_other_gpu(tmp_path):
    """A kernel that looks for the machine's other GPUs: one device node of a GPU, one GPU in CUDA, every other
    /dev/nvidiaN absent (on a machine of several GPUs: the other cards are not there to open)."""
    path = tmp_path / "peek.py"
    path.write_text(textwrap.dedent(f"""
        import json, os, torch, torch.nn.functional as F
        DEVICE = "cuda"
        def conv_forward(x, k):
            opened = []
            for i in range(16):
                try:
                    os.close(os.open(f"/dev/nvidia{{i}}", os.O_RDWR)); opened.append(i)
                except OSError:
                    pass
            seen = {{"opened": opened, "count": torch.cuda.device_count(),
                    "nodes": sorted(n for n in os.listdir("/dev") if n.startswith("nvidia"))}}
            print("{MARK}" + json.dumps(seen), flush=True)
            return F.conv2d(x, k)
    """))
    from convbench import user

    impl = user.load(path)
    impl.fn.worker.quiet = True
    x, k = torch.randn(2, 1, 8, 8, device="cuda"), torch.randn(3, 1, 3, 3, device="cuda")
    torch.testing.assert_close(impl(x, k), torch.nn.functional.conv2d(x, k))
    line = [s for s in impl.fn.worker.captured_text().splitlines() if s.startswith(MARK)][-1]
    seen = json.loads(line[len(MARK):])
    assert len(seen["opened"]) == 1 and seen["count"] == 1, seen
    assert [n for n in seen["nodes"] if n[len("nvidia"):].isdigit()] == [f"nvidia{seen['opened'][0]}"]


ATTACK = r"""
#include <cerrno>
#include <cstdio>
#include <dirent.h>
static void convbench_attack()
{
    FILE *f = fopen("OTHER_LIB", "rb");
    printf("other-read %d\n", f ? 0 : errno);
    f = fopen("OTHER_LIB", "r+b");
    printf("other-write %d\n", f ? 0 : errno);
    DIR *d = opendir("/builds");
    int own_written = -1;
    for (struct dirent *e = d ? readdir(d) : nullptr; e != nullptr; e = readdir(d)) {
        char path[512];
        snprintf(path, sizeof path, "/builds/%s/libuser.so", e->d_name);
        FILE *g = fopen(path, "r+b");
        if (g != nullptr || errno != ENOENT)
            own_written = g ? 0 : errno;
    }
    printf("own-write %d\n", own_written);
    fflush(stdout);
}
"""


def test_another_teams_build_can_be_neither_read_nor_replaced(tmp_path):
    """Team B's file is built (its private build folder); team A's prolog then tries to open B's library by its
    very path on the host, to write B's, and to overwrite its own library before a re-time. B's is not there, its
    own is read-only, and B's library is unchanged."""
    b_dir, a_dir = tmp_path / "team-b", tmp_path / "team-a"
    b_dir.mkdir()
    a_dir.mkdir()
    shutil.copy(EXAMPLE, b_dir / "new-forward.cu")
    b = open_submission(b_dir)
    try:
        b.build()
        libs = list(b.workspace.builds.rglob("libuser.so"))
        assert len(libs) == 1
        before = hashlib.sha256(libs[0].read_bytes()).hexdigest()
        source = EXAMPLE.read_text()
        source = source.replace('#include "gpu-new-forward.h"', '#include "gpu-new-forward.h"\n'
                                + ATTACK.replace("OTHER_LIB", str(libs[0])))
        source = source.replace("    (void)host_y;\n", "    (void)host_y;\n    convbench_attack();\n", 1)
        (a_dir / "new-forward.cu").write_text(source)
        a = open_submission(a_dir)
        try:
            impl = as_impl(a)
            impl.prepare()
            impl.host_layer(torch.randn(2, 1, 12, 12), torch.randn(2, 1, 3, 3, device="cuda"))
            text = a.captured_text()
        finally:
            a.remove()
        assert "other-read 2" in text and "other-write 2" in text, text[-2000:]  # ENOENT: not there at all
        assert "own-write 30" in text or "own-write 13" in text, text[-2000:]  # EROFS (or EACCES)
        assert hashlib.sha256(libs[0].read_bytes()).hexdigest() == before
    finally:
        b.remove()


def test_faked_cuda_events_are_not_believed(tmp_path):
    """A kernel on the GPU that rebinds torch.cuda.Event.elapsed_time to report a microsecond, and spins the GPU
    for 20 ms a call: convbench's clock counts, and the grade is flagged, not ranked."""
    path = tmp_path / "fast_liar.py"
    path.write_text(textwrap.dedent("""
        import torch, torch.nn.functional as F
        DEVICE = "cuda"
        torch.cuda.Event.elapsed_time = lambda self, other: 1e-3
        def conv_forward(x, k):
            torch.cuda._sleep(40_000_000)  # about 20 ms of GPU clock cycles
            return F.conv2d(x, k)
    """))
    g = graded(path)
    assert g.verdict == "ok", g.detail
    assert min(g.op_times[100]) > 0.005 and not g.ranked, (g.op_times, g.flags)
    assert any("its own timer disagreed" in f for f in g.flags), g.flags


def test_an_answer_kept_from_the_warm_up_is_a_wrong_answer(tmp_path):
    """Each timed call on a GPU follows untimed warm-up calls in the same buffers (trusted_time.WARM_S). A kernel
    that keeps its answer per buffer address and gives it back, at once, whenever the address comes again: the
    warm-up ran on random values and the timed call's input arrives after it (scaled after "go"): a wrong answer."""
    path = tmp_path / "by_address.py"
    path.write_text(textwrap.dedent("""
        import torch.nn.functional as F
        DEVICE = "cuda"
        kept = {}
        def conv_forward(x, k):
            key = (x.data_ptr(), tuple(x.shape))
            if key not in kept:
                kept[key] = F.conv2d(x, k)
            return kept[key]
    """))
    g = graded(path)
    assert g.verdict == "wrong answer", (g.verdict, g.detail)
