# SPDX-License-Identifier: BSD-2-Clause
"""Notifying puts (put(..., notify=value)) and their delivery to the
region's owner: on_notification() and notifications(), real daemons."""

import asyncio
import select
import sys

import pytest

import rma
from conftest import deadline_loop


@pytest.fixture
def link(two):
    """A client on A whose remote is a region of an owner client on B:
    (c, region, remote, owner, owner_region)."""
    a, b = two
    owner = rma.Client(b.socket)
    rb = owner.alloc(1 << 16)
    c = rma.Client(a.socket)
    r = c.alloc(1 << 16)
    remote = c.import_remote(c.peer(b.listen), rb.descriptor())
    yield c, r, remote, owner, rb
    c.close()
    owner.close()


def wait_readable(client):
    """A step for deadline_loop: block on the client's fd (0.2 s at most),
    then make progress."""
    select.select([client.fileno()], [], [], 0.2)
    client.progress()


def test_notifying_put_arrives_after_its_bytes(link):
    c, r, remote, owner, rb = link
    data = bytes(range(200, 255)) * 3
    memoryview(r)[100:100 + len(data)] = data

    async def main():
        it = owner.notifications()
        req = c.put(r, 100, remote, 4000, len(data), notify=0xDEADBEEF12)
        n = await asyncio.wait_for(it.__anext__(), 10)
        # the bytes are there by the time the notification is
        assert bytes(memoryview(rb)[4000:4000 + len(data)]) == data
        await asyncio.wait_for(req, 10)
        return n

    n = asyncio.run(main())
    assert isinstance(n, rma.Notification)
    assert n.region is rb
    assert (n.offset, n.length, n.value) == (4000, len(data), 0xDEADBEEF12)
    assert n.sender == c.daemon_id
    # a plain put does not notify
    c.put(r, 0, remote, 0, 8).wait(10)
    owner.progress()
    assert owner._notify_next() is None


def test_iterator_yields_1000_in_order(link):
    c, r, remote, owner, rb = link
    count = 1000

    async def main():
        got = []

        async def consume():
            async for n in owner.notifications():
                got.append(n)
                if len(got) == count:
                    return

        task = asyncio.ensure_future(consume())
        reqs = [c.put(r, i % 64, remote, i % 64, 1, notify=i)
                for i in range(count)]
        for q in reqs:
            await asyncio.wait_for(q, 10)
        await asyncio.wait_for(task, 20)
        return got

    got = asyncio.run(main())
    assert [n.value for n in got] == list(range(count))
    assert all(n.offset == i % 64 and n.length == 1
               for i, n in enumerate(got))


def test_raising_callback_is_reported_not_lost(link, monkeypatch):
    c, r, remote, owner, rb = link
    hooked, seen = [], []
    monkeypatch.setattr(sys, "unraisablehook", hooked.append)

    def on_n(n):
        seen.append(n.value)
        if n.value == 1:
            raise RuntimeError("boom in notification callback")

    owner.on_notification(on_n)
    for v in (1, 2):
        c.put(r, 0, remote, 0, 8, notify=v).wait(10)
    assert deadline_loop(lambda: len(seen) == 2, 10,
                         lambda: wait_readable(owner))
    assert seen == [1, 2]
    assert len(hooked) == 1
    assert isinstance(hooked[0].exc_value, RuntimeError)
    assert "boom" in str(hooked[0].exc_value)


def test_raising_callback_goes_to_loop_handler(link):
    c, r, remote, owner, rb = link
    seen = []

    def on_n(n):
        seen.append(n.value)
        raise ValueError("async boom")

    async def main():
        loop = asyncio.get_running_loop()
        handled = loop.create_future()
        loop.set_exception_handler(
            lambda lp, ctx: handled.done() or handled.set_result(ctx))
        owner.on_notification(on_n)
        # the owner's fd joins the loop when something of it is awaited:
        # here a pending notifications() step (the callback takes them
        # all, so it stays pending)
        it = owner.notifications()
        waiter = asyncio.ensure_future(it.__anext__())
        await asyncio.sleep(0)
        await asyncio.wait_for(c.put(r, 0, remote, 0, 8, notify=9), 10)
        ctx = await asyncio.wait_for(handled, 10)
        waiter.cancel()
        return ctx

    ctx = asyncio.run(main())
    assert seen == [9]
    assert isinstance(ctx["exception"], ValueError)
    assert ctx["notification"].value == 9


def test_cancelled_await_loses_nothing(link):
    c, r, remote, owner, rb = link

    async def main():
        first = asyncio.ensure_future(owner.notifications().__anext__())
        await asyncio.sleep(0)
        first.cancel()
        await c.put(r, 0, remote, 0, 8, notify=5)
        return await asyncio.wait_for(owner.notifications().__anext__(), 10)

    assert asyncio.run(main()).value == 5


def test_close_ends_iteration(link):
    c, r, remote, owner, rb = link

    async def main():
        got = []

        async def consume():
            async for n in owner.notifications():
                got.append(n)

        task = asyncio.ensure_future(consume())
        await asyncio.wait_for(c.put(r, 0, remote, 0, 8, notify=1), 10)
        await asyncio.wait_for(c.put(r, 0, remote, 0, 8, notify=2), 10)
        for _ in range(100):
            if len(got) == 2:
                break
            await asyncio.sleep(0.01)
        owner.close()
        await asyncio.wait_for(task, 10)
        return [n.value for n in got]

    assert asyncio.run(main()) == [1, 2]


def test_daemon_gone_fails_iteration(two):
    a, b = two
    owner = rma.Client(b.socket)
    owner.alloc(4096)

    async def main():
        it = owner.notifications()
        step = asyncio.ensure_future(it.__anext__())
        await asyncio.sleep(0)
        b.kill()
        with pytest.raises(rma.DaemonGone):
            await asyncio.wait_for(step, 10)

    asyncio.run(main())
    owner.close()
