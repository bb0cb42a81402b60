# SPDX-License-Identifier: BSD-2-Clause
"""Atomics, vectored transfers, cancel and read-only descriptors against
real daemons."""

import asyncio
import struct

import pytest

import rma


@pytest.fixture
def link(two):
    """A client on A with a region, the region of a client on B, and the
    remote of that region imported on A: (c, region, remote, cb, rb)."""
    a, b = two
    cb = rma.Client(b.socket)
    rb = cb.alloc(1 << 20)
    c = rma.Client(a.socket)
    r = c.alloc(1 << 20)
    remote = c.import_remote(c.peer(b.listen), rb.descriptor())
    yield c, r, remote, cb, rb
    c.close()
    cb.close()


def word(region, off, width=64):
    with memoryview(region) as mv:
        return struct.unpack_from("<Q" if width == 64 else "<I", mv, off)[0]


def test_concurrent_fetch_add_counter_is_exact(link):
    c, _, remote, _, rb = link
    n = 2000

    async def main():
        olds = await asyncio.gather(
            *[c.atomic(remote, 64, "fetch-add", 1) for _ in range(n)])
        return olds

    olds = asyncio.run(main())
    # every old value is distinct: each add saw all the earlier ones
    assert sorted(olds) == list(range(n))
    assert word(rb, 64) == n


def test_atomic_ops_and_value(link):
    c, _, remote, _, rb = link
    req = c.atomic(remote, 0, "swap", 0xF0F0)
    req.wait(10)
    assert req.value == 0 and word(rb, 0) == 0xF0F0
    req = c.atomic(remote, 0, "and", 0xFF)
    req.wait(10)
    assert req.value == 0xF0F0 and word(rb, 0) == 0xF0
    req = c.atomic(remote, 0, "fetch_or", 0x0F)
    req.wait(10)
    assert req.value == 0xF0 and word(rb, 0) == 0xFF
    req = c.atomic(remote, 0, "xor", 0xFF)
    req.wait(10)
    assert word(rb, 0) == 0
    req = c.atomic(remote, 0, "add", -1)  # wraps to the word
    req.wait(10)
    assert req.value == 0 and word(rb, 0) == (1 << 64) - 1
    # width 32 touches 4 bytes only
    req = c.atomic(remote, 16, "add", 5, width=32)
    req.wait(10)
    assert req.value == 0 and word(rb, 16, 32) == 5 and word(rb, 20, 32) == 0
    # a put's value is None
    p = c.put(c.alloc(8), 0, remote, 100, 8)
    p.wait(10)
    assert p.value is None


def test_cswap(link):
    c, _, remote, _, rb = link

    async def main():
        assert await c.atomic(remote, 8, "cswap", 7, compare=0) == 0
        assert word(rb, 8) == 7
        # compare fails: old value returned, word unchanged
        assert await c.atomic(remote, 8, "cswap", 9, compare=1) == 7
        assert word(rb, 8) == 7
        assert await c.atomic(remote, 8, "cswap", 9, compare=7) == 7
        assert word(rb, 8) == 9

    asyncio.run(main())
    with pytest.raises(rma.InvalidArgument):
        c.atomic(remote, 8, "cswap", 1)  # no compare
    with pytest.raises(rma.InvalidArgument):
        c.atomic(remote, 8, "frobnicate", 1)
    with pytest.raises(rma.InvalidArgument):
        c.atomic(remote, 8, "add", 1, width=16)


def test_atomic_misaligned_and_out_of_bounds(link):
    c, _, remote, _, rb = link
    calls = []
    req = c.atomic(remote, 4, "add", 1,
                   callback=lambda r, st, ud: calls.append((st, ud)),
                   user_data="u")
    # completed at once by librma, callback run, nothing touched
    assert req.done() and calls == [(rma.ERR_INVALID, "u")]
    with pytest.raises(rma.InvalidArgument):
        req.wait(1)
    with pytest.raises(rma.InvalidArgument):
        asyncio.run(_await(c.atomic(remote, 12, "add", 1, width=64)))
    assert word(rb, 0) == 0 and word(rb, 8) == 0
    with pytest.raises(rma.OutOfBounds):
        c.atomic(remote, len(rb), "add", 1).wait(10)


async def _await(req):
    return await req


def test_read_only_descriptor(two):
    a, b = two
    with rma.Client(b.socket) as cb, rma.Client(a.socket) as c:
        rb = cb.alloc(4096)
        ro = rb.read_only_descriptor()
        assert ro.startswith("rmar:") and ro != rb.descriptor()
        with memoryview(rb) as mb:
            mb[:4] = b"abcd"
        remote = c.import_remote(c.peer(b.listen), ro)
        r = c.alloc(4096)
        with memoryview(r) as mv:
            mv[:4] = b"wxyz"
        with pytest.raises(rma.Permission):
            c.put(r, 0, remote, 0, 4).wait(10)
        with pytest.raises(rma.Permission):
            c.atomic(remote, 0, "add", 1).wait(10)
        with memoryview(rb) as mb:
            assert mb[:4] == b"abcd"  # nothing written
        c.get(r, 8, remote, 0, 4).wait(10)  # gets are allowed
        with memoryview(r) as mv:
            assert mv[8:12] == b"abcd"
        rb.free()
        with pytest.raises(rma.NoRegion):
            rb.read_only_descriptor()


def test_putv_getv_round_trip(link):
    c, r, remote, _, rb = link
    pieces = [(0, 1000, 3), (10, 5000, 9000), (20000, 15000, 8193),
              (40000, 70000, 1)]
    with memoryview(r) as mv:
        for i, (o, _, n) in enumerate(pieces):
            mv[o:o + n] = bytes((i * 37 + k) & 0xFF for k in range(n))
    req = c.putv(r, remote, pieces)
    req.wait(10)
    assert req.bytes == sum(p[2] for p in pieces)
    with memoryview(r) as mv, memoryview(rb) as mb:
        for o, ro, n in pieces:
            assert mb[ro:ro + n] == mv[o:o + n]
    # back into other local offsets, awaited
    back = [(200000 + o, ro, n) for o, ro, n in pieces]

    async def main():
        return await c.getv(r, remote, back)

    assert asyncio.run(main()) is None
    with memoryview(r) as mv:
        for (o, _, n), (bo, _, _) in zip(pieces, back):
            assert mv[bo:bo + n] == mv[o:o + n]
    with pytest.raises(rma.OutOfBounds):
        c.putv(r, remote, [(0, 0, 8), (0, len(rb), 8)]).wait(10)
    with pytest.raises(rma.InvalidArgument):
        c.putv(r, remote, [])
    with pytest.raises(TypeError):
        c.getv(r, remote, [(0, 0)])


def test_cancel_unsent(link):
    c, r, remote, _, rb = link
    with memoryview(r) as mv:
        mv[:16] = b"A" * 8 + b"B" * 8
    first = c.put(r, 0, remote, 0, 8)  # sent at once: nothing in flight
    seen = []
    second = c.put(r, 8, remote, 8, 8,
                   lambda req, st, ud: seen.append(st))  # batched
    assert second.cancel() is True
    assert second.done() and seen == [rma.ERR_CANCELED]
    with pytest.raises(rma.Canceled):
        second.wait(1)
    first.wait(10)
    assert first.cancel() is False  # completed already
    c.flush().wait(10)
    with memoryview(rb) as mb:
        assert mb[:8] == b"A" * 8 and mb[8:16] == bytes(8)

    async def main():
        c.put(r, 0, remote, 0, 8)
        req = c.put(r, 8, remote, 8, 8)
        fut = req.future()
        assert req.cancel() is True
        with pytest.raises(rma.Canceled):
            await fut

    asyncio.run(main())


def test_await_waiter_paths(two):
    """The awaits behind the fast path: a failure that arrives later, a
    Task cancelled while it waits, two awaits of one request, gather and
    wait_for on requests directly, an atomic's value through each."""
    a, b = two
    with rma.Client(b.socket) as cb, rma.Client(a.socket) as c:
        rb = cb.alloc(4096)
        peer = c.peer(b.listen)
        remote = c.import_remote(peer, rb.descriptor())
        ro = c.import_remote(peer, rb.read_only_descriptor())
        r = c.alloc(4096)

        async def main():
            # sent, refused by the owner later: raised through the waiter
            req = c.put(r, 0, ro, 0, 8)
            assert not req.done()
            with pytest.raises(rma.Permission):
                await req
            # a Task cancelled while it waits; the operation still
            # completes, its result seen through wait() and future()
            req = c.atomic(remote, 0, "fetch-add", 5)

            async def waiter():
                return await req

            t = asyncio.ensure_future(waiter())
            await asyncio.sleep(0)  # t now waits on the request
            assert t.cancel()
            with pytest.raises(asyncio.CancelledError):
                await t
            assert await req.future() == 0 and req.value == 0
            # two Tasks awaiting one request
            req = c.atomic(remote, 0, "fetch-add", 1)

            async def aw():
                return await req

            assert await asyncio.gather(aw(), aw()) == [5, 5]
            # gather / wait_for on requests themselves
            olds = await asyncio.gather(
                *[c.atomic(remote, 0, "add", 1) for _ in range(3)])
            assert sorted(olds) == [6, 7, 8]
            assert await asyncio.wait_for(
                c.atomic(remote, 0, "add", 0), 10) == 9

        asyncio.run(main())
        assert word(rb, 0) == 9


def test_awaits_completed_by_another_thread(link):
    """Completions read by a thread's wait() reach the loop's waiting
    Tasks through call_soon_threadsafe, with their values."""
    c, _, remote, _, rb = link

    async def main():
        loop = asyncio.get_running_loop()
        reqs = [c.atomic(remote, 200, "fetch-add", 1) for _ in range(500)]
        waits = [asyncio.ensure_future(_await(q)) for q in reqs]
        await asyncio.sleep(0)  # every Task waits on its request now
        # the executor's thread makes progress (and reads completions)
        # while this loop is parked in the executor's future
        await loop.run_in_executor(None, lambda: c.flush().wait(10))
        return await asyncio.wait_for(asyncio.gather(*waits), 10)

    assert sorted(asyncio.run(main())) == list(range(500))
    assert word(rb, 200) == 500
