"""The submission's side of the sandbox: the process worker.py starts (inside jail.py's namespaces), which loads the
submission and answers the parent's requests. Everything here runs next to the submission's code and can be
changed by it; the parent trusts none of it (protocol.py checks every message; times are the parent's own).

Requests (one JSON message each; arrays in the shared memory whose descriptor came with the request, or earlier):
    build      compile the submission (nvcc) into the build folder, load nothing: the one step that may write
               there, and the submission's code does not run in it; the answer carries the build report kept beside
               the library (nvcc_build.stored_report; build_report.py)
    prepare    load the library / module, run its set-up (get_device_properties)
    call       x, k to the device, y filled with NaN, the implementation called and synchronized, y (and x, k as
               the call left them) back; with "timed": after untimed calls for "warm_s" seconds in the same
               buffers on random values (then x staged again, y filled with NaN), once x, k and y are on the
               device the child says "ready"; the parent's "go" (its clock starts) brings a seed, with which x is
               scaled (protocol.perturb) before the call, so that no work on it can start earlier; after the
               synchronize the child says "done"
    layer      host to host, as the network runs a layer (a mini-dnn file's prolog, conv_forward_gpu, epilog); with
               "timed": whole layers untimed for "warm_s" seconds first (on random values), then the shim stops
               before conv_forward_gpu and says "ready", runs it when the parent says "go" (the parent's clock
               starts there) and says "done" after its cudaDeviceSynchronize
    profile    for a grade's feedback, after its timed calls: a warm-up, then `calls` calls of the op ("call" on
               inputs staged on the device once, or "layer") under torch.profiler's CUDA activity tracing; the trace
               is exported into this process's own temporary folder and summarized here (kernel_trace.py). On the
               CPU the calls run without a profiler: no kernels, only their wall time
    counters   for a grade's feedback, where the machine gives GPU counters to every user: Nsight Compute, run
               here in the sandbox on a program that loads the submission again (ncu_counters.py), one layer's call
    quit
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

import torch

from convbench.core.errors import UsageError
from convbench.core.timing import synchronize, timed
from convbench.user import kernel_trace, ncu_counters, nvcc_build
from convbench.user.base import BuildOptions, UserImpl
from convbench.user.loader import load_unguarded
from convbench.user.protocol import (
    MAX_MESSAGE,
    PHASE_BYTES,
    Shared,
    check_go,
    perturb,
    perturb_scratch,
    receive,
    receive_soon,
    send,
)

ENTRY = "import sys; from convbench.user.child import child_main; sys.exit(child_main(sys.argv[1:]))"
SPIN_S = 1.0  # how long the child polls for the parent's "go" before it sleeps in recv
_WARM: set[str] = set()  # devices whose perturb kernels have run once in this process


def _message(e: BaseException) -> str:
    if isinstance(e, UsageError):
        return str(e)
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0]}" if lines else type(e).__name__


def _leave(code: int) -> None:
    """Exit at once, without the interpreter's clean-up: after a CUDA fault the context is broken, and unloading
    modules from it (CuPy's, torch's) would only print tracebacks of their own."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


class Handshake:
    """The timed layer's two points, called from the shim (nvcc_build.timing_hook): 1 before the op (say "ready",
    wait for "go"), 2 after its synchronize (say "done")."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.active = False
        self.spin = False  # poll for "go" (on a GPU); on the CPU the call's own threads need the cores more

    def __call__(self, point: int) -> int | None:
        """At 1: "ready", then the parent's "go" and its seed; at 2: "done"."""
        if not self.active:
            return None
        try:
            if point == 1:
                send(self.sock, {"event": "ready"})
                # the parent answers at once: stay awake for it
                message, fds = receive_soon(self.sock, SPIN_S) if self.spin else receive(self.sock)
                for fd in fds:
                    os.close(fd)
                return check_go(message)
            if point == 2:
                send(self.sock, {"event": "done"})
                os.sched_yield()  # where the parent waits on this CPU, it reads its clock now, not after our slice
        except (EOFError, OSError, ValueError):
            _leave(0)  # the parent is gone, or said something else than go
        return None


def _repeat(call, seconds: float, device: str) -> None:
    """call() and synchronize, at least once and until `seconds` have passed: the parent's warm-up."""
    began = time.perf_counter()
    while True:
        call()
        synchronize(device)
        if time.perf_counter() - began >= seconds:
            return


def _warm_up(impl: UserImpl, seconds: float, x_dev: torch.Tensor, k_dev: torch.Tensor, y_dev: torch.Tensor,
             shared: Shared, device: str) -> None:
    """The parent's warm-up before a timed call: untimed calls for `seconds` in the timed call's own buffers (the
    same pointers, for a file that prepares per buffer), on random values, not the input (nothing computed now can
    answer the timed call); then the input back in x_dev and y_dev NaN again."""
    if seconds <= 0:
        return
    shared.set_phase("warm-up")
    # the input is staged on the device first and copied back into x_dev on the device after: a copy from the
    # host (milliseconds for a large layer, the SMs idle) would let the clocks fall again before the timed call
    staged = x_dev.clone()
    x_dev.uniform_()
    _repeat(lambda: impl(x_dev, k_dev, y_dev) if impl.writes_into else impl.fn(x_dev, k_dev), seconds, device)
    x_dev.copy_(staged)
    del staged
    y_dev.fill_(float("nan"))  # what the timed call leaves unwritten stays NaN
    synchronize(device)


def _serve(impl: UserImpl, request: dict, shared: Shared, sock: socket.socket, handshake: Handshake) -> dict:
    device = request["device"]
    x = shared.tensor(*request["x"])
    k = shared.tensor(*request["k"])
    y = shared.tensor(*request["y"])
    timed_call = bool(request.get("timed"))
    warm_s = float(request.get("warm_s", 0.0)) if timed_call else 0.0
    handshake.spin = device != "cpu"
    times: dict = {}
    if request["op"] == "call":
        k_dev = k.to(device)
        x_dev = x.to(device) if device != "cpu" or not timed_call else x.clone()
        # on the CPU the output is the shared memory itself: 10000 images' conv1 is a gigabyte, once is enough
        y_dev = y.fill_(float("nan")) if device == "cpu" else torch.full(tuple(y.shape), float("nan"), device=device)
        if timed_call:
            # allocated before the warm-up: the timed call's own allocations (a Python file's output) then come
            # from the blocks its warm-up calls freed, as in a run of calls, not from fresh device memory
            scratch = perturb_scratch(x_dev)
            _warm_up(impl, warm_s, x_dev, k_dev, y_dev, shared, device)
            if device not in _WARM:  # the scaling's kernels loaded now, not on the clock (CUDA loads them lazily)
                perturb(torch.ones(8, device=device), 0)
                _WARM.add(device)
            synchronize(device)
            handshake.active = True
            seed = handshake(1)
            if seed is not None:
                perturb(x_dev, seed, scratch)
        shared.set_phase("conv_forward")
        # a Python file's conv_forward returns a tensor of its own: copying it into the caller's output is the
        # contract's work, not the file's, so it comes after both clocks (and the empty call's: worker.Calibration)
        out, op_s = timed(device, lambda: impl(x_dev, k_dev, y_dev) if impl.writes_into else impl.fn(x_dev, k_dev))
        synchronize(device)
        if timed_call:
            handshake(2)
            handshake.active = False
        if not impl.writes_into:
            y_dev.copy_(out)
        shared.set_phase("")
        reported = impl.reported_op_time()
        if y_dev is not y:
            y.copy_(y_dev)
        if device != "cpu" and not timed_call:  # what the kernel left in its inputs goes back, for the check
            x.copy_(x_dev)
            k.copy_(k_dev)
        times = dict(getattr(impl, "last_times", {}) or {})
        return {"status": "ok", "op_s": reported if reported is not None else op_s, "times": times}
    # "layer": host to host, as the network runs it
    k_dev = k.to(device)
    if impl.host_layer is not None:
        if warm_s > 0:  # the parent's warm-up, outside the handshake, on random values (nothing of it can answer
            shared.set_phase("warm-up")  # the timed call)
            noise = torch.rand(tuple(x.shape))
            _repeat(lambda: impl.host_layer(noise, k_dev), warm_s, device)
        shared.set_phase("host_layer")
        handshake.active = timed_call
        try:
            out, layer_s = timed(device, lambda: impl.host_layer(x, k_dev))
        finally:
            handshake.active = False
        y.copy_(out)
        op_s = impl.reported_op_time()
    else:
        op_s = None

        def layer(warm_up: bool = False):
            nonlocal op_s
            on_clock = timed_call and not warm_up
            x_dev = torch.rand(tuple(x.shape), device=device) if warm_up else x.to(device)
            y_dev = torch.full(tuple(y.shape), float("nan"), device=device)
            shared.set_phase("conv_forward")
            if on_clock:
                handshake.active = True
                handshake(1)
            _, op_s = timed(device, lambda: impl(x_dev, k_dev, y_dev))
            synchronize(device)
            if on_clock:
                handshake(2)
                handshake.active = False
            if not warm_up:
                y.copy_(y_dev)

        if warm_s > 0:
            shared.set_phase("warm-up")
            _repeat(lambda: layer(warm_up=True), warm_s, device)
        _, layer_s = timed(device, layer)
    shared.set_phase("")
    times = dict(getattr(impl, "last_times", {}) or {})
    reported_layer = times.get("layer_s")
    return {"status": "ok", "op_s": op_s, "layer_s": reported_layer if reported_layer is not None else layer_s,
            "times": times}


def _build(impl: UserImpl) -> dict:
    """Compile (nothing of the submission runs), and answer with the build report kept beside the library."""
    lib = impl.fn.compile()
    report, problem = nvcc_build.stored_report(lib)
    if report is not None and len(json.dumps(report)) > MAX_MESSAGE - 1024:
        report, problem = None, "the build report is longer than a message may be"
    return {"status": "ok", "report": report, "report_problem": problem}


def _one_call(impl: UserImpl, op: str, device: str, x: torch.Tensor, k: torch.Tensor, y: torch.Tensor):
    """One call of `op` as Worker.run makes it, its inputs staged once (a profiled call does only the
    submission's work): "call" on x, k on the device, "layer" host to host (the file's own layer where it has
    one). Outputs are not filled with NaN first (that fill would be a kernel of ours in the trace)."""
    k_dev = k.to(device)
    if op == "call":
        x_dev = x.to(device)
        y_dev = y if device == "cpu" else torch.empty(tuple(y.shape), device=device)
        if not impl.writes_into:  # as _serve times it: the file's own tensor, not the contract's copy of it
            return lambda: impl.fn(x_dev, k_dev)
        return lambda: impl(x_dev, k_dev, y_dev)
    if impl.host_layer is not None:
        return lambda: impl.host_layer(x, k_dev)

    def layer():
        y_dev = torch.empty(tuple(y.shape), device=device)
        impl(x.to(device), k_dev, y_dev)
        y.copy_(y_dev)

    return layer


def _traced(calls) -> list:
    """The events of a CUDA activity trace of calls() (kernel_trace.read), exported into a temporary folder of
    this process's own and removed after."""
    from torch.profiler import ProfilerActivity, profile

    folder = tempfile.mkdtemp(prefix="convbench-trace-")
    try:
        with profile(activities=[ProfilerActivity.CUDA]) as traced:
            calls()
        path = os.path.join(folder, "trace.json")
        traced.export_chrome_trace(path)
        return kernel_trace.read(path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _profile(impl: UserImpl, request: dict, shared: Shared) -> dict:
    device, calls = request["device"], int(request["calls"])
    run = _one_call(impl, request["call"], device, shared.tensor(*request["x"]), shared.tensor(*request["k"]),
                    shared.tensor(*request["y"]))
    shared.set_phase("profile warm-up")
    run()  # CUDA loads modules, the file allocates its buffers: not in the trace
    synchronize(device)
    walls: list[float] = []

    def timed_calls():
        for _ in range(calls):
            start = time.perf_counter()
            run()
            synchronize(device)
            walls.append(time.perf_counter() - start)

    shared.set_phase("profile")
    if device == "cpu":
        timed_calls()
        events = []
    else:
        events = _traced(timed_calls)
    shared.set_phase("")
    return {"status": "ok", "trace": kernel_trace.summarize(events, calls, walls)}


def _counters(loaded: list[str], request: dict) -> dict:
    """ncu, here in the sandbox, on a program that loads the submission as this process did (ncu_counters.py)."""
    kind, path, options = loaded
    shape = [int(v) for v in request["shape"]][:6]
    return {"status": "ok", "counters": ncu_counters.measure(request["ncu"], kind, Path(path), options,
                                                             request["call"], shape)}


def child_main(argv: list[str]) -> int:
    sock = socket.socket(fileno=int(argv[0]))
    kind, path, options = argv[1], Path(argv[2]), BuildOptions(**json.loads(argv[3]))
    handshake = Handshake(sock)
    nvcc_build.use_timing_hook(handshake)
    try:
        impl = load_unguarded(kind, path, options)
    except BaseException as e:  # noqa: BLE001 - everything goes back to the parent as one line
        send(sock, {"status": "error", "stage": "load", "message": _message(e)})
        return 1
    send(sock, {"status": "ok", "name": impl.name, "device": impl.device, "summary": impl.summary,
                "demonstrates": impl.demonstrates, "precision": impl.precision, "arithmetic": impl.arithmetic,
                "tolerance": impl.tolerance})
    shared = None
    while True:
        try:
            request, fds = receive(sock)
        except (EOFError, OSError, ValueError):
            return 0  # the parent went away
        if fds:
            if shared is not None:
                nvcc_build.use_phase_buffer(None, 0)
                shared.close()
            shared = Shared(os.fstat(fds[0]).st_size, fds[0])
            # a mini-dnn or MXNet shim names each phase (prolog, conv_forward_gpu, ...) here as it starts it
            nvcc_build.use_phase_buffer(ctypes.addressof(ctypes.c_char.from_buffer(shared.map)), PHASE_BYTES)
        try:
            op = request.get("op")
            if op == "quit":
                return 0
            if op == "build":
                reply = _build(impl)
            elif op == "prepare":
                impl.prepare()
                device_properties = getattr(impl.fn, "device_properties", None)
                if callable(device_properties):
                    device_properties()  # a mini-dnn file's get_device_properties(): the course printed it at start
                reply = {"status": "ok"}
            elif op == "profile":
                reply = _profile(impl, request, shared)
                synchronize(request["device"])
            elif op == "counters":
                reply = _counters(argv[1:4], request)
            else:
                reply = _serve(impl, request, shared, sock, handshake)
                synchronize(request["device"])
        except BaseException as e:  # noqa: BLE001
            send(sock, {"status": "error", "stage": request.get("op"), "message": _message(e)})
            _leave(1)
        send(sock, reply)
