"""Issue 27, points 3 and 8 (and findings 6, 8, 14): the time a grade ranks by is convbench's, not the submission's,
and what the child says is checked data. What was found: a kernel rebinding its process's timer (or the message
sender) reported any Op Time it liked and ranked first; a forged first message (tolerance 1e9) made verify pass a
kernel returning zeros; a forged message (KeyError) aborted a whole grade with no JSON; a kernel caching outputs by
input fingerprint was listed at its fastest re-time. Each test is one such kernel, graded on the CPU."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import torch
from clihelp import cli
from sandboxhelp import require_sandbox

from convbench.measure.grade import GradeSettings, grade_one
from convbench.user.worker import Calibration

SLOW = 0.03  # seconds each call of the test kernels takes, far above a conv of 100 images on the CPU


@pytest.fixture(autouse=True)
def _sandbox():
    require_sandbox("cpu")


@pytest.fixture(scope="module")
def calibration():
    cal = Calibration()
    yield cal
    cal.close()


def kernel(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def grade(path: Path, calibration, sizes=(100,)):
    return grade_one(path, GradeSettings(sizes=tuple(sizes), device="cpu", random_shapes=2, seed=5),
                     calibration=calibration)


HONEST = f"""
    import time, torch.nn.functional as F
    def conv_forward(x, k):
        time.sleep({SLOW})
        return F.conv2d(x, k)
"""


def test_an_honest_kernel_is_ranked_at_its_own_time(tmp_path, calibration):
    """The control: the same slow kernel without tricks agrees with convbench's clock and is ranked."""
    g = grade(kernel(tmp_path, "honest.py", HONEST), calibration)
    assert g.verdict == "ok" and g.ranked, (g.detail, g.flags)
    assert all(t >= SLOW for t in g.op_times[100])


@pytest.mark.parametrize("trick", [
    # the child's timer rebound: every region it times lasts a microsecond
    "import convbench.user.child as c\nc.timed = lambda device, fn: (fn(), 1e-6)",
    # the message sender rebound: every op_s it sends is a microsecond
    "import convbench.user.child as c\n_send = c.send\n"
    "def send(sock, m, fds=()):\n    m = dict(m)\n    if 'op_s' in m: m['op_s'] = 1e-6\n    return _send(sock, m, fds)\n"
    "c.send = send",
])
def test_a_rebound_timer_is_not_believed(tmp_path, calibration, trick):
    """A kernel rebinding its process's timer or message sender to report 1 µs: convbench's clock counts (at least
    the sleep), and the grade is flagged, not ranked."""
    g = grade(kernel(tmp_path, "liar.py", trick + "\n" + textwrap.dedent(HONEST)), calibration)
    assert g.verdict == "ok", g.detail
    assert all(t >= SLOW for t in g.op_times[100]), g.op_times
    assert not g.ranked and any("its own timer disagreed" in f for f in g.flags), g.flags


def test_an_early_done_is_under_the_floor(tmp_path, calibration):
    """The child says "done" the moment convbench says "go", and swallows its real "done" after the call: convbench's
    window then holds no work, the Op Time is under the machine's floor, and the grade is flagged."""
    g = grade(kernel(tmp_path, "early.py", """
        import time, torch.nn.functional as F
        import convbench.user.child as c
        real = c.Handshake.__call__
        def early(self, point):
            if point == 1:
                seed = real(self, 1)
                c.send(self.sock, {"event": "done"})
                return seed
            return None  # the real "done" is never sent
        c.Handshake.__call__ = early
        def conv_forward(x, k):
            time.sleep(0.03)
            return F.conv2d(x, k)
    """), calibration)
    assert g.verdict == "ok" and not g.ranked, g.detail
    assert any("under this machine's floor" in f for f in g.flags), g.flags


def test_outputs_cached_by_input_are_never_hit(tmp_path, calibration):
    """A kernel that answers inputs it has seen from a table (and sleeps on a miss): every timed call gets inputs
    no one has seen, so every one misses, and the Op Time is the slow one."""
    g = grade(kernel(tmp_path, "memo.py", f"""
        import hashlib, time, torch.nn.functional as F
        table = {{}}
        def conv_forward(x, k):
            key = hashlib.sha256(x.numpy().tobytes()).hexdigest()
            if key not in table:
                time.sleep({SLOW})
                table[key] = F.conv2d(x, k)
            return table[key].clone()
    """), calibration)
    assert g.verdict == "ok", g.detail
    assert all(t >= SLOW for t in g.op_times[100]) and all(t >= SLOW for call in g.retimed for t in call)


def test_an_answer_prepared_for_the_graded_run_is_a_wrong_answer(tmp_path, calibration):
    """A kernel that computes for the checks it expects (verify's call and the graded run's, the first two of each
    shape) and answers every later call of the shape from the last one, fast: the timed calls' fresh inputs are
    checked too, and find it out."""
    g = grade(kernel(tmp_path, "stale.py", """
        import torch.nn.functional as F
        seen = {}
        def conv_forward(x, k):
            key = (tuple(x.shape), tuple(k.shape))
            count, last = seen.get(key, (0, None))
            y = F.conv2d(x, k) if count < 2 else last
            seen[key] = (count + 1, y)
            return y.clone()
    """), calibration)
    assert g.verdict == "wrong answer" and "timed call 1, on fresh inputs" in g.detail, g.detail


FORGED_META = """
    import json, socket, sys
    s = socket.socket(fileno=int(sys.argv[1]))
    s.send(json.dumps({{"status": "ok", "name": "forged", "device": "cpu", "precision": "fp32", "arithmetic": "fp32",
                       "tolerance": {tolerance}, "summary": "", "demonstrates": ""}}).encode())
    s.detach()
    def conv_forward(x, k):
        return x.new_zeros(x.shape[0], k.shape[0], x.shape[2] - k.shape[2] + 1, x.shape[3] - k.shape[3] + 1)
"""


def test_a_forged_first_message_is_refused(capsys, tmp_path):
    """The finding: a kernel sends its own first message at import, declaring tolerance 1e9, and verify passed it
    returning zeros. Now the message is checked: one line, exit 2, no PASS."""
    path = kernel(tmp_path, "forged.py", FORGED_META.format(tolerance="1e9"))
    rc, out, err = cli(capsys, "verify", "--impl", path, "--shapes", "3")
    assert rc == 2 and "tolerance that is not a relative error between 0 and 1" in err, out + err
    assert "PASS" not in out


@pytest.mark.parametrize("message", [
    b"not json at all",
    json.dumps({"status": "ok", "op_s": -1.0}).encode(),
    json.dumps({"status": "ok", "op_s": "fast"}).encode(),
    json.dumps({"status": "ok", "times": {"op_s": 1e300}}).encode(),
    json.dumps({"status": "ok", "times": {"op_empty": "yes"}}).encode(),
    json.dumps({"status": "maybe"}).encode(),
    b"[" * 70000,
])
def test_a_forged_reply_is_a_crash_and_the_grade_goes_on(tmp_path, calibration, message):
    """A kernel that answers the parent itself, with what the protocol does not allow: that submission's verdict is
    "crash" naming the bad message, and the next submission is graded (the finding: a KeyError ended the run)."""
    forger = kernel(tmp_path, "forger.py", f"""
        import socket, sys, torch.nn.functional as F
        s = socket.socket(fileno=int(sys.argv[1]))
        def conv_forward(x, k):
            s.send({message!r})
            return F.conv2d(x, k)
    """)
    g = grade(forger, calibration)
    assert g.verdict == "crash" and "the sandbox process sent" in g.detail, g.detail
    assert "\n" not in g.detail
    assert grade(kernel(tmp_path, "next.py", HONEST), calibration).verdict == "ok"


def test_grade_writes_its_json_whatever_a_submission_sends(capsys, tmp_path):
    """The whole command: a forger beside an honest file; both graded, the JSON written."""
    a = kernel(tmp_path, "a_forger.py", """
        import socket, sys, torch.nn.functional as F
        s = socket.socket(fileno=int(sys.argv[1]))
        def conv_forward(x, k):
            s.send(b'{"status": "ok", "op_s": {"nested": 1}}')
            return F.conv2d(x, k)
    """)
    b = kernel(tmp_path, "b_honest.py", HONEST)
    out_json = tmp_path / "g.json"
    rc, out, err = cli(capsys, "grade", a, b, "--device", "cpu", "--sizes", "100", "--shapes", "2", "--json", out_json)
    assert rc == 1 and "Traceback" not in err, err
    verdicts = {Path(g["path"]).name: g["verdict"] for g in json.loads(out_json.read_text())["grades"]}
    assert verdicts == {"a_forger.py": "crash", "b_honest.py": "ok"}


COUNTING = """
    import time, torch
    sums = []
    def conv_forward(x, k):
        if not sums:
            time.sleep(0.5)  # the first call is slow (a compile, a clock coming up): the warm-up's, never timed
        sums.append(float(x.sum()))
        warm_saw_random = all(s > 0 for s in sums[:-1])
        value = float(10 * len(sums) + warm_saw_random + 2 * (sums[-1] == 0))
        return torch.full((x.shape[0], k.shape[0], x.shape[2] - k.shape[2] + 1, x.shape[3] - k.shape[3] + 1), value)
"""


@pytest.mark.parametrize("op", ["call", "layer"])
def test_the_warm_up_calls_come_first_on_random_values_and_off_the_clock(tmp_path, op):
    """run_timed(warm_s=0.3): the child calls the file before "ready" for 0.3 s (here once: its first call takes
    0.5 s), on random values in place of the input (nothing computed then can answer the timed call), and the timed
    call gets the input itself (zeros, still zeros once scaled): its output is the second call's, and the first
    call's half second is not in the window. Without warm_s the timed call is the file's next. The same for a
    layer (host to host; its warm-up layers on random values too)."""
    from convbench.user.base import BuildOptions
    from convbench.user.worker import Worker

    worker = Worker("python", kernel(tmp_path, "counting.py", COUNTING), BuildOptions())
    worker.quiet = True
    try:
        seeds = (7, 8) if op == "call" else (None, None)
        run = worker.run_timed(op, torch.zeros(3, 1, 9, 9), torch.ones(2, 1, 3, 3), "cpu", seed=seeds[0], warm_s=0.3)
        assert torch.equal(run.y, torch.full((3, 2, 7, 7), 23.0)), run.y.unique()
        assert run.window_s < 0.25, run.window_s
        cold = worker.run_timed(op, torch.zeros(3, 1, 9, 9), torch.ones(2, 1, 3, 3), "cpu", seed=seeds[1])
        assert torch.equal(cold.y, torch.full((3, 2, 7, 7), 32.0)), cold.y.unique()  # the third call, no warm-up
    finally:
        worker.remove()
