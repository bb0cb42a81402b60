# SPDX-License-Identifier: BSD-2-Clause
"""put(obj, remote, remote_offset) and get(obj, ...) with any object of
the buffer protocol, through librma's staging area (rma_put_buf,
rma_get_buf), against real daemons: every kind of buffer x size x
direction, between two daemons and on the same daemon; what the binding
holds and for how long; the errors."""

import array
import asyncio
import mmap
import os
import signal
import sys
import tempfile
import tracemalloc

import numpy as np
import pytest

import rma

# A small staging area (pieces of 64 KiB, four at a time), so that the
# sizes below cross pieces and the whole area.
STAGING = "256K"
PIECE = 64 << 10
SIZES = [1, 7, 4099, PIECE, PIECE + 1, 200003, (1 << 20) + 13]
REGION = 4 << 20


@pytest.fixture
def link(two, monkeypatch):
    """A client on A; the region of a client on B imported through A
    ("two") and a region of A's own client imported through A ("same"):
    (c, {place: (remote, owner's memoryview)}, a, b)."""
    monkeypatch.setenv("RMA_STAGING_SIZE", STAGING)
    a, b = two
    cb = rma.Client(b.socket)
    rb = cb.alloc(REGION)
    c = rma.Client(a.socket)
    ra = c.alloc(REGION)
    far = c.import_remote(c.peer(b.listen), rb.descriptor())
    near = c.import_remote(c.peer(a.listen), ra.descriptor())
    mb, ma = memoryview(rb), memoryview(ra)
    yield c, {"two": (far, mb), "same": (near, ma)}, a, b
    mb.release()
    ma.release()
    if b.proc is not None:
        os.kill(b.proc.pid, signal.SIGCONT)
    c.close()
    cb.close()


def pattern(n, seed):
    return (np.arange(n, dtype=np.uint32) * 131 + seed * 7).astype(
        np.uint8).tobytes()


def make(kind, n):
    """A writable buffer of n bytes of the given kind, and what keeps it
    (closed after)."""
    if kind == "bytearray":
        return bytearray(n), None
    if kind == "memoryview-slice":
        return memoryview(bytearray(n + 11))[5:5 + n], None
    if kind == "numpy":
        return np.zeros(n, dtype=np.uint8), None
    if kind == "array":
        return array.array("B", bytes(n)), None
    if kind == "mmap":
        return mmap.mmap(-1, n), None
    f = tempfile.TemporaryFile()
    f.truncate(n)
    return mmap.mmap(f.fileno(), n), f


KINDS = ["bytearray", "memoryview-slice", "numpy", "array", "mmap",
         "mmap-file"]


@pytest.mark.parametrize("place", ["two", "same"])
@pytest.mark.parametrize("kind", KINDS)
def test_kinds_sizes_both_ways(link, place, kind):
    c, places, _, _ = link
    remote, owner = places[place]
    for i, n in enumerate(SIZES):
        roff = 4096 * i + 3
        data = pattern(n, i)
        buf, keep = make(kind, n)
        memoryview(buf).cast("B")[:] = data
        c.put(buf, remote, roff, remote_completion=True).wait(20)
        assert owner[roff:roff + n] == data, (kind, n)
        owner[roff:roff + n] = pattern(n, i + 1)
        memoryview(buf).cast("B")[:] = bytes(n)
        req = c.get(buf, remote, roff)
        req.wait(20)
        assert req.status == rma.OK and req.bytes == n
        assert bytes(memoryview(buf).cast("B")) == pattern(n, i + 1), \
            (kind, n)
        if keep is not None:
            buf.close()
            keep.close()


@pytest.mark.parametrize("place", ["two", "same"])
def test_read_only_bytes_put(link, place):
    c, places, _, _ = link
    remote, owner = places[place]
    for n in SIZES:
        data = pattern(n, 3)
        c.put(data, remote, 17, remote_completion=True).wait(20)
        assert owner[17:17 + n] == data
    # a read-only slice of bytes, at an offset
    data = pattern(PIECE * 3, 4)
    c.put(memoryview(data)[1000:], remote, 0, remote_completion=True).wait(20)
    assert owner[:len(data) - 1000] == data[1000:]


def test_region_whole_as_buffer(link):
    c, places, _, _ = link
    remote, owner = places["two"]
    r = c.alloc(5000)
    memoryview(r)[:] = pattern(5000, 9)
    c.put(r, remote, 100, remote_completion=True).wait(20)
    assert owner[100:5100] == pattern(5000, 9)


def test_refused_buffers(link):
    c, places, _, _ = link
    remote, _ = places["two"]
    with pytest.raises(BufferError, match="C-contiguous"):
        c.put(memoryview(bytearray(100))[::2], remote, 0)
    with pytest.raises(BufferError, match="C-contiguous"):
        c.put(np.zeros((8, 8), dtype=np.uint8, order="F"), remote, 0)
    with pytest.raises(BufferError, match="writable"):
        c.get(b"read only", remote, 0)
    with pytest.raises(BufferError, match="writable"):
        c.get(np.zeros(8)[::2], remote, 0)
    with pytest.raises(TypeError, match="buffer protocol"):
        c.put(12, remote, 0)
    with pytest.raises(TypeError, match="buffer protocol"):
        c.get("text", remote, 0)
    with pytest.raises(rma.InvalidArgument):
        c.put(bytearray(), remote, 0)
    req = c.get(bytearray(64), remote, REGION - 8)
    with pytest.raises(rma.OutOfBounds):
        req.wait(5)
    assert c.in_flight == 0


def test_small_put_buffer_free_at_return(link):
    """Up to 64 KiB is copied before put() returns: the buffer may change
    at once, and is not held (a bytearray resizes)."""
    c, places, a, b = link
    remote, owner = places["two"]
    os.kill(b.proc.pid, signal.SIGSTOP)
    buf = bytearray(pattern(PIECE, 5))
    req = c.put(buf, remote, 0)
    buf[:] = bytes(PIECE)
    buf.extend(b"more")  # not exported any more
    assert not req.done()
    os.kill(b.proc.pid, signal.SIGCONT)
    req.wait(20)
    assert owner[:PIECE] == pattern(PIECE, 5)


@pytest.mark.parametrize("put", [True, False])
def test_big_buffer_held_until_completion(link, put):
    c, places, a, b = link
    remote, owner = places["two"]
    n = PIECE * 5
    owner[:n] = pattern(n, 6)
    buf = bytearray(pattern(n, 7) if put else n)
    before = sys.getrefcount(buf)
    os.kill(b.proc.pid, signal.SIGSTOP)
    req = c.put(buf, remote, 0) if put else c.get(buf, remote, 0)
    with pytest.raises(BufferError):
        buf.extend(b"x")
    os.kill(b.proc.pid, signal.SIGCONT)
    req.wait(20)
    buf.extend(b"x")  # released at completion
    assert sys.getrefcount(buf) == before
    assert owner[:n] == pattern(n, 7 if put else 6)
    assert bytes(buf[:n]) == pattern(n, 7 if put else 6)


def test_numpy_put_no_copy_in_python(link):
    """A numpy array goes to librma as it is: Python allocates nothing
    of its size."""
    c, places, _, _ = link
    remote, owner = places["two"]
    arr = np.frombuffer(pattern(2 << 20, 8), dtype=np.uint8).copy()
    out = np.zeros(2 << 20, dtype=np.uint8)
    tracemalloc.start()
    c.put(arr, remote, 0, remote_completion=True).wait(20)
    c.get(out, remote, 0).wait(20)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 256 << 10, peak
    assert owner[:arr.nbytes] == arr.tobytes()
    assert (out == arr).all()


def test_many_over_capacity_async(link):
    """Far more in flight than the staging area holds: they wait in call
    order, and every byte lands."""
    c, places, _, _ = link
    remote, owner = places["two"]
    lens = [PIECE * 2 + 17 if i % 25 == 0 else i * 131 % 9000 + 1
            for i in range(400)]
    offs = np.cumsum([0] + lens[:-1]).tolist()
    src = np.frombuffer(pattern(sum(lens), 10), dtype=np.uint8)
    dst = np.zeros(sum(lens), dtype=np.uint8)

    async def main():
        await asyncio.gather(*[
            c.put(src[o:o + n], remote, o, remote_completion=True)
            for o, n in zip(offs, lens)])
        assert owner[:sum(lens)] == src.tobytes()
        await asyncio.gather(*[c.get(dst[o:o + n], remote, o)
                               for o, n in zip(offs, lens)])

    asyncio.run(main())
    assert (dst == src).all()
    assert c.in_flight == 0


def test_get_while_daemon_dies(link):
    """The remote daemon dies under a get into a bytearray: the request
    fails, the buffer is released, the client goes on."""
    c, places, a, b = link
    remote, _ = places["two"]
    near, owner = places["same"]
    buf = bytearray(1 << 20)
    os.kill(b.proc.pid, signal.SIGSTOP)
    req = c.get(buf, remote, 0)
    c.progress()
    b.kill()
    with pytest.raises(rma.Error):
        req.wait(20)
    assert req.status not in (rma.OK, rma.INPROGRESS)
    buf.extend(b"x")  # not held any more
    data = pattern(PIECE * 3, 11)
    c.put(data, near, 0, remote_completion=True).wait(20)
    assert owner[:len(data)] == data



def test_remote_dropped_mid_transfer(link):
    """A big put on a remote nobody holds any more (released by the next
    call, as a dropped Remote is) moves every byte: operations already
    submitted on a remote go on after its release (rma_remote_release).
    The target is stopped, so that most pieces still wait for staging
    room when the release goes."""
    c, _, a, b = link
    cb = rma.Client(b.socket)
    rb = cb.alloc(REGION)
    n = PIECE * 16
    data = pattern(n, 12)
    remote = c.import_remote(c.peer(b.listen), rb.descriptor())
    os.kill(b.proc.pid, signal.SIGSTOP)
    req = c.put(data, remote, 0, remote_completion=True)
    del remote
    c.progress()  # the dropped remote's release goes now
    os.kill(b.proc.pid, signal.SIGCONT)
    req.wait(20)
    assert req.bytes == n
    with memoryview(rb) as owner:
        assert owner[:n] == data
    cb.close()
