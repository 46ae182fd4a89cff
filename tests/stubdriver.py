"""A stand-in for the CUDA driver's cuLaunchKernel and cuLaunchKernelEx, compiled here: it records what the launchers
pass (tests of the C and ctypes launchers and of the compiled call path on a machine without a GPU)."""

from pathlib import Path

import pytest

STUB_DRIVER = r"""
#include <stdint.h>
/* cuLaunchKernel's signature; records what it was called with, and fails once with fail_next's result */
void *got_f, *got_stream, **got_params, **got_extra;
extern unsigned plain_calls;
unsigned got_dims[7];
int next_result;
void fail_next(int r) { next_result = r; }
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned smem, void *stream, void **params, void **extra) {
    got_f = f; got_stream = stream; got_params = params; got_extra = extra;
    unsigned d[7] = {gx, gy, gz, bx, by, bz, smem};
    for (int i = 0; i < 7; ++i) got_dims[i] = d[i];
    int r = next_result;
    next_result = 0;
    ++plain_calls;
    return r;
}
/* cuLaunchKernelEx: cuda.h's CUlaunchConfig and CUlaunchAttribute, written out; the first attribute recorded */
typedef struct { int id; char pad[4]; union { char bytes[64]; int value; } v; } attr_t;
typedef struct { unsigned dims[7]; void *stream; attr_t *attrs; unsigned nattrs; } config_t;
unsigned plain_calls, ex_calls, got_nattrs;
int got_attr_id = -1, got_attr_value = -1;
int cuLaunchKernelEx(const config_t *c, void *f, void **params, void **extra) {
    got_f = f; got_stream = c->stream; got_params = params; got_extra = extra;
    for (int i = 0; i < 7; ++i) got_dims[i] = c->dims[i];
    got_nattrs = c->nattrs;
    got_attr_id = c->nattrs ? c->attrs[0].id : -1;
    got_attr_value = c->nattrs ? c->attrs[0].v.value : -1;
    int r = next_result;
    next_result = 0;
    ++ex_calls;
    return r;
}
int driver_version = 13000;  /* cuDriverGetVersion's answer (CUDA 13.0) */
int cuDriverGetVersion(int *v) { *v = driver_version; return 0; }
"""


def stub_library(folder: Path) -> Path:
    """STUB_DRIVER compiled into FOLDER/libcuda.so.1 (skip where no C compiler is)."""
    import shutil
    import subprocess

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler here to build the stand-in driver function")
    src, lib = folder / "stub.c", folder / "libcuda.so.1"
    src.write_text(STUB_DRIVER)
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wl,-soname,libcuda.so.1", "-o", str(lib), str(src)], check=True)
    return lib


def c_launcher():
    """The C launcher module (_launch.c, built at install). Skip where it was not built, except under CI, whose
    machine has a C compiler: there a failed build (which the install's optional extension would hide) fails."""
    import os

    try:
        from convbench.core.gpu import _launch
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("the C launcher was not built at install (setup.py's optional extension failed: rebuild "
                        "with pip install -e . -v to see why)")
        pytest.skip("the C launcher was not built (no C compiler at install)")
    return _launch
