"""`convbench grade`: many submissions, each in its own sandbox process, one verdict each, a table, CSV and JSON,
and a leaderboard; one failing submission never stops the rest. CPU, with Python kernels (the CUDA kinds take the
same path; the GPU tests of tests/test_user_kernels.py and tests/test_submissions_build.py run those)."""

from __future__ import annotations

import csv
import dataclasses
import json
import re
from pathlib import Path

import pytest
from clihelp import cli

from convbench.measure.grade import classify

GOOD = "import torch.nn.functional as F\ndef conv_forward(x, k):\n    return F.conv2d(x, k)\n"
BODIES = {
    "good.py": GOOD,
    "slow_good.py": "import time, torch.nn.functional as F\ndef conv_forward(x, k):\n    time.sleep(0.05)\n"
                    "    return F.conv2d(x, k)\n",
    # right on the course's batch of 100, wrong from image 112 on: only the run finds it
    "late_wrong.py": "import torch.nn.functional as F\ndef conv_forward(x, k):\n    y = F.conv2d(x, k)\n"
                     "    if y.shape[0] > 112:\n        y[112:, :, 3, 2] += 1e4\n    return y\n",
    # FP16 arithmetic: judged by Correctness, as the course did
    "half.py": "import torch.nn.functional as F\ndef conv_forward(x, k):\n"
               "    return F.conv2d(x.half().float(), k.half().float())\n",
    # right on the course's shapes only (hard-coded sizes, as many real files are)
    "hardcoded.py": "import torch.nn.functional as F\ndef conv_forward(x, k):\n    y = F.conv2d(x, k)\n"
                    "    if (x.shape[2], k.shape[2]) not in ((86, 7), (40, 7)):\n        y.zero_()\n    return y\n",
    "crashes.py": "import ctypes\ndef conv_forward(x, k):\n    ctypes.string_at(0)\n",
    "leaves.py": "import os\ndef conv_forward(x, k):\n    os._exit(3)\n",
    "broken.py": "def conv_forward(x, k)\n    return x\n",
}


@pytest.fixture
def submissions(tmp_path):
    for name, text in BODIES.items():
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.mark.slow
def test_grade_many_submissions(capsys, submissions, tmp_path):
    paths = [submissions / n for n in BODIES]
    out_json, out_csv = tmp_path / "grades.json", tmp_path / "grades.csv"
    rc, out, err = cli(capsys, "grade", "--device", "cpu", "--sizes", "120", "--shapes", "4", "--seed", "3",
                       *paths, "--json", out_json, "--csv", out_csv)
    assert rc == 1, err  # not all correct
    assert "Traceback" not in err
    doc = json.loads(out_json.read_text())
    assert doc["complete"] is True
    verdicts = {g["path"].rsplit("/", 1)[1]: g for g in doc["grades"]}
    assert {n: g["verdict"] for n, g in verdicts.items()} == {
        "good.py": "ok", "slow_good.py": "ok", "late_wrong.py": "wrong answer", "half.py": "ok", "hardcoded.py": "unsupported shape",
        "crashes.py": "crash", "leaves.py": "crash", "broken.py": "error"}
    assert re.search(r"120 images: layer conv1, image 112, element \(m=0, h=3, w=2\): got .*, expected",
                     verdicts["late_wrong.py"]["detail"])
    assert "killed by SIGSEGV" in verdicts["crashes.py"]["detail"]
    assert "exited with status 3 while running B=100 C=1 H=86 W=86 M=4 K=7, in conv_forward" in verdicts["leaves.py"]["detail"]
    assert verdicts["good.py"]["correctness"]["120"] == verdicts["good.py"]["reference"]["120"]
    assert all(t > 0 for t in verdicts["good.py"]["op_times"]["120"])
    assert verdicts["half.py"]["detail"].startswith("reduced precision (error ")
    # the leaderboard: the correct ones (ok and unsupported shape), fastest first
    board = [b["path"].rsplit("/", 1)[1] for b in doc["leaderboard"]]
    assert set(board) == {"good.py", "slow_good.py", "hardcoded.py", "half.py"} and board.index("good.py") < board.index("slow_good.py")
    assert "leaderboard" in out and "grade on cpu" in out
    rows = list(csv.DictReader(out_csv.open()))
    assert [r["verdict"] for r in rows] == [verdicts[n]["verdict"] for n in BODIES]


def test_grade_bad_input_is_one_line(capsys, submissions, tmp_path):
    for argv, fragment in (
        (["grade", "--device", "cpu", tmp_path / "absent.cu"], "no such submission"),
        (["grade", "--device", "cpu", "--sizes", "0", submissions / "good.py"], "--sizes '0'"),
        (["grade", "--device", "cpu", "-D", "1BAD", submissions / "good.py"], "-D '1BAD' is not a macro"),
        (["grade", "--device", "cpu", "--course-weights", tmp_path / "nope", submissions / "good.py"], "no such folder"),
    ):
        rc, out, err = cli(capsys, *argv)
        assert rc == 2 and fragment in err and "Traceback" not in err, err


@pytest.mark.parametrize("message, verdict", [
    ("new-forward.cu does not compile (nvcc with convbench's gpu-new-forward.h): x.cu(3): error: ...", "compile error"),
    ("k.cu: no answer within 300 s while running B=1 ...", "timeout"),
    ("k.cu: the sandbox process was killed by SIGSEGV while running ...", "crash"),
    ("new-forward.cu failed in conv_forward_gpu: cudaErrorIllegalAddress (...)", "crash"),
    ("k.cu defines none of: ...", "error"),
])
def test_classify(message, verdict):
    assert classify(message) == verdict


@pytest.mark.slow
def test_reduced_precision_is_judged_by_a_close_correctness(capsys, tmp_path):
    """A kernel whose every layer is within the reduced-precision tolerance but whose rounding moves a few images (as
    FP16 files do: 0.887 where fp32 gives 0.886) is ok, the moved Correctness said beside the verdict."""
    path = tmp_path / "noisy.py"
    # the error is a function of each value alone, not of the call's shape: a long CPU layer runs in slices when its
    # timed estimate says so (network/model.py), and shape-seeded noise then moved Correctness by chance
    path.write_text("import torch, torch.nn.functional as F\ndef conv_forward(x, k):\n    y = F.conv2d(x, k)\n"
                    "    return (y * (1 + 5.66e-3 * torch.sin(y * 997.0))).contiguous()\n")
    out_json = tmp_path / "grades.json"
    rc, _, err = cli(capsys, "grade", "--device", "cpu", "--sizes", "1000", "--shapes", "2", "--seed", "3", path,
                     "--json", out_json)
    (g,) = json.loads(out_json.read_text())["grades"]
    assert rc == 0 and g["verdict"] == "ok", err
    assert g["correctness"]["1000"] != g["reference"]["1000"]  # the case under test: the answer moved
    assert abs(g["correctness"]["1000"] - g["reference"]["1000"]) <= 0.005
    assert re.search(r"reduced precision \(error 4\.\de-03 .*; 1000 images: Correctness 0\.\d+ where the fp32 "
                     r"reference gives 0\.\d+", g["detail"]), g["detail"]


@pytest.mark.slow
def test_grade_on_staff_held_images(tmp_path):
    """The service's --data-dir: Correctness from test images the students never saw (here: the first 120 test
    images, their order reversed and labels rotated, so the answer differs from the usual set's)."""
    from convbench.data import fashion_mnist as fm
    from convbench.data.idx import write_idx
    from convbench.measure.grade import GradeSettings, grade_one

    images, labels, _ = fm.load_split("t10k")
    held = tmp_path / "held"
    held.mkdir()
    write_idx(held / "t10k-images-idx3-ubyte", images[:120][::-1].copy())
    write_idx(held / "t10k-labels-idx1-ubyte", ((labels[:120][::-1] + 1) % 10).astype(labels.dtype))
    kernel = tmp_path / "good.py"
    kernel.write_text(GOOD)
    settings = GradeSettings(sizes=(120,), device="cpu", random_shapes=2, seed=3)
    usual = grade_one(kernel, settings)
    staff = grade_one(kernel, dataclasses.replace(settings, data_dir=held))
    assert usual.verdict == staff.verdict == "ok", (usual.detail, staff.detail)
    assert staff.correctness[120] == staff.reference[120] != usual.correctness[120]
    # where each grade's time went, step by step (the service shows it; a slow grader is found from it)
    assert list(usual.seconds) == ["building", "course shapes", "random shapes", "run 120", "reference 120"]
    assert all(s >= 0 for s in usual.seconds.values()) and sum(usual.seconds.values()) > 0


@pytest.mark.gpu
def test_gpu_warm_up_on_the_first_images():
    """Network(warmup_images=n) on the GPU warms each conv layer on the batch's first n images, then times the whole
    batch once (grade's choice for a sandboxed submission: a full-size warm-up is a second round trip of every layer
    through the sandbox); without it the warm-up takes the whole batch."""
    import numpy as np
    import torch.nn.functional as F

    from convbench.core.contract import ConvImpl
    from convbench.network.model import Network
    from convbench.network.weights import load_weights

    def run(warmup_images):
        seen = []

        def conv(x, k):
            seen.append(x.shape[0])
            return F.conv2d(x, k)

        impl = ConvImpl("batches", "cuda", "records its batches", "a test", conv, writes_into=False)
        weights = load_weights("own", "sp19")
        size = weights.spec.input_size
        images = np.random.default_rng(0).integers(0, 256, (37, size, size), dtype=np.uint8)
        result = Network(weights, impl, "cuda", warmup_images=warmup_images).infer(images, show_progress=False)
        return seen, result

    with pytest.raises(ValueError, match="warmup_images"):
        run(0)
    slice_seen, sliced = run(5)
    whole_seen, whole = run(None)
    assert slice_seen == [5, 37, 5, 37] and whole_seen == [37, 37, 37, 37]
    assert np.array_equal(sliced.predictions, whole.predictions)


def test_a_grade_run_stopped_part_way_leaves_what_it_graded(capsys, submissions, tmp_path, monkeypatch):
    """--json is written after each submission, marked incomplete (and without a leaderboard) until the last: a run
    stopped at the second submission (here by Ctrl-C) leaves the first one's grade."""
    from convbench.cli import grade as grade_cli

    real = grade_cli.grade_one

    def stop_at_the_second(path, *args, **kwargs):
        if path.name == "broken.py":
            raise KeyboardInterrupt
        return real(path, *args, **kwargs)

    monkeypatch.setattr(grade_cli, "grade_one", stop_at_the_second)
    out_json = tmp_path / "grades.json"
    rc, _, err = cli(capsys, "grade", "--device", "cpu", "--sizes", "100", "--shapes", "1", "--seed", "3",
                     submissions / "good.py", submissions / "broken.py", "--json", out_json)
    assert rc != 0 and "Traceback" not in err
    doc = json.loads(out_json.read_text())
    assert doc["complete"] is False and doc["leaderboard"] == []
    assert [(Path(g["path"]).name, g["verdict"]) for g in doc["grades"]] == [("good.py", "ok")]
