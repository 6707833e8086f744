"""Events between a test and the processes it starts: an os.pipe each, never a sleep.

A test that races processes (two writers of one cache entry, a run killed mid-measurement) must
know that each child has reached the point the test is about, not guess it with a sleep long
enough on a quiet machine. :class:`Signal` carries "I am here" from children to whoever waits (one
byte per ``set``); :class:`Gate` holds any number of children until the test opens it (closing the
pipe's write end wakes every reader at once). Both pass to a child as file descriptors
(``subprocess.Popen(..., pass_fds=signal.fds)``) and a short argument (``signal.arg``), from which the
child rebuilds them (``Signal.from_arg``). Every wait is bounded; a child that dies first is named.
Processes a test does not start itself (Ray or Slurm workers, daemons) cannot inherit a descriptor,
and a library's own work in a child (huggingface_hub writing a download) signals nothing: those tests
watch what the workers write, with a deadline.
"""
from __future__ import annotations

import os
import select
import subprocess
import time
from collections.abc import Iterable


class Signal:
    """Children ``set()`` it, once each time they reach a point; the test (or another child) waits
    for as many sets as it needs."""

    def __init__(self, read_fd: int | None = None, write_fd: int | None = None):
        if read_fd is None or write_fd is None:
            read_fd, write_fd = os.pipe()
        self.read_fd, self.write_fd = read_fd, write_fd

    @property
    def fds(self) -> tuple[int, int]:
        """What a child needs (``Popen(pass_fds=...)``): it may both set and wait."""
        return self.read_fd, self.write_fd

    @property
    def arg(self) -> str:
        return f"{self.read_fd},{self.write_fd}"

    @classmethod
    def from_arg(cls, arg: str) -> "Signal":
        read_fd, write_fd = (int(x) for x in arg.split(","))
        return cls(read_fd, write_fd)

    def set(self) -> None:
        os.write(self.write_fd, b"!")

    def wait(self, count: int = 1, timeout: float = 120, procs: Iterable[subprocess.Popen] = ()) -> None:
        """Until ``count`` sets have arrived (each consumed); AssertionError after ``timeout`` seconds
        or when one of ``procs`` ends first."""
        procs = list(procs)
        deadline = time.monotonic() + timeout
        got = 0
        while got < count:
            left = deadline - time.monotonic()
            assert left > 0, f"{got} of {count} signal(s) in {timeout:g} s"
            # a child that died never sets: look at them between short waits on the pipe
            ready, _, _ = select.select([self.read_fd], [], [], min(left, 1.0) if procs else left)
            if ready:
                got += len(os.read(self.read_fd, count - got))
            else:
                dead = [p.args for p in procs if p.poll() is not None]
                assert not dead, f"a child ended before it signalled ({got} of {count}): {dead}"

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


class Gate:
    """Holds children until the test opens it; opening wakes every one of them at once."""

    def __init__(self, read_fd: int | None = None, write_fd: int | None = None):
        if read_fd is None:
            read_fd, write_fd = os.pipe()
        self.read_fd, self.write_fd = read_fd, write_fd

    @property
    def fds(self) -> tuple[int]:
        """Children get the read end only: the gate opens when the test closes the write end."""
        return (self.read_fd,)

    @property
    def arg(self) -> str:
        return str(self.read_fd)

    @classmethod
    def from_arg(cls, arg: str) -> "Gate":
        return cls(int(arg), None)

    def open(self) -> None:
        if self.write_fd is not None:
            os.close(self.write_fd)
            self.write_fd = None

    def wait(self, timeout: float = 120) -> None:
        """Until the gate opens (end of file on the pipe); AssertionError after ``timeout`` seconds."""
        ready, _, _ = select.select([self.read_fd], [], [], timeout)
        assert ready, f"the gate did not open in {timeout:g} s"
        assert os.read(self.read_fd, 1) == b"", "a gate carries no data"

    def close(self) -> None:
        self.open()
        try:
            os.close(self.read_fd)
        except OSError:
            pass
