"""Each conv layer is exactly one call of its implementation on the whole batch (network/model.py), as the course
made it: progress is a heartbeat beside the call (core/ui.py), never a cut of it. The old code cut a CPU layer its
warm-up predicted over 2 s into 20 calls, which hid a kernel wrong only from image 112 on whenever it was slow."""

from __future__ import annotations

import io
import time

import pytest
import standins
import torch.nn.functional as F
from rich.console import Console

from convbench.core import reference as ops
from convbench.core import ui
from convbench.data.fashion_mnist import load_dataset
from convbench.measure.grade import GradeSettings, grade_one
from convbench.network import model
from convbench.network.model import Network
from convbench.network.weights import load_weights

B = 40  # with a 0.5 s warm-up the old code predicted 5 s per layer here, and cut each layer into 20 calls


def counting_impl(calls: list[tuple[str, int]], full_batch_s: float = 0.0):
    """A stand-in that records (layer's weights shape, batch) of every call; slow on the warm-up's few images
    (which made the old code expect a long layer), `full_batch_s` on anything larger."""

    def conv(x, k):
        calls.append((f"M{k.shape[0]}", x.shape[0]))
        time.sleep(0.5 if x.shape[0] <= model.CPU_WARMUP_IMAGES else full_batch_s)
        return F.conv2d(x, k)

    def fused(x, k, act, pool):
        return ops.pool(ops.activation(conv(x, k), act), pool)

    return standins.impl("counting", fn=conv, fused=fused)


@pytest.mark.parametrize("fuse", [False, True])
def test_each_layer_is_one_call_on_the_whole_batch(fuse):
    calls: list[tuple[str, int]] = []
    weights = load_weights("own", "minidnn")
    images = load_dataset(weights.spec.input_size, count=B, quiet=True).images
    result = Network(weights, counting_impl(calls, full_batch_s=0.3), "cpu", fuse=fuse).infer(images,
                                                                                              show_progress=False)
    # per layer: the untimed warm-up on the first images, then the layer itself, one call on all B images
    assert calls == [("M4", model.CPU_WARMUP_IMAGES), ("M4", B), ("M16", model.CPU_WARMUP_IMAGES), ("M16", B)]
    # Op Time is that one call: its 0.3 s, not a sum of slices
    assert all(0.3 <= t.op_time < 0.6 and t.shape[0] == B for t in result.conv_timings), result.conv_timings


WRONG_FROM_112 = """import time
import torch.nn.functional as F
SLEEP = {sleep}
def conv_forward(x, k):
    time.sleep(SLEEP)
    y = F.conv2d(x, k)
    y[112:] += 1.0  # right for images 0..111 of a call, wrong from image 112 on
    return y
"""


@pytest.mark.slow
def test_a_kernel_wrong_from_image_112_gets_the_same_verdict_fast_or_slow(tmp_path):
    """The course's batch (100) is right, so only the run at 200 images can catch it: in one call of 200 images.
    With a 0.1 s sleep per call the old code cut each layer into slices of 10 images and called it ok."""
    verdicts = []
    for sleep in (0.0, 0.1):
        path = tmp_path / f"wrong_from_112_{int(sleep * 10)}.py"
        path.write_text(WRONG_FROM_112.format(sleep=sleep))
        g = grade_one(path, GradeSettings(sizes=(200,), device="cpu", random_shapes=2, seed=3))
        verdicts.append((g.verdict, g.detail.split(": got")[0]))
    assert verdicts[0] == verdicts[1] == ("wrong answer", "200 images: layer conv1, image 112, element (m=0, h=0, w=0)"), \
        verdicts


def test_a_long_call_shows_a_heartbeat_on_a_terminal_only(monkeypatch):
    """The live line names the layer, the implementation and the seconds, drawn by a thread while the one call runs,
    and is erased after it; nothing when stderr is not a terminal or progress is off."""
    weights = load_weights("own", "sp19")
    images = load_dataset(weights.spec.input_size, count=8, quiet=True).images
    monkeypatch.setattr(ui, "HEARTBEAT_AFTER_S", 0.05)
    monkeypatch.setattr(ui, "HEARTBEAT_EVERY_S", 0.05)
    seen = {}
    for terminal, show in ((True, True), (False, True), (True, False)):
        out = io.StringIO()
        monkeypatch.setattr(ui, "err", Console(file=out, force_terminal=terminal, width=200))
        calls: list[tuple[str, int]] = []
        Network(weights, counting_impl(calls, full_batch_s=0.4), "cpu").infer(images, show_progress=show)
        assert [n for _, n in calls].count(8) == 2  # one call per layer all the same
        seen[terminal, show] = out.getvalue()
    assert "\rconv1 on counting (8 images, one call): 0 s" in seen[True, True]
    assert "\rconv2 on counting (8 images, one call): 0 s" in seen[True, True]
    assert seen[True, True].endswith("\r\x1b[K")  # erased: the next line starts clean
    assert seen[False, True] == seen[True, False] == ""
