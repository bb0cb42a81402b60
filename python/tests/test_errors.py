# SPDX-License-Identifier: BSD-2-Clause
"""Each error class, raised by a real daemon (or librma) with its detail."""

import asyncio
import os
import socket

import pytest

import rma


def test_hierarchy():
    for cls in (rma.InvalidArgument, rma.OutOfBounds, rma.StaleDescriptor,
                rma.BadDescriptor, rma.Timeout, rma.Unreachable,
                rma.DaemonGone, rma.Limit, rma.Permission, rma.NoRegion,
                rma.NoPeer, rma.ConnectionReset, rma.ProtocolError,
                rma.NoMemory, rma.Canceled, rma.Internal):
        assert issubclass(cls, rma.Error)
    assert issubclass(rma.Timeout, TimeoutError)
    assert issubclass(rma.Permission, PermissionError)
    assert issubclass(rma.InvalidArgument, ValueError)


@pytest.fixture
def pair(two):
    a, b = two
    cb = rma.Client(b.socket)
    rb = cb.alloc(4096)
    c = rma.Client(a.socket)
    r = c.alloc(4096)
    peer = c.peer(b.listen)
    yield a, b, c, r, peer, cb, rb
    c.close()
    cb.close()


def test_out_of_bounds_sync_and_async(pair):
    _, _, c, r, peer, _, rb = pair
    remote = c.import_remote(peer, rb.descriptor())
    with pytest.raises(rma.OutOfBounds) as e:
        c.put(r, 0, remote, 4090, 10).wait(10)
    assert e.value.status == rma.ERR_OUT_OF_BOUNDS
    assert e.value.name == "RMA_ERR_OUT_OF_BOUNDS"
    assert "4096" in e.value.detail and e.value.detail in str(e.value)

    async def main():
        with pytest.raises(rma.OutOfBounds):
            await c.get(r, 0, remote, 4000, 100)
        fut = c.put(r, 0, remote, 4095, 2).future()
        await asyncio.wait([fut])
        assert isinstance(fut.exception(), rma.OutOfBounds)

    asyncio.run(main())


def test_stale_and_bad_descriptor(pair):
    _, _, c, r, peer, cb, rb = pair
    desc = rb.descriptor()
    rb.free()
    with pytest.raises(rma.StaleDescriptor) as e:
        c.import_remote(peer, desc)
    assert e.value.detail
    with pytest.raises(rma.BadDescriptor):
        c.import_remote(peer, "not a descriptor")


def test_stale_after_import(pair):
    _, _, c, r, peer, cb, _ = pair
    rb2 = cb.alloc(4096)
    remote = c.import_remote(peer, rb2.descriptor())
    rb2.free()
    with pytest.raises(rma.StaleDescriptor):
        c.put(r, 0, remote, 0, 8).wait(10)


def test_invalid_and_no_region(pair):
    _, _, c, r, peer, _, rb = pair
    remote = c.import_remote(peer, rb.descriptor())
    with pytest.raises(rma.InvalidArgument):
        c.alloc(0)
    with pytest.raises(rma.InvalidArgument):
        c.put(r, 0, remote, 0, 0)  # an empty transfer is refused
    with pytest.raises(rma.InvalidArgument):
        c.peer("no port here")
    r2 = c.alloc(16)
    r2.free()
    with pytest.raises(rma.NoRegion):
        c.put(r2, 0, remote, 0, 8)


def test_timeout_of_wait_and_connect(pair, tmpdir_short):
    a, b, c, r, peer, _, rb = pair
    remote = c.import_remote(peer, rb.descriptor())
    os.kill(b.proc.pid, __import__("signal").SIGSTOP)
    try:
        req = c.put(r, 0, remote, 0, 8)
        with pytest.raises(rma.Timeout):
            req.wait(0.05)
        assert not req.done() and req.status == rma.INPROGRESS
    finally:
        os.kill(b.proc.pid, __import__("signal").SIGCONT)
    req.wait(20)
    # a listener that accepts and never answers
    path = os.path.join(tmpdir_short, "mute.sock")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(path)
        s.listen()
        with pytest.raises(rma.Timeout):
            rma.Client(path, timeout=0.2)


def test_unreachable(pair):
    _, _, c, _, _, _, _ = pair
    with socket.socket() as s:  # a port bound by nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        with pytest.raises(rma.Unreachable) as e:
            c.peer("127.0.0.1:%d" % port)
    assert e.value.detail


def test_daemon_gone(tmpdir_short, daemons):
    with pytest.raises(rma.DaemonGone):
        rma.Client(os.path.join(tmpdir_short, "nobody.sock"))
    a = daemons()
    c = rma.Client(a.socket)
    r = c.alloc(64)
    a.kill()
    with pytest.raises(rma.DaemonGone):
        c.alloc(64)
    with pytest.raises(rma.DaemonGone):
        c.progress()
    c.close()
    assert len(bytes(memoryview(r))) if False else True


def test_limit(daemons):
    a = daemons(["--max-regions", "2"])
    with rma.Client(a.socket) as c:
        kept = [c.alloc(8), c.alloc(8)]
        with pytest.raises(rma.Limit) as e:
            c.alloc(8)
        assert e.value.detail


def test_permission(daemons, tmpdir_short, monkeypatch):
    # librma refuses a socket in a per-user directory (rmad-UID) that is
    # not the user's alone, since whoever serves it hands out the memory
    userdir = os.path.join(tmpdir_short, "rmad-%d" % os.getuid())
    os.mkdir(userdir, 0o700)
    monkeypatch.setenv("TMPDIR", tmpdir_short)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    a = daemons(socket=os.path.join(userdir, "rmad.sock"))
    rma.Client(a.socket).close()
    os.chmod(userdir, 0o755)
    try:
        with pytest.raises(rma.Permission) as e:
            rma.Client(a.socket)
    finally:
        os.chmod(userdir, 0o700)
    assert e.value.status == rma.ERR_PERMISSION
    assert "0755" in e.value.detail


def test_awaits_mixed_outcomes_in_one_batch(pair):
    """Awaits resumed in the loop's reader, failures among successes of
    the same batches: each task gets its own outcome (a successful one
    None, a failed one its exception), an atomic its value."""
    _, _, c, r, peer, _, rb = pair
    remote = c.import_remote(peer, rb.descriptor())

    async def one(i):
        if i % 3 == 0:
            with pytest.raises(rma.OutOfBounds):
                await c.put(r, 0, remote, 4090, 10)
            return "failed"
        if i % 3 == 1:
            return await c.put(r, 0, remote, 8 + 8 * (i % 64), 8)
        return await c.atomic(remote, 0, "fetch-add", 1)

    async def main():
        out = await asyncio.wait_for(
            asyncio.gather(*[one(i) for i in range(300)]), 30)
        assert out[0::3] == ["failed"] * 100
        assert out[1::3] == [None] * 100
        assert all(isinstance(v, int) for v in out[2::3])
        assert len(set(out[2::3])) == 100  # each add saw its own value

    asyncio.run(main())


def test_awaits_under_the_python_task(pair):
    """asyncio's Task written in Python (tasks._PyTask) asks an awaited
    request for the Future protocol by name (its add_done_callback, among
    others, looked up and called as a method): each await ends as under
    the C Task, a success with None, a failure with its exception."""
    _, _, c, r, peer, _, rb = pair
    remote = c.import_remote(peer, rb.descriptor())

    async def one(i):
        if i % 2:
            with pytest.raises(rma.OutOfBounds):
                await c.put(r, 0, remote, 4090, 10)
            return "failed"
        return await c.put(r, 0, remote, 8 * (i % 64), 8)

    async def main():
        loop = asyncio.get_running_loop()
        loop.set_task_factory(
            lambda loop, coro, **kw: asyncio.tasks._PyTask(
                coro, loop=loop, **kw))
        tasks = [asyncio.ensure_future(one(i)) for i in range(64)]
        assert all(type(t) is asyncio.tasks._PyTask for t in tasks)
        return await asyncio.wait_for(asyncio.gather(*tasks), 30)

    assert asyncio.run(main()) == [None, "failed"] * 32
