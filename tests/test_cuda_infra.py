"""The CUDA plumbing that can be checked without a GPU: argument packing, the one-line CUDA error, tuning records."""

import numpy as np
import torch

from convbench.cli.main import main
from convbench.core import gpu
from convbench.core.errors import cuda_error
from convbench.core.gpu import tuning
from convbench.impls.registry import all_impls


def test_kernel_arguments_are_packed_as_the_kernel_expects():
    t = torch.zeros(3)
    assert gpu.kernel_arg(t) == np.uint64(t.data_ptr()) and gpu.kernel_arg(t).dtype == np.uint64  # 8-byte pointer
    assert gpu.kernel_arg(7).dtype == np.int32 and gpu.kernel_arg(7) == 7  # `const int` parameters
    assert gpu.kernel_arg(1.5).dtype == np.float32


def test_ceil_div():
    assert [gpu.ceil_div(a, 16) for a in (1, 16, 17, 32, 33)] == [1, 1, 2, 2, 3]


def test_gpu_errors_become_one_line():
    class CUDADriverError(Exception):
        pass

    CUDADriverError.__module__ = "cupy.cuda.driver"
    msg = cuda_error(CUDADriverError("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"))
    assert msg.startswith("the GPU reported: CUDA_ERROR_ILLEGAL_ADDRESS") and "compute-sanitizer" in msg
    assert cuda_error(RuntimeError("CUDA error: device-side assert triggered\nmore")) .count("\n") == 0
    assert cuda_error(ValueError("a bug of ours")) is None


def test_tuning_records_and_forces(tmp_path, monkeypatch):
    monkeypatch.setenv("CONVBENCH_CACHE", str(tmp_path))
    tuning._table.cache_clear()
    x, k = torch.empty(2, 3, 20, 24), torch.empty(5, 3, 5, 5)
    defaults = {"TILE": 16}
    assert tuning.config("gpu-x", x, k, defaults) == defaults
    path = tuning.record("gpu-x", tuning.shape_key(x.shape, k.shape), {"TILE": 32})
    assert path.is_file() and not list(tmp_path.rglob("*.tmp"))
    assert tuning.config("gpu-x", x, k, defaults) == {"TILE": 32}
    assert tuning.config("gpu-x", torch.empty(2, 3, 21, 24), k, defaults) == defaults  # another shape
    tuning.force("gpu-x", {"TILE": 8})
    assert tuning.config("gpu-x", x, k, defaults) == {"TILE": 8}
    tuning.force("gpu-x", None)
    assert tuning.config("gpu-x", x, k, defaults) == {"TILE": 32}
    tuning._table.cache_clear()


def test_gpu_rungs_register_without_a_gpu():
    gpu = {i.name for i in all_impls() if i.device == "cuda"}
    assert {"cudnn", "cudnn-tf32", "gpu-basic", "gpu-streams"} <= gpu
    for impl in all_impls():
        if impl.precision != "fp32" and impl.device == "cuda":
            assert impl.tolerance > 1e-5, f"{impl.name} is reduced-precision: its tolerance says what it meets"


def test_sweep_needs_a_gpu_impl(capsys):
    assert main(["sweep", "--impl", "cpu-naive"]) == 2
    assert "sweep times GPU implementations" in capsys.readouterr().err
