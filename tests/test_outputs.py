"""The pool of timed calls' outputs (core/outputs.py): an output is handed out again only when nothing else holds
it, in any of the ways a caller can hold a tensor's memory; outside a timed region every call gets a fresh one."""

import weakref
from types import SimpleNamespace

import pytest
import torch

from convbench.core import outputs
from convbench.core.outputs import OutputPool

pytestmark = pytest.mark.skipif(not outputs.usable(), reason="this PyTorch lacks the use counts the pool checks")


def layer():
    return torch.zeros(2, 3, 10, 10), torch.zeros(4, 3, 3, 3)


def test_an_output_nothing_holds_is_handed_out_again():
    pool, (x, k) = OutputPool(), layer()
    y = pool.take("impl", x, k)
    assert y.shape == (2, 4, 8, 8) and y.dtype == torch.float32
    address = y.data_ptr()
    del y
    assert pool.take("impl", x, k).data_ptr() == address
    assert pool.take("impl", torch.zeros(3, 3, 10, 10), k).data_ptr() != address  # another shape: its own output


HOLDS = {
    "a name": lambda y: y,
    "a list": lambda y: [y],
    "a view": lambda y: y[0],
    "a reshaped view": lambda y: y.view(-1),
    "a detached tensor": lambda y: y.detach(),
    "its storage": lambda y: y.untyped_storage(),
    "a tensor on its storage": lambda y: torch.empty(0).set_(y.untyped_storage()),
    "a weak reference": lambda y: weakref.ref(y),
}


@pytest.mark.parametrize("how", HOLDS)
def test_an_output_still_held_is_never_handed_out(how):
    pool, (x, k) = OutputPool(), layer()
    y = pool.take("impl", x, k)
    y.fill_(7.0)
    held = HOLDS[how](y)
    del y
    again = pool.take("impl", x, k)
    again.fill_(-1.0)
    if isinstance(held, weakref.ref):  # the pool dropped it for a new output: gone, or as it was
        kept = held()
        assert kept is None or torch.all(kept == 7.0)
    elif isinstance(held, (torch.Tensor, list)):
        kept = held if isinstance(held, torch.Tensor) else held[0]
        assert torch.all(kept == 7.0), f"the output held by {how} was written by the next call"
    else:  # a storage: its bytes
        assert torch.all(torch.frombuffer(bytearray(held), dtype=torch.float32) == 7.0)
    del held
    assert pool.take("impl", x, k).data_ptr() != again.data_ptr()  # `again` is held here: the third call gets another


def test_outputs_are_kept_per_implementation_and_start_as_nan():
    """Another implementation never gets an output one left behind (its values would hide elements it does not
    write), and a new output is NaN, so an element never written stays NaN in every later call."""
    pool, (x, k) = OutputPool(), layer()
    first = pool.take("a", x, k)
    assert torch.isnan(first).all()
    first.fill_(1.0)
    address = first.data_ptr()
    del first
    other = pool.take("b", x, k)
    assert other.data_ptr() != address and torch.isnan(other).all()
    assert pool.take("a", x, k).data_ptr() == address


def test_the_pool_is_bounded():
    pool = OutputPool()
    k = torch.zeros(1, 1, 1, 1)
    xs = [torch.zeros(1, 1, 1, n + 1) for n in range(outputs.ENTRIES + 5)]
    for x in xs:
        pool.take("impl", x, k)
    assert len(pool) == outputs.ENTRIES
    first = pool.take("impl", xs[0], k)  # the oldest was dropped: a new output, kept again
    assert len(pool) == outputs.ENTRIES and first.shape == (1, 1, 1, 1)


def test_a_large_output_is_not_kept_and_a_note_says_so_once(monkeypatch, capsys):
    monkeypatch.setattr(outputs, "MAX_BYTES", 1000)
    pool, (x, k) = OutputPool(), layer()  # 2*4*8*8 floats: 2048 bytes
    pool.take("impl", x, k)
    pool.take("impl", x, k)
    assert len(pool) == 0
    said = capsys.readouterr().err
    assert said.count("impl's output") == 1 and "each timed call includes making it" in said


def test_the_kept_outputs_together_are_bounded(monkeypatch):
    monkeypatch.setattr(outputs, "MAX_BYTES", 3000)  # each output is kept, 4 x 3000 bytes of them in all
    pool = OutputPool()
    layers = [(torch.zeros(1, c, 9, 27), torch.zeros(4, c, 3, 3)) for c in range(1, 7)]  # outputs of 2800 bytes
    for x, k in layers:
        y = pool.take("impl", x, k)
        assert pool.kept_bytes() <= outputs.KEPT_LIMITS * 3000
    assert len(pool) == 4
    del y
    first = pool.take("impl", *layers[-1]).data_ptr()  # (not inside the assert: pytest keeps what it shows)
    assert pool.take("impl", *layers[-1]).data_ptr() == first  # the newest output stays


def test_a_gpu_keeps_what_a_course_layer_at_10000_images_needs():
    # fa19's conv1 at 10000 images: 10000 x 12 x 66 x 66 floats, ~2.1 GB (a GPU of 64 GiB or more keeps it)
    assert outputs.MAX_BYTES >= 10000 * 12 * 66 * 66 * 4
    assert outputs.keep_limit(-1) == outputs.MAX_BYTES


def test_only_a_timed_region_on_the_gpu_takes_from_the_pool(monkeypatch):
    taken = []
    monkeypatch.setattr(outputs, "_pool", SimpleNamespace(take=lambda impl, x, k: taken.append(x) or torch.empty(0)))
    x, k = layer()
    with outputs.pooled():
        assert outputs.output_for("impl", x, k).shape == (2, 4, 8, 8)  # the CPU: a new tensor
    assert outputs.output_for("impl", x, k).shape == (2, 4, 8, 8) and not taken
    if torch.cuda.is_available():
        xg, kg = x.cuda(), k.cuda()
        assert outputs.output_for("impl", xg, kg).shape == (2, 4, 8, 8) and not taken  # outside a timed region
        with outputs.pooled():
            outputs.output_for("impl", xg, kg)
        assert len(taken) == 1


@pytest.mark.gpu
def test_timed_calls_reuse_a_dropped_output_on_the_gpu():
    from convbench.core.timing import timed
    from convbench.impls.registry import get_impl

    impl = get_impl("gpu-basic")
    x, k = (t.cuda() for t in layer())
    first, _ = timed("cuda", lambda: impl(x, k))
    address = first.data_ptr()
    del first
    second, _ = timed("cuda", lambda: impl(x, k))
    assert second.data_ptr() == address
    third, _ = timed("cuda", lambda: impl(x, k))  # `second` is held: a new output
    assert third.data_ptr() != address
    assert torch.equal(second, third)


def test_pooled_is_a_scope():
    assert not outputs._ON.get()
    with outputs.pooled():
        assert outputs._ON.get()
        with outputs.pooled():
            assert outputs._ON.get()
        assert outputs._ON.get()
    assert not outputs._ON.get()
