"""The Triton implementations run in Triton's CPU interpreter (TRITON_INTERPRET=1) on small shapes: the same
kernel source the GPU compiles, checked against the float64 reference with NaN-poisoned outputs."""

import os

import pytest
import torch

if torch.cuda.is_available():
    pytest.skip("on a GPU the Triton impls are compiled for real and checked by test_impls' GPU tests",
                allow_module_level=True)
os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: it reads the variable at import and at jit time

from convbench.impls.registry import get_impl  # noqa: E402
from convbench.measure import problem  # noqa: E402

pytest.importorskip("triton", reason="triton is not installed: pip install -e '.[triton]' (x86-64 Linux)")

SHAPES = [
    problem.ConvShape(1, 1, 1, 1, 1, 1),
    problem.ConvShape(1, 1, 1, 5, 5, 5),  # H = W = K
    problem.ConvShape(2, 1, 4, 9, 12, 3),  # H != W, C = 1
    problem.ConvShape(1, 3, 5, 8, 7, 2),  # no dimension a multiple of a block
    problem.ConvShape(2, 6, 16, 10, 10, 5),  # sp19 conv2-like, CKK = 150 spans several BLOCK_K slices
    problem.ConvShape(1, 4, 17, 11, 9, 7),  # M > BLOCK_M
]


@pytest.mark.parametrize("name", ["triton-igemm", "triton-igemm-tf32x3"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_triton_kernel_in_the_interpreter(name, shape):
    x, k = problem.generate(shape, seed=shape.B * 31 + shape.K)
    y = problem.poisoned_output(shape, "cpu")
    get_impl(name).fn(x, k, y)
    result = problem.check(y, problem.reference(x, k), 1e-5)
    assert result.unwritten == 0
    assert result.ok, f"{name} on {shape}: {result}"
