"""The agreement rule between a submission's own timer and convbench's clock (measure/trusted_time.py), on made-up
windows: what an honest report on a noisy machine gets, what a report below the margin gets, how far the clock's
measured noise may widen the margin. And the grader's own OpenMP threads (cli/main.quiet_openmp)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from convbench.measure.trusted_time import MARGINS, NOISE_CAP, LayerTiming

US = 1e-6


def timing(windows_us, reported_us, cost_us=300.0, noise_us=0.0) -> LayerTiming:
    return LayerTiming("conv1", windows=[w * US for w in windows_us], cost=cost_us * US, noise=noise_us * US,
                       reported=[None if r is None else r * US for r in reported_us])


def test_an_honest_timer_agrees_against_the_least_of_noisy_windows():
    """A 100 µs kernel, the round trip late by up to 2 ms on two of three calls: the least window decides, the
    report counts on every call."""
    t = timing([300 + 105, 300 + 2100, 300 + 900], [100, 101, 99])
    times, problems = t.accepted("cuda")
    assert problems == []
    assert times == pytest.approx([100 * US, 101 * US, 99 * US])
    assert t.op_time("cuda") == pytest.approx(100 * US)


def test_a_report_below_the_margin_is_replaced_and_flagged():
    """A 3 ms kernel that says 1 ms: convbench's times count, and the layer is flagged, naming the margin."""
    t = timing([3300, 3310, 3305], [1000, 1000, 1000])
    times, problems = t.accepted("cuda")
    assert times == pytest.approx([3000 * US, 3010 * US, 3005 * US])
    rel, absolute = MARGINS["cuda"]
    assert len(problems) == 1 and "disagreed" in problems[0]
    assert f"within {rel:.0%} + {absolute / US:.0f} µs" in problems[0]


def test_a_report_longer_than_its_window_does_not_count():
    """A time longer than the whole round trip cannot be the call's own."""
    t = timing([4000, 4000, 4000], [50000, 50000, 50000])
    assert t.accepted("cuda")[1], "a report longer than the window was believed"


def test_the_margin_is_at_least_the_clock_noise_and_at_most_its_cap():
    rel, absolute = MARGINS["cuda"]
    noisy = absolute + 300 * US
    assert timing([400], [100]).margin("cuda") == (rel, absolute)
    assert timing([400], [100], noise_us=noisy / US).margin("cuda") == pytest.approx((rel, noisy))
    assert timing([400], [100], noise_us=1e6).margin("cuda") == (rel, NOISE_CAP["cuda"])
    # true work of `work` said to be 150 µs less than the default margin allows: refused, believed within the noise
    work = 5000 * US
    said = work * (1 - rel) - absolute - 150 * US
    assert timing([300 + work / US] * 3, [said / US] * 3).accepted("cuda")[1]
    assert not timing([300 + work / US] * 3, [said / US] * 3, noise_us=noisy / US).accepted("cuda")[1]


def test_a_missing_report_counts_convbench_time():
    t = timing([500, 520, 510], [None, None, None])
    times, problems = t.accepted("cuda")
    assert times == pytest.approx([200 * US, 220 * US, 210 * US]) and problems
    assert "nothing" in problems[0]


GRADER_PROBE = """
import os, sys
from convbench.cli import main
main.quiet_openmp()
from convbench.user import sandbox
print(os.environ.get("OMP_WAIT_POLICY"), sandbox.environment({}).get("OMP_WAIT_POLICY"))
"""


@pytest.mark.parametrize("user_setting, grader, child", [
    (None, "PASSIVE", None),  # the grader's threads sleep; the submission keeps OpenMP's default
    ("ACTIVE", "ACTIVE", "ACTIVE"),  # a setting of the user's is left alone, in both
])
def test_a_grader_quiets_its_own_openmp_threads_only(user_setting, grader, child):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "CONVBENCH_GRADER_SET_OMP_WAIT_POLICY")}
    if user_setting:
        env["OMP_WAIT_POLICY"] = user_setting
    out = subprocess.run([sys.executable, "-c", GRADER_PROBE], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(grader), str(child)]
