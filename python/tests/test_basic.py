# SPDX-License-Identifier: BSD-2-Clause
"""Round trips, callbacks, requests and regions against real daemons."""

import asyncio
import gc
import os
import signal
import weakref

import pytest

import rma

SIZES = [1, 3, 7, 8, 9, 63, 255, 4097, 8191, 8193, 65537, 1 << 20]
OFFSETS = [0, 1, 13, 4095]


@pytest.fixture
def link(two):
    """A client on A with a region, the region of a client on B, and the
    remote of that region imported on A: (c, region, remote, cb, rb)."""
    a, b = two
    cb = rma.Client(b.socket)
    rb = cb.alloc(2 << 20)
    c = rma.Client(a.socket)
    r = c.alloc(2 << 20)
    remote = c.import_remote(c.peer(b.listen), rb.descriptor())
    yield c, r, remote, cb, rb
    c.close()
    cb.close()


def pattern(n, seed):
    return bytes((i * 131 + seed * 7 + (i >> 8)) & 0xFF for i in range(n))


def test_round_trip_sync_odd_sizes(link):
    c, r, remote, _, rb = link
    mv, mb = memoryview(r), memoryview(rb)
    for n in SIZES:
        for off in OFFSETS:
            data = pattern(n, off)
            mv[off:off + n] = data
            c.put(r, off, remote, off + 5, n).wait(10)
            assert mb[off + 5:off + 5 + n] == data
            mv[off:off + n] = bytes(n)
            req = c.get(r, off, remote, off + 5, n)
            req.wait(10)
            assert req.status == rma.OK and req.bytes == n
            assert mv[off:off + n] == data
    mv.release()
    mb.release()


def test_round_trip_async_odd_sizes(link):
    c, r, remote, _, rb = link

    async def main():
        mv = memoryview(r)
        for n in SIZES:
            data = pattern(n, 3)
            mv[1:1 + n] = data
            await c.put(r, 1, remote, 7, n)
            mv[1:1 + n] = bytes(n)
            assert await c.get(r, 1, remote, 7, n) is None
            assert mv[1:1 + n] == data
        await c.flush()
        mv.release()

    asyncio.run(main())


def test_ten_thousand_concurrent_awaits(link):
    c, r, remote, _, rb = link
    mv = memoryview(r)
    mv[:10000] = bytes(i & 0xFF for i in range(10000))

    async def main():
        reqs = [c.put(r, i, remote, i, 1) for i in range(10000)]
        await asyncio.gather(*reqs)
        return reqs

    reqs = asyncio.run(main())
    assert all(q.done() and q.status == rma.OK for q in reqs)
    assert memoryview(rb)[:10000] == mv[:10000]
    mv.release()


def test_callback_exactly_once_with_user_data(link):
    c, r, remote, _, _ = link
    calls = []
    token = object()
    reqs = [c.put(r, 0, remote, i, 8,
                  lambda q, st, ud: calls.append((q, st, ud)), (i, token))
            for i in range(100)]
    bad = c.put(r, 0, remote, (2 << 20) - 4, 8,
                lambda q, st, ud: calls.append((q, st, ud)), "bad")
    for q in reqs:
        q.wait(10)
    with pytest.raises(rma.OutOfBounds):
        bad.wait(10)
    c.flush().wait(10)
    c.progress()
    assert len(calls) == 101
    assert [ud for q, st, ud in calls if st == rma.OK] == \
        [(i, token) for i in range(100)]
    assert [(q, st, ud) for q, st, ud in calls if st != rma.OK] == \
        [(bad, rma.ERR_OUT_OF_BOUNDS, "bad")]
    assert bad.status == rma.ERR_OUT_OF_BOUNDS and "outside" in bad.detail
    assert isinstance(bad.error(), rma.OutOfBounds)


def test_request_outlives_user_reference(two):
    a, b = two
    cb = rma.Client(b.socket)
    rb = cb.alloc(1 << 20)
    c = rma.Client(a.socket)
    r = c.alloc(1 << 20)
    remote = c.import_remote(c.peer(b.listen), rb.descriptor())
    seen = []
    os.kill(b.proc.pid, signal.SIGSTOP)  # the put cannot complete
    try:
        req = c.put(r, 0, remote, 0, 1 << 20,
                    lambda q, st, ud: seen.append(st))
        ref = weakref.ref(req)
        del req
        gc.collect()
        c.progress()
        assert ref() is not None and seen == []  # librma holds it
    finally:
        os.kill(b.proc.pid, signal.SIGCONT)
    c.flush().wait(20)
    gc.collect()
    assert seen == [rma.OK]
    assert ref() is None
    c.close()
    cb.close()


def test_future_on_a_running_loop_only(link):
    c, r, remote, _, _ = link
    req = c.put(r, 0, remote, 0, 8)
    with pytest.raises(RuntimeError):
        req.future()
    req.wait(10)

    async def main():
        fut = req.future()  # completed before: resolved at once
        assert fut is req.future()
        await fut

    asyncio.run(main())


def test_await_twice_and_from_a_new_loop(link):
    c, r, remote, _, _ = link

    async def main():
        q = c.put(r, 0, remote, 0, 8)
        await q
        await q
        await c.put(r, 0, remote, 0, 8)

    asyncio.run(main())
    asyncio.run(main())  # the fd moves to the second loop


def test_region_basics(two):
    a, _ = two
    with rma.Client(a.socket) as c:
        r = c.alloc(4097)
        assert len(r) == 4097
        assert len(memoryview(r)) == 4097
        assert memoryview(r).readonly is False
        assert bytes(memoryview(r)) == bytes(4097)  # zeroed
        d = r.descriptor()
        assert isinstance(d, str) and 0 < len(d) < 100
        assert c.daemon_id and not c.closed
        r.free()
        assert r.freed
        with pytest.raises(rma.NoRegion):
            r.descriptor()
        with pytest.raises(BufferError):
            memoryview(r)
        with pytest.raises(rma.NoRegion):
            r.free()
    assert c.closed and c.daemon_id is None
    with pytest.raises(ValueError):
        c.alloc(10)
    c.close()  # twice is fine


def test_default_socket_resolution(two, monkeypatch):
    a, _ = two
    monkeypatch.setenv("RMAD_SOCKET", a.socket)
    assert rma.default_socket() == a.socket
    with rma.Client() as c:
        assert c.alloc(8)
