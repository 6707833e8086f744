"""The harness's events between a test and its child processes (headwatch_testing.sync): a signal
arrives once per set, a gate wakes every child at once, and a wait that cannot end says so (a
deadline, or a child that died first) instead of hanging."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

from headwatch_testing.sync import Gate, Signal

CHILD = textwrap.dedent("""
    import sys
    from headwatch_testing.sync import Gate, Signal
    ready, go, done = Signal.from_arg(sys.argv[1]), Gate.from_arg(sys.argv[2]), Signal.from_arg(sys.argv[3])
    ready.set()
    go.wait(60)
    done.set()
""")


def test_a_signal_counts_its_sets_and_a_wait_that_cannot_end_fails():
    signal = Signal()
    try:
        threading.Thread(target=lambda: [signal.set() for _ in range(3)]).start()
        signal.wait(3, timeout=10)
        with pytest.raises(AssertionError, match="0 of 1 signal"):
            signal.wait(1, timeout=0.05)
    finally:
        signal.close()


def test_a_closed_gate_holds_and_an_open_one_lets_through():
    gate = Gate()
    try:
        with pytest.raises(AssertionError, match="did not open"):
            gate.wait(0.05)
        gate.open()
        gate.wait(1)
    finally:
        gate.close()


@pytest.mark.slow
def test_children_wait_at_the_gate_until_it_opens_and_a_dead_child_is_named():
    ready, go, done = Signal(), Gate(), Signal()
    fds = (*ready.fds, *go.fds, *done.fds)
    children = [subprocess.Popen([sys.executable, "-c", CHILD, ready.arg, go.arg, done.arg], pass_fds=fds)
                for _ in range(3)]
    try:
        ready.wait(3, procs=children)
        with pytest.raises(AssertionError):
            done.wait(1, timeout=0.3)  # nobody passes a closed gate
        go.open()
        done.wait(3, procs=children)
        assert [c.wait(60) for c in children] == [0, 0, 0]
        dying = subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"])
        with pytest.raises(AssertionError, match="ended before it signalled"):
            ready.wait(1, timeout=60, procs=[dying])
    finally:
        for c in children:
            c.kill()
        for event in (ready, go, done):
            event.close()
