"""The Python API (convbench/api.py, exposed lazily by convbench/__init__.py): conv, implementations, get_impl, load_network,
load_data, Conv2d; checked on the CPU against torch and against `convbench run`."""

import json
import random
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import convbench
from convbench.cli.main import main as cli_main
from convbench.impls.registry import DEFAULT_IMPL

CPU_IMPLS = ["cpu-naive", "cpu-parallel", "cpu-unroll"]


def rel_error(y: torch.Tensor, ref: torch.Tensor) -> float:
    """||y - ref|| / ||ref|| in float64 (verify's measure)."""
    return float(torch.linalg.norm(y.double() - ref) / torch.linalg.norm(ref))


def random_shapes(n: int, seed: int):
    rng = random.Random(seed)
    for _ in range(n):
        K = rng.choice([1, 2, 3, 5, 7])
        yield (rng.randint(1, 3), rng.randint(1, 5), rng.randint(K, 23), rng.randint(K, 19), rng.randint(1, 9), K)


# --- conv ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("impl", CPU_IMPLS)
def test_conv_matches_torch_in_float64(impl):
    g = torch.Generator().manual_seed(7)
    for B, C, H, W, M, K in random_shapes(6, seed=CPU_IMPLS.index(impl)):
        x = torch.randn(B, C, H, W, generator=g)
        k = torch.randn(M, C, K, K, generator=g)
        y = convbench.conv(x, k, impl=impl)
        assert y.shape == (B, M, H - K + 1, W - K + 1) and y.dtype == torch.float32 and y.device == x.device
        assert rel_error(y, F.conv2d(x.double(), k.double())) < 1e-5, (impl, (B, C, H, W, M, K))


def test_conv_takes_non_contiguous_inputs_and_a_kernel_file_and_a_conv_impl():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 13, 11, 3, generator=g).permute(0, 3, 1, 2)  # (2, 3, 13, 11), not contiguous
    k = torch.randn(3, 4, 3, 3, generator=g).transpose(0, 1)  # (4, 3, 3, 3), not contiguous
    ref = F.conv2d(x.double(), k.double())
    assert rel_error(convbench.conv(x, k), ref) < 1e-5
    assert rel_error(convbench.conv(x, k, impl="examples/python_conv.py"), ref) < 1e-5
    assert rel_error(convbench.conv(x, k, impl=convbench.get_impl("onednn")), ref) < 1e-5


@pytest.mark.parametrize("make, words", [
    (lambda: convbench.conv(torch.ones(1, 1, 5, 5), torch.ones(1, 1, 3, 3), impl="no-such"), "unknown implementation"),
    (lambda: convbench.conv(torch.ones(1, 1, 5, 5, dtype=torch.float64), torch.ones(1, 1, 3, 3)), "torch.float64"),
    (lambda: convbench.conv(torch.ones(1, 1, 5, 5), torch.ones(1, 1, 3, 3, dtype=torch.int32)), "dtype torch.int32"),
    (lambda: convbench.conv(torch.ones(1, 5, 5), torch.ones(1, 1, 3, 3)), "4 dimensions"),
    (lambda: convbench.conv(torch.ones(1, 2, 5, 5), torch.ones(1, 3, 3, 3)), "channels"),
    (lambda: convbench.conv(torch.ones(1, 1, 5, 5), torch.ones(1, 1, 3, 2)), "square"),
    (lambda: convbench.conv(torch.ones(1, 1, 2, 5), torch.ones(1, 1, 3, 3)), "smaller than"),
    (lambda: convbench.conv(np.ones((1, 1, 5, 5), np.float32), torch.ones(1, 1, 3, 3)), "not a torch.Tensor"),
    (lambda: convbench.conv(torch.ones(1, 1, 5, 5), torch.ones(1, 1, 3, 3), impl="gpu-basic"), "runs on cuda"),
    (lambda: convbench.conv(torch.ones(1, 1, 5, 5), torch.ones(1, 1, 3, 3), precision="fp16"), "no fp16 variant"),
    (lambda: convbench.conv(torch.ones(1, 1, 5, 5), torch.ones(1, 1, 3, 3), precision="fp8"), "unknown precision"),
    (lambda: convbench.conv(torch.ones(1, 1, 5, 5, requires_grad=True), torch.ones(1, 1, 3, 3)), "forward-only"),
    (lambda: convbench.Conv2d(1, 2, 3, padding=1), "padding=1"),
    (lambda: convbench.Conv2d(1, 2, 3, stride=2), "stride=2"),
    (lambda: convbench.Conv2d(1, 2, 3, bias=True), "bias=True"),
    (lambda: convbench.Conv2d(1, 2, (3, 5)), "square kernel"),
    (lambda: convbench.Conv2d(1, 2, 3, impl="no-such-impl"), "unknown implementation"),
    (lambda: convbench.Conv2d.from_torch(nn.Conv2d(1, 2, 3, padding=1, bias=False)), "padding=(1, 1)"),
    (lambda: convbench.Conv2d.from_torch(nn.Conv2d(1, 2, 3)), "bias=True"),
    (lambda: convbench.implementations("tpu"), "unknown device"),
    (lambda: convbench.load_network("no-such-net"), "unknown network"),
    (lambda: convbench.load_data(3.5), "image size"),
])
def test_bad_input_is_one_line_usage_error(make, words):
    with pytest.raises(convbench.UsageError) as e:
        make()
    assert words in str(e.value) and "\n" not in str(e.value)


def test_conv_empty_batch():
    y = convbench.conv(torch.ones(0, 2, 6, 6), torch.ones(3, 2, 3, 3))
    assert y.shape == (0, 3, 4, 4)


# --- implementations / get_impl ---------------------------------------------------------------------------------------------

def test_implementations_and_get_impl():
    cpu = convbench.implementations("cpu")
    names = [i.name for i in cpu]
    assert {"reference", "onednn", *CPU_IMPLS} <= set(names) and all(i.runs_on("cpu") for i in cpu)
    assert all(i.summary for i in convbench.implementations())
    assert "cudnn" in [i.name for i in convbench.implementations("cuda")] and "cudnn" not in names
    assert convbench.get_impl("cpu-parallel").device == "cpu"
    assert convbench.get_impl("examples/python_conv.py").name == "python_conv"
    from convbench.impls import (
        registry,  # the subpackage of the same name stays importable
    )

    assert registry.get_impl("onednn") is convbench.get_impl("onednn")


# --- networks and data --------------------------------------------------------------------------------------------

def test_network_run_matches_convbench_run(capsys):
    assert cli_main(["run", "--size", "100", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)

    net = convbench.load_network()
    images, labels = convbench.load_data(net, count=100)
    assert images.shape == (100, net.input_size, net.input_size) and images.dtype == np.uint8 and labels.shape == (100,)
    result = net.run(images)
    assert result.predictions.shape == (100,) and result.predictions.dtype == np.int64
    assert result.correctness(labels) == cli["correctness"]
    assert len(result.op_times) == len(cli["layers"]) == len(net.spec.conv_layers)
    assert all(t > 0 for t in result.op_times) and result.impl == cli["impl"] == DEFAULT_IMPL["cpu"]
    # the same predictions through another implementation and as (N, 1, S, S) torch input
    other = net.run(torch.from_numpy(images).unsqueeze(1), impl="onednn")
    assert (other.predictions == result.predictions).mean() >= 0.99
    with pytest.raises(convbench.UsageError, match="no fused op"):
        net.run(images, fuse=True)
    with pytest.raises(convbench.UsageError, match=r"\(N, 86, 86\)"):
        net.run(images[:, :28, :28])
    with pytest.raises(convbench.UsageError, match="labels have shape"):
        result.correctness(labels[:5])


def test_load_data_by_name_and_size():
    images, labels = convbench.load_data(28, count=10)
    assert images.shape == (10, 28, 28)
    assert convbench.load_data("minidnn", count=3)[0].shape == (3, 86, 86)
    assert (convbench.load_data("minidnn", count=3)[1] == labels[:3]).all()


# --- Conv2d -------------------------------------------------------------------------------------------------------

def small_cnn() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 5, bias=False), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 6, 3, bias=False),
                         nn.Tanh(), nn.Flatten(), nn.Linear(6 * 3 * 3, 10))


def swapped(model: nn.Sequential, impl: str) -> nn.Sequential:
    return nn.Sequential(*[convbench.Conv2d.from_torch(m, impl=impl) if isinstance(m, nn.Conv2d) else m for m in model])


@pytest.mark.parametrize("impl", ["cpu-parallel", "cpu-unroll"])
def test_conv2d_drop_in_matches_nn_conv2d(impl):
    ref = small_cnn()
    model = swapped(ref, impl)
    assert isinstance(model[0], convbench.Conv2d) and model[0].weight.shape == ref[0].weight.shape
    x = torch.randn(5, 1, 14, 14)
    with torch.no_grad():
        want = ref(x)
        assert torch.allclose(model(x), want, rtol=1e-5, atol=1e-5)
        assert torch.allclose(model[0](x[0]), ref[0](x[0]), rtol=1e-5, atol=1e-5)  # unbatched (C, H, W)
    assert torch.allclose(model(x), want, rtol=1e-5, atol=1e-5)  # convs first: nothing before them needs grad
    # state dicts are interchangeable with nn.Conv2d(bias=False)'s; to_torch goes back
    fresh = convbench.Conv2d(1, 4, 5, impl=impl)
    fresh.load_state_dict(ref[0].state_dict())
    assert torch.equal(fresh.weight, ref[0].weight) and not fresh.weight.requires_grad
    assert torch.equal(fresh.to_torch().weight, ref[0].weight)


def test_conv2d_is_forward_only():
    model = nn.Sequential(nn.Conv2d(1, 2, 3, bias=False), convbench.Conv2d(2, 3, 3))  # input to ours needs grad
    x = torch.randn(2, 1, 9, 9)
    with pytest.raises(convbench.UsageError, match="forward-only"):
        model(x)
    with torch.no_grad():
        assert model(x).shape == (2, 3, 5, 5)
    with torch.inference_mode():
        assert model(x).shape == (2, 3, 5, 5)
    with pytest.raises(convbench.UsageError, match="float64"), torch.no_grad():
        convbench.Conv2d(1, 2, 3)(x.double())


def test_conv2d_under_torch_compile():
    ref = small_cnn()
    model = swapped(ref, "cpu-parallel")
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)  # the custom op traces through its fake impl
    x = torch.randn(3, 1, 14, 14)
    with torch.no_grad():
        assert torch.allclose(compiled(x), ref(x), rtol=1e-5, atol=1e-5)
    fn = torch.compile(lambda a, b: convbench.conv(a, b, impl="onednn"), backend="aot_eager", fullgraph=True)
    a, b = torch.randn(2, 3, 10, 9), torch.randn(4, 3, 3, 3)
    assert rel_error(fn(a, b), F.conv2d(a.double(), b.double())) < 1e-5


# --- the package --------------------------------------------------------------------------------------------------

def test_import_convbench_does_not_import_torch():
    code = ("import sys, convbench\n"
            "assert 'torch' not in sys.modules, 'import convbench imported torch'\n"
            "assert convbench.__version__ and 'conv' in dir(convbench) and 'Conv2d' in convbench.__all__\n"
            "assert issubclass(convbench.UsageError, Exception) and 'torch' not in sys.modules\n"
            "print([i.name for i in convbench.implementations('cpu')][:2])\n")
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['reference', 'onednn']"


def test_the_api_and_the_subpackage_keep_their_names():
    """convbench.implementations() is the API's list; convbench.impls stays the subpackage of the implementations."""
    code = ("import convbench.impls.registry, convbench\n"
            "assert convbench.impls.registry.get_impl('onednn').device == 'cpu'\n"
            "assert [i.name for i in convbench.implementations('cpu')][:1] == ['reference']\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr


def test_public_names_are_documented():
    for name in convbench.__all__:
        obj = getattr(convbench, name)
        if name != "__version__":
            assert (obj.__doc__ or "").strip(), name
    for name in ("run",):
        assert getattr(convbench.Network, name).__doc__
    for name in ("from_torch", "to_torch", "forward"):
        assert getattr(convbench.Conv2d, name).__doc__
    with pytest.raises(AttributeError):
        _ = convbench.no_such_name
