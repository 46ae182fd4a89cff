"""Issue 27, point 1: what the child sends is bounded, checked data, nothing else. The checks themselves, message by
message, without a child (the attacks through a real child are in test_sandbox_timing.py)."""

from __future__ import annotations

import json
import math
import socket

import pytest
import torch

from convbench.user import protocol
from convbench.user.protocol import (
    MAX_MESSAGE,
    Malformed,
    check_event,
    check_go,
    check_meta,
    check_reply,
    perturb,
    printable,
    receive,
    send,
)

META = {"status": "ok", "name": "k.py", "device": "cpu", "precision": "fp32", "arithmetic": "fp32",
        "tolerance": 1e-5, "summary": "s", "demonstrates": "d"}


@pytest.mark.parametrize("change", [
    {"tolerance": 1e9}, {"tolerance": 0}, {"tolerance": True}, {"tolerance": "1e-5"}, {"device": "tpu"},
    {"precision": "fp8"}, {"arithmetic": "int4"}, {"name": ""}, {"name": "x" * 101}, {"name": "a\x1bb"},
    {"name": 7}, {"status": "fine"},
])
def test_a_description_out_of_bounds_is_malformed(change):
    """The forged first message of the finding (tolerance 1e9) and its relatives."""
    with pytest.raises(Malformed):
        check_meta({**META, **change})


def test_a_good_description_passes_with_its_texts_escaped():
    meta = check_meta({**META, "summary": "red \x1b[31m alert\n" + "x" * 1000})
    assert meta["tolerance"] == 1e-5 and "\x1b" not in meta["summary"] and len(meta["summary"]) <= 300


@pytest.mark.parametrize("message", [
    {"status": "ok", "op_s": -1.0}, {"status": "ok", "op_s": math.inf}, {"status": "ok", "op_s": "1"},
    {"status": "ok", "op_s": 1e9}, {"status": "ok", "layer_s": [1]}, {"status": "ok", "times": []},
    {"status": "ok", "times": {"op_s": math.nan}}, {"status": "ok", "times": {"op_empty": 1}},
    {"status": "ok", "times": {"ignored_error": 5}}, {"status": "error", "message": {"a": 1}}, {"op_s": 1.0},
])
def test_a_reply_out_of_bounds_is_malformed(message):
    with pytest.raises(Malformed):
        check_reply(message)


def test_a_reply_keeps_only_what_the_protocol_names():
    reply = check_reply({"status": "ok", "op_s": 0.5, "times": {"op_s": 0.25, "op_empty": False, "rank": 1,
                                                                  "ignored_error": "\x1b[2J"}, "leaderboard": 1})
    assert reply == {"status": "ok", "op_s": 0.5, "layer_s": None,
                     "times": {"op_s": 0.25, "op_empty": False, "ignored_error": "\\x1b[2J"}}


def test_events_and_go():
    assert check_event({"event": "done"}, "done") == {"event": "done"}
    with pytest.raises(Malformed):
        check_event({"event": "done"}, "ready")
    assert check_event({"status": "error", "message": "x"}, "ready")["status"] == "error"
    assert check_go({"op": "go", "seed": 5}) == 5 and check_go({"op": "go"}) is None
    for bad in ({"op": "stop"}, {"op": "go", "seed": -1}, {"op": "go", "seed": 2**63}, {"op": "go", "seed": "5"}):
        with pytest.raises(Malformed):
            check_go(bad)


def test_what_cannot_be_a_message():
    """Not JSON, not an object, longer than MAX_MESSAGE: Malformed (and descriptors sent with it closed)."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with a, b:
        for data in (b"\xff\xfe", b"[1, 2]", json.dumps({"x": "y" * MAX_MESSAGE}).encode()):
            a.sendmsg([data])
            with pytest.raises(Malformed):
                receive(b)
        send(a, {"status": "ok"})
        assert receive(b)[0] == {"status": "ok"}


def test_printable_escapes_every_control_character_but_newline_and_tab():
    assert printable("a\tb\nc\x00\x07\x1b[2J\x7f\x9b") == "a\tb\nc\\x00\\x07\\x1b[2J\\x7f\\x9b"


def test_the_seed_gives_the_same_input_on_both_sides_and_a_new_one_per_seed():
    """The parent checks the child's output against perturb(x, seed) computed on its side: the same bits."""
    x = torch.randn(3, 2, 9, 9)
    a, b, c = perturb(x.clone(), 11), perturb(x.clone(), 11), perturb(x.clone(), 12)
    assert torch.equal(a, b) and not torch.equal(a, c)
    ratio = a / x
    assert float(ratio.min()) >= 0.99 and float(ratio.max()) < 1.01


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_the_child_scaling_into_its_scratch_gets_the_parents_bits(monkeypatch, device):
    """The child scales x drawing into a buffer allocated before its warm-up (perturb_scratch), the parent without
    one: the same bits, over several chunks and a last short one."""
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA GPU here (torch.cuda.is_available() is False); run on the device machine")
    monkeypatch.setattr(protocol, "PERTURB_CHUNK", 1000)
    x = torch.randn(3, 2, 29, 31, device=device)  # 5394 elements: 5 whole chunks and a short one
    scratch = protocol.perturb_scratch(x)
    assert scratch.numel() == 1000
    assert torch.equal(perturb(x.clone(), 21, scratch), perturb(x.clone(), 21))
