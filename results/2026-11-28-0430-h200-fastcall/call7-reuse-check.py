"""On the GPU: an output whose storage was read once (as network/model.py does) is reused by the compiled path."""
import torch

from convbench.core import outputs
from convbench.impls.registry import get_impl

impl = get_impl("gpu-wgmma")
impl.prepare()
x, k = torch.randn(100, 12, 33, 33, device="cuda"), torch.randn(24, 12, 5, 5, device="cuda")
with outputs.pooled():
    y = impl(x, k)
    y.untyped_storage().data_ptr()
    p = y.data_ptr()
    del y
    y = impl(x, k)
    print("served by the compiled path:", impl._fast is not None and impl._fast.entries() == 1)
    print("reused after its storage was read:", y.data_ptr() == p)
