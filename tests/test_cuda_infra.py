"""The CUDA plumbing that can be checked without a GPU: argument packing, the one-line CUDA error, tuning records."""

import ctypes
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from convbench.cli.main import main
from convbench.core import gpu
from convbench.core.errors import UsageError, cuda_error
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
    # without a GPU nothing sweeps, whatever the impl: the GPU is what the line names then
    want = "sweep times GPU implementations" if torch.cuda.is_available() else "sweep: no CUDA GPU"
    assert want in capsys.readouterr().err


STUB_DRIVER = r"""
#include <stdint.h>
/* cuLaunchKernel's signature; records what it was called with */
void *got_f, *got_stream, **got_params, **got_extra;
unsigned got_dims[7];
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned smem, void *stream, void **params, void **extra) {
    got_f = f; got_stream = stream; got_params = params; got_extra = extra;
    unsigned d[7] = {gx, gy, gz, bx, by, bz, smem};
    for (int i = 0; i < 7; ++i) got_dims[i] = d[i];
    return 0;
}
"""


@pytest.fixture
def stub(tmp_path, monkeypatch):
    """STUB_DRIVER compiled here and put in the driver's place for PreparedLaunch (the library, to read what the
    last call passed)."""
    import shutil
    import subprocess

    from convbench.core.gpu import launcher

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler here to build the stand-in driver function")
    src, lib = tmp_path / "stub.c", tmp_path / "libstub.so"
    src.write_text(STUB_DRIVER)
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(lib), str(src)], check=True)
    library = ctypes.CDLL(str(lib))
    fn = library["cuLaunchKernel"]
    fn.restype = ctypes.c_int
    monkeypatch.setattr(launcher, "_cu_launch_kernel", lambda: fn)
    return library


def test_prepared_launch_passes_every_argument_through_the_c_call(stub):
    """PreparedLaunch calls cuLaunchKernel through ctypes without argtypes: every value is a ctypes object built once,
    so a wrong type or width would reach the driver silently. A C function with the driver's signature, compiled
    here, records what arrives (the stack-passed arguments of x86-64 included)."""
    from convbench.core.gpu import launcher

    y, x = torch.zeros(4), torch.zeros(8)
    kernel = SimpleNamespace(kernel=SimpleNamespace(ptr=0x7F00_1234_5670))
    job = launcher.PreparedLaunch(kernel, (132, 2, 3), (384, 1, 1), (y, x, 97, -5, 2.5), 227 * 1024, "k")
    stream = 0xDEAD_BEEF_1234_5678  # a full 64-bit handle
    job(stream)

    assert ctypes.c_void_p.in_dll(stub, "got_f").value == 0x7F00_1234_5670
    assert ctypes.c_void_p.in_dll(stub, "got_stream").value == stream
    assert list((ctypes.c_uint * 7).in_dll(stub, "got_dims")) == [132, 2, 3, 384, 1, 1, 227 * 1024]
    assert ctypes.c_void_p.in_dll(stub, "got_extra").value is None
    params = ctypes.cast(ctypes.c_void_p.in_dll(stub, "got_params").value, ctypes.POINTER(ctypes.c_void_p))
    as_u64 = [ctypes.cast(params[i], ctypes.POINTER(ctypes.c_uint64))[0] for i in (0, 1)]
    assert as_u64 == [y.data_ptr(), x.data_ptr()]  # pointers: 8 bytes
    assert [ctypes.cast(params[i], ctypes.POINTER(ctypes.c_int32))[0] for i in (2, 3)] == [97, -5]  # `const int`
    assert ctypes.cast(params[4], ctypes.POINTER(ctypes.c_float))[0] == 2.5  # `float`
    job(0)  # the default stream: NULL
    assert ctypes.c_void_p.in_dll(stub, "got_stream").value is None


def test_launch_prepares_once_per_launch_and_passes_what_it_was_given(stub, monkeypatch):
    """launch() (rungs 1-12, the whole network's dense layers, a course file's kernel) goes through a PreparedLaunch
    kept per launch_key: a short grid or block padded to three, the same launch again reuses it, and another buffer
    or another number is another launch, passed as its own bytes."""
    from convbench.core.gpu import launcher

    monkeypatch.setattr(launcher, "LAUNCHES", launcher.LaunchCache())
    kernel = SimpleNamespace(kernel=SimpleNamespace(ptr=0x7F00_0000_1000))
    stream = SimpleNamespace(cuda_stream=0x1234)
    y, x, other = torch.zeros(4), torch.zeros(8), torch.zeros(8)
    launcher.launch(kernel, (5,), (64,), (y, x, 3, 2.0), shared_mem=96, stream=stream)
    assert list((ctypes.c_uint * 7).in_dll(stub, "got_dims")) == [5, 1, 1, 64, 1, 1, 96]
    assert ctypes.c_void_p.in_dll(stub, "got_stream").value == 0x1234
    assert len(launcher.LAUNCHES) == 1
    launcher.launch(kernel, (5,), (64,), (y, x, 3, 2.0), shared_mem=96, stream=stream)
    assert len(launcher.LAUNCHES) == 1  # the same launch: prepared once
    launcher.launch(kernel, (5,), (64,), (y, other, 3, 2.0), shared_mem=96, stream=stream)
    params = ctypes.cast(ctypes.c_void_p.in_dll(stub, "got_params").value, ctypes.POINTER(ctypes.c_void_p))
    assert ctypes.cast(params[1], ctypes.POINTER(ctypes.c_uint64))[0] == other.data_ptr()
    launcher.launch(kernel, (5,), (64,), (y, other, 3.0, 2.0), shared_mem=96, stream=stream)
    params = ctypes.cast(ctypes.c_void_p.in_dll(stub, "got_params").value, ctypes.POINTER(ctypes.c_void_p))
    assert ctypes.cast(params[2], ctypes.POINTER(ctypes.c_float))[0] == 3.0  # 3.0 is a float: not int 3's bytes
    assert len(launcher.LAUNCHES) == 3
    keys = {launcher.launch_key(kernel, (1, 1, 1), (1, 1, 1), (v,), 0) for v in (1, 1.0, True)}
    assert len(keys) == 3


def test_a_failed_launch_is_named_as_the_driver_names_it(monkeypatch):
    from convbench.core.gpu import launcher

    failing = lambda *args: 1  # noqa: E731 - CUDA_ERROR_INVALID_VALUE
    monkeypatch.setattr(launcher, "_cu_launch_kernel", lambda: failing)
    job = launcher.PreparedLaunch(SimpleNamespace(kernel=SimpleNamespace(ptr=1)), (1, 1, 1), (1, 1, 1), (), 0, "k")
    with pytest.raises(UsageError, match=r"CUDA launch of k grid=\(1, 1, 1\) failed: (CUDA_ERROR_INVALID_VALUE|CUresult 1)"):
        job(0)


def test_a_kernel_argument_of_another_type_is_refused():
    import pytest

    from convbench.core.gpu import launcher

    with pytest.raises(TypeError, match="str"):
        launcher.ctypes_arg("7")
