# SPDX-License-Identifier: BSD-2-Clause
"""Real rmad daemons for the tests, started as tests/harness.c does: a
fresh socket path, a free loopback port, --ready-fd with a deadline;
stopped with SIGTERM (SIGKILL after a deadline) and reaped."""

import os
import select
import signal
import socket
import subprocess
import tempfile
import time

import pytest

READY_SECONDS = 10.0
STOP_SECONDS = 10.0


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    """One rmad process: .socket, .listen ("127.0.0.1:PORT"), .proc."""

    _serial = 0

    def __init__(self, tmpdir, extra=(), socket=None):
        Daemon._serial += 1
        self.socket = socket or os.path.join(
            tmpdir, "rmad-%d-%d.sock" % (os.getpid(), Daemon._serial))
        self.extra = list(extra)
        self.proc = None
        for _ in range(3):  # a free port may be taken before rmad binds it
            self.listen = "127.0.0.1:%d" % free_port()
            if self._spawn():
                return
        raise RuntimeError("rmad did not become ready within %.0f s" %
                           READY_SECONDS)

    def _spawn(self):
        rfd, wfd = os.pipe()
        argv = [os.environ["RMAD_BIN"], "--socket", self.socket,
                "--listen", self.listen, "--ready-fd", str(wfd),
                "--log-level", os.environ.get("RMAD_LOG_LEVEL", "warn")]
        self.proc = subprocess.Popen(argv + self.extra, pass_fds=(wfd,))
        os.close(wfd)
        try:
            ready = (select.select([rfd], [], [], READY_SECONDS)[0] and
                     os.read(rfd, 16))
        finally:
            os.close(rfd)
        if not ready:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        return bool(ready)

    def kill(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def stop(self):
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


@pytest.fixture
def tmpdir_short():
    # Unix socket paths are short: pytest's tmp_path may be too long.
    with tempfile.TemporaryDirectory(prefix="rmapy-") as d:
        yield d


@pytest.fixture
def daemons(tmpdir_short):
    """A factory: daemons() -> Daemon; all are stopped after the test."""
    started = []

    def start(extra=(), socket=None):
        d = Daemon(tmpdir_short, extra, socket)
        started.append(d)
        return d

    yield start
    for d in started:
        d.stop()


@pytest.fixture
def two(daemons):
    """Two daemons, A (local) and B (the other host)."""
    return daemons(), daemons()


def deadline_loop(pred, seconds, step=None):
    """Calls pred() until it is true or seconds passed; returns its value.
    step() runs between calls (it must block on something real)."""
    end = time.monotonic() + seconds
    while True:
        v = pred()
        if v or time.monotonic() >= end:
            return v
        if step is not None:
            step()
