# SPDX-License-Identifier: BSD-2-Clause
"""The event loop's reader of a client: what completions unblock is sent
before the loop sleeps, and a stream of completions does not keep the
loop from its other callbacks."""

import asyncio
import os
import signal

import rma


def test_callback_submit_goes_out_before_the_loop_sleeps(daemons):
    """A put submitted by a completion callback while another operation
    is in flight joins librma's batch; the reader sends it before the loop
    sleeps. Held instead until the next wake-up, it would wait here for
    the put to a stopped daemon, which never completes while stopped."""
    a, b, s = daemons(), daemons(), daemons()
    cb, cs = rma.Client(b.socket), rma.Client(s.socket)
    rb, rs = cb.alloc(4096), cs.alloc(4096)
    c = rma.Client(a.socket)
    r = c.alloc(4096)
    to_b = c.import_remote(c.peer(b.listen), rb.descriptor())
    to_s = c.import_remote(c.peer(s.listen), rs.descriptor())
    mv = memoryview(r)
    mv[:16] = bytes(range(1, 17))
    order = []

    async def main():
        second = asyncio.get_running_loop().create_future()

        def on_second(req, status, ud):
            order.append(("second", status))
            second.set_result(None)

        def on_first(req, status, ud):
            order.append(("first", status))
            c.put(r, 8, to_b, 8, 8, on_second)

        first = c.put(r, 0, to_b, 0, 8, on_first)
        held = c.put(r, 0, to_s, 0, 8)
        first.future()  # the client's fd watched by this loop
        await asyncio.wait_for(second, 20)
        return held

    os.kill(s.proc.pid, signal.SIGSTOP)
    try:
        held = asyncio.run(main())
        assert order == [("first", rma.OK), ("second", rma.OK)]
        assert not held.done()
        with memoryview(rb) as got:
            assert got[:16] == bytes(range(1, 17))
    finally:
        os.kill(s.proc.pid, signal.SIGCONT)
    held.wait(20)
    mv.release()
    for x in (c, cb, cs):
        x.close()


def test_stream_of_completions_leaves_the_loop_its_turns(daemons):
    """Callbacks that resubmit keep completions coming back to back; the
    reader keeps taking them for a bounded time only, so a callback the
    stream schedules early runs long before the stream ends (a reader
    that polled for as long as completions keep coming would run it only
    after the last one)."""
    a, b = daemons(), daemons()
    cb = rma.Client(b.socket)
    rb = cb.alloc(4096)
    c = rma.Client(a.socket)
    r = c.alloc(4096)
    remote = c.import_remote(c.peer(b.listen), rb.descriptor())
    total, window = 200000, 256
    state = {"issued": 0, "done": 0, "marked": None}

    async def main():
        loop = asyncio.get_running_loop()
        finished = loop.create_future()

        def mark():
            state["marked"] = state["done"]

        def done(req, status, ud):
            assert status == rma.OK
            state["done"] += 1
            if state["done"] == 1000:
                loop.call_soon(mark)
            if state["issued"] < total:
                state["issued"] += 1
                c.put(r, 0, remote, 0, 8, done)
            elif state["done"] == total and not finished.done():
                finished.set_result(None)

        first = [c.put(r, 0, remote, 0, 8, done) for _ in range(window)]
        state["issued"] = window
        first[0].future()
        await asyncio.wait_for(finished, 120)

    asyncio.run(main())
    assert state["done"] == total
    # Decided on counts, not on the rate: a reader that kept polling
    # while completions came would run mark only near the stream's end,
    # the bounded one after about a millisecond's worth (1000 at 1 M/s)
    assert state["marked"] is not None, state
    assert state["marked"] < total // 2, state
    c.close()
    cb.close()
