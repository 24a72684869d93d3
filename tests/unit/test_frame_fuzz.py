"""The Cython core's frame-parsing entry points fuzzed with hypothesis (tests/support/frame_fuzz.py)
in a child process, so that a crash is a failing exit status, not a dead test runner: a few
seconds in the fast loop, 45 s under `slow` (every target for rounds of hypothesis' examples,
from a new seed each run), and as long as $AERONIO_FUZZ_SECONDS says for a long hunt."""

from __future__ import annotations

import json
import os
import random
import subprocess

import pytest

from tests.support.child import child_env
from tests.support.procs import ROOT, module_argv

SLOW_SECONDS = float(os.environ.get("AERONIO_FUZZ_SECONDS", 45))


def fuzz(seconds: float) -> dict:
    """Run the fuzzer for `seconds` from a random seed; its figures."""
    seed = random.randrange(1 << 30)
    done = subprocess.run(
        [*module_argv("tests.support.frame_fuzz"), str(seconds), str(seed)],
        capture_output=True,
        text=True,
        timeout=seconds * 4 + 300,
        env=child_env(),
        cwd=ROOT,
    )
    assert done.returncode == 0, (
        f"the fuzzer (seed {seed}) exited with status {done.returncode}; the target it ran last "
        f"and its output:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    )
    figures = json.loads(done.stdout.splitlines()[-1])
    print(f"seed {seed}: {figures}")
    assert figures["failures"] == 0 and figures["calls"] > 0
    return figures


def test_fuzz_the_frame_parsers_briefly():
    fuzz(3)


@pytest.mark.slow
def test_fuzz_the_frame_parsers_for_longer():
    assert fuzz(SLOW_SECONDS)["seconds"] >= SLOW_SECONDS
