# SPDX-License-Identifier: BSD-2-Clause
"""Take-overs and crashes (SIGKILL, restarted with systemd's fd store by
tests/service/fdstore_sink) of either daemon under an asyncio program
that does nothing about them: its awaits and its `async for` over notifications() carry on
(the client's fd is the same open file across re-attaches, so the loop's
reader stays registered); a loop closed with requests pending sends
nothing to sys.unraisablehook. Decided on counts and order; every wait
has a deadline."""

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

import rma
from conftest import deadline_loop, free_port

TAKE_OVERS = 8
WAIT = 10.0
# what a put caught by a take-over of either daemon may end with, none of
# which wrote a notification that will not come: retry it
RETRY = (rma.ERR_RESTARTED, rma.ERR_SHUTDOWN, rma.ERR_NO_REGION,
         rma.ERR_CONNECTION_RESET, rma.ERR_UNREACHABLE, rma.ERR_NO_PEER,
         rma.ERR_TIMEOUT)


def take_over(d):
    """rmad --take-over on d's socket and address; returns once the old
    process exited cleanly (its close is in its clients' sockets)."""
    old = d.proc
    if "--take-over" not in d.extra:
        d.extra.append("--take-over")
    assert d._spawn(), "the successor did not become ready"
    assert old.wait(WAIT) == 0, "the old rmad did not exit cleanly"


class Sink:
    """rmad under fdstore_sink, which keeps systemd's fd store and
    restarts it as Restart= does: .socket, .listen, crash()."""

    def __init__(self, tmpdir, serial):
        self.dir = os.path.join(tmpdir, "sink%d" % serial)
        os.mkdir(self.dir, 0o700)
        self.log = os.path.join(self.dir, "sink.log")
        self.socket = os.path.join(self.dir, "rmad.sock")
        self.listen = "127.0.0.1:%d" % free_port()
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                [os.environ["FDSTORE_SINK"], "-m", "64", "-t", "300", "-l",
                 "", os.path.join(self.dir, "notify"), "--",
                 os.environ["RMAD_BIN"], "--socket", self.socket,
                 "--listen", self.listen, "--log-level", "warn",
                 "--connect-timeout", "2"], stdout=out)
        self.wait_ready(1)

    def lines(self, prefix):
        with open(self.log) as f:
            return [ln[len(prefix):].strip() for ln in f
                    if ln.startswith(prefix)]

    def wait_ready(self, n):
        # the sink writes its log on its own time: read it until then
        assert deadline_loop(lambda: len(self.lines("READY=1")) >= n,
                             2 * WAIT, lambda: time.sleep(0.005)), \
            "rmad start %d under the sink did not say READY=1" % n

    def crash(self):
        """SIGKILL the rmad serving now; returns once its successor is
        ready (its clients have not noticed yet)."""
        n = len(self.lines("READY=1"))
        os.kill(int(self.lines("started ")[-1]), signal.SIGKILL)
        self.wait_ready(n + 1)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)  # systemctl stop
        try:
            self.proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def two_restartable(request, daemons, tmpdir_short):
    """(a, b, restart): two daemons and how either goes away and comes
    back with its identity: rmad --take-over, or a crash under the fd
    store."""
    if request.param == "take-over":
        return daemons(), daemons(), take_over
    if not os.environ.get("FDSTORE_SINK"):
        pytest.skip("FDSTORE_SINK (tests/service/fdstore_sink) not set")
    sinks = [Sink(tmpdir_short, i) for i in range(2)]
    for s in sinks:
        request.addfinalizer(s.stop)
    return sinks[0], sinks[1], Sink.crash


async def until(pred, what):
    """Lets the loop run until pred() holds, WAIT seconds at most."""
    end = asyncio.get_running_loop().time() + WAIT
    while not pred():
        assert asyncio.get_running_loop().time() < end, "no " + what
        await asyncio.sleep(0.005)


@pytest.mark.parametrize("two_restartable", ["take-over", "crash"],
                         indirect=True)
def test_awaits_and_notifications_across_restarts(two_restartable):
    a, b, restart = two_restartable
    owner = rma.Client(b.socket)
    rb = owner.alloc(1 << 16)
    c = rma.Client(a.socket)
    r = c.alloc(1 << 16)
    remote = c.import_remote(c.peer(b.listen), rb.descriptor())
    retried = []

    async def put(value):
        end = asyncio.get_running_loop().time() + WAIT
        while asyncio.get_running_loop().time() < end:
            try:
                await asyncio.wait_for(
                    c.put(r, 0, remote, 0, 8, notify=value), WAIT)
                return
            except rma.Error as e:
                assert e.status in RETRY, e
                retried.append(e.status)
                # the owner away (NO_REGION) comes back once its loop
                # reader re-attached it: let the loop run
                await asyncio.sleep(0.005)
        raise AssertionError("no put of %d went through in %.0f s" %
                             (value, WAIT))

    async def main():
        loop = asyncio.get_running_loop()
        seen = []

        async def consume():
            async for n in owner.notifications():
                seen.append(n.value)

        task = asyncio.ensure_future(consume())
        # the first await registers c with the loop, consume() the owner
        value = 0
        await put(value)
        await until(lambda: value in seen, "notification 0")
        for i in range(1, TAKE_OVERS + 1):
            for d, client in ((a, c), (b, owner)):
                await loop.run_in_executor(None, restart, d)
                # the old connection's end woke the loop's reader, which
                # re-attached it: nobody else did
                await until(lambda: client.reattaches == i,
                            "re-attach %d of %s" % (i, d.socket))
                value += 1
                await put(value)
                await until(lambda: value in seen,
                            "notification %d after restart %d of %s" %
                            (value, i, d.socket))
        task.cancel()
        return seen

    seen = asyncio.run(main())
    assert c.reattaches == TAKE_OVERS
    assert owner.reattaches == TAKE_OVERS
    # in order; a put retried after it was applied may notify twice
    assert seen == sorted(seen)
    assert sorted(set(seen)) == list(range(2 * TAKE_OVERS + 1))
    c.close()
    owner.close()


def test_loop_closed_with_requests_pending(two, monkeypatch):
    a, b = two
    hooked = []
    monkeypatch.setattr(sys, "unraisablehook", hooked.append)
    owner = rma.Client(b.socket)
    rb = owner.alloc(1 << 16)
    c = rma.Client(a.socket)
    r = c.alloc(1 << 16)
    remote = c.import_remote(c.peer(b.listen), rb.descriptor())
    # nothing completes while the loop runs
    os.kill(b.proc.pid, signal.SIGSTOP)
    loop = asyncio.new_event_loop()
    try:
        async def start():
            reqs = [c.put(r, 0, remote, 0, 8) for _ in range(40)]

            async def wait(q):
                await q

            # awaited by tasks (Waiters), and through futures
            for q in reqs[:20]:
                loop.create_task(wait(q))
            for q in reqs[20:]:
                asyncio.ensure_future(q.future())
            await asyncio.sleep(0)
            return reqs

        reqs = loop.run_until_complete(start())
    finally:
        loop.close()
        os.kill(b.proc.pid, signal.SIGCONT)
    for q in reqs:
        q.wait(WAIT)
    assert all(q.done() for q in reqs)
    c.close()
    owner.close()
    assert hooked == [], [repr(u.exc_value) for u in hooked]
