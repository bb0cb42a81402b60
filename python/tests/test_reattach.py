# SPDX-License-Identifier: BSD-2-Clause
"""Take-overs of either daemon under an asyncio program that does nothing
about them: its awaits and its `async for` over notifications() carry on
(the client's fd is the same open file across re-attaches, so the loop's
reader stays registered); a loop closed with requests pending sends
nothing to sys.unraisablehook. Decided on counts and order; every wait
has a deadline."""

import asyncio
import os
import signal
import sys

import rma

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


async def until(pred, what):
    """Lets the loop run until pred() holds, WAIT seconds at most."""
    end = asyncio.get_running_loop().time() + WAIT
    while not pred():
        assert asyncio.get_running_loop().time() < end, "no " + what
        await asyncio.sleep(0.005)


def test_awaits_and_notifications_across_take_overs(two):
    a, b = two
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
        value = 0
        for i in range(1, TAKE_OVERS + 1):
            for d, client in ((a, c), (b, owner)):
                await loop.run_in_executor(None, take_over, d)
                value += 1
                await put(value)
                await until(lambda: value in seen,
                            "notification %d after take-over %d of %s" %
                            (value, i, d.socket))
                # the loop's reader re-attached it, nobody else did
                await until(lambda: client.reattaches == i,
                            "re-attach %d of %s" % (i, d.socket))
        task.cancel()
        return seen

    seen = asyncio.run(main())
    assert c.reattaches == TAKE_OVERS
    assert owner.reattaches == TAKE_OVERS
    # in order; a put retried after it was applied may notify twice
    assert seen == sorted(seen)
    assert sorted(set(seen)) == list(range(1, 2 * TAKE_OVERS + 1))
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
