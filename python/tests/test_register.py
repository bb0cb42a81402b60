# SPDX-License-Identifier: BSD-2-Clause
"""Memory the application already shares: Client.register(fd, offset,
length) of a sealed memfd, real daemons. Puts, gets, atomics and
notifications into it from another daemon; the owner's own mapping sees
them; what register refuses, and why."""

import fcntl
import json
import mmap
import os
import select
import socket
import subprocess

import pytest

import rma
from conftest import deadline_loop

MB = 1 << 20


def sealed_memfd(size):
    fd = os.memfd_create("app-data", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    return fd


@pytest.fixture
def owner(two):
    """A client on B with [1 MiB, 3 MiB) of a 4 MiB memfd registered, the
    application's own mmap of the file, and a client on A with a region
    and the registered region imported: (c, r, remote, oc, reg, mine,
    peer)."""
    a, b = two
    fd = sealed_memfd(4 * MB)
    mine = mmap.mmap(fd, 4 * MB)
    oc = rma.Client(b.socket)
    reg = oc.register(fd, MB, 2 * MB)
    os.close(fd)  # the region keeps what it needs
    c = rma.Client(a.socket)
    r = c.alloc(2 * MB)
    peer = c.peer(b.listen)
    remote = c.import_remote(peer, reg.descriptor())
    yield c, r, remote, oc, reg, mine, peer
    c.close()
    oc.close()
    mine.close()


def test_put_get_land_in_the_owners_mapping(owner):
    c, r, remote, _, reg, mine, _ = owner
    assert len(reg) == 2 * MB and remote.length == 2 * MB
    data = os.urandom(MB)
    memoryview(r)[:MB] = data
    c.put(r, 0, remote, 4096, MB, remote_completion=True).wait(20)
    assert mine[MB + 4096:2 * MB + 4096] == data
    assert bytes(memoryview(reg)[4096:4096 + MB]) == data
    mine[3 * MB - 100:3 * MB] = b"z" * 100
    c.get(r, 0, remote, 2 * MB - 100, 100).wait(20)
    assert bytes(memoryview(r)[:100]) == b"z" * 100
    with pytest.raises(rma.OutOfBounds):
        c.put(r, 0, remote, 2 * MB - 1, 2).wait(20)


def test_atomic_and_notification(owner):
    c, r, remote, oc, reg, mine, _ = owner
    mine[MB + 8:MB + 16] = (5).to_bytes(8, "little")
    req = c.atomic(remote, 8, "fetch-add", 10)
    req.wait(20)
    assert req.value == 5
    assert int.from_bytes(mine[MB + 8:MB + 16], "little") == 15
    got = []
    oc.on_notification(got.append)
    memoryview(r)[:4] = b"note"
    c.put(r, 0, remote, 64, 4, notify=7).wait(20)

    def step():
        select.select([oc.fileno()], [], [], 0.2)
        oc.progress()

    assert deadline_loop(lambda: got, 10, step)
    assert got[0].region is reg
    assert (got[0].offset, got[0].length, got[0].value) == (64, 4, 7)
    assert mine[MB + 64:MB + 68] == b"note"


def test_read_only_descriptor(owner):
    c, r, _, _, reg, mine, peer = owner
    ro = c.import_remote(peer, reg.read_only_descriptor())
    mine[MB:MB + 3] = b"abc"
    c.get(r, 0, ro, 0, 3).wait(20)
    assert bytes(memoryview(r)[:3]) == b"abc"
    with pytest.raises(rma.Permission):
        c.put(r, 0, ro, 0, 3).wait(20)


def test_owner_cannot_shrink(two):
    _, b = two
    fd = sealed_memfd(MB)
    with rma.Client(b.socket) as oc:
        reg = oc.register(fd)  # the whole file
        assert len(reg) == MB
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 0)
        os.ftruncate(fd, 2 * MB)  # growing is allowed
        memoryview(reg)[:5] = b"alive"
        reg.free()
    os.close(fd)


def test_refusals(two):
    _, b = two
    with rma.Client(b.socket) as oc:
        fd = os.memfd_create("unsealed", os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, MB)
        with pytest.raises(rma.InvalidArgument, match="F_SEAL_SHRINK"):
            oc.register(fd, 0, MB)
        m = mmap.mmap(fd, MB)
        with pytest.raises(TypeError, match="file descriptor"):
            oc.register(m)
        m.close()
        os.close(fd)
        s1, s2 = socket.socketpair()
        with pytest.raises(rma.InvalidArgument, match="socket"):
            oc.register(s1, 0, 4096)  # fileno() is taken
        s1.close()
        s2.close()
        fd = sealed_memfd(MB)
        with pytest.raises(rma.OutOfBounds):
            oc.register(fd, 0, MB + 1)
        with pytest.raises(rma.InvalidArgument):
            oc.register(fd, 1, 4096)
        ro = os.open("/proc/self/fd/%d" % fd, os.O_RDONLY)
        with pytest.raises(rma.Permission):
            oc.register(ro, 0, 4096)
        os.close(ro)
        with pytest.raises(OverflowError):
            oc.register(fd, -1, 4096)
        os.close(fd)
        with pytest.raises(OSError):
            oc.register(fd)  # closed: no size to take the length from
        with pytest.raises(rma.InvalidArgument):
            oc.register(fd, 0, 4096)


def test_limits(daemons):
    d = daemons(extra=["--max-regions", "1"])
    fd = sealed_memfd(MB)
    with rma.Client(d.socket) as oc:
        held = oc.alloc(4096)
        with pytest.raises(rma.Limit):
            oc.register(fd, 0, 4096)
        held.free()
        assert len(oc.register(fd, 0, 4096)) == 4096
    os.close(fd)


def region_ids(sock):
    """The ids of the regions `rmactl regions --json` lists."""
    out = subprocess.run([os.environ["RMACTL_BIN"], "--socket", sock,
                          "regions", "--json"], capture_output=True,
                         text=True, timeout=30, check=True).stdout
    return {int(r["region_id"]) for r in json.loads(out)["regions"]}


def test_lost_at_a_crash_and_its_id_not_reused(tmpdir_short):
    """rmad crashes under its fd store (as under systemd): the registered
    region is not kept, operations on it raise NoRegion, and its id goes
    to no new region, so a notification for a new one names the new one,
    not the lost."""
    if not os.environ.get("FDSTORE_SINK"):
        pytest.skip("FDSTORE_SINK (tests/service/fdstore_sink) not set")
    from test_reattach import Sink
    sink = Sink(tmpdir_short, 0)
    fd = sealed_memfd(MB)
    try:
        with rma.Client(sink.socket) as oc, rma.Client(sink.socket) as c:
            kept = oc.alloc(4096)
            src = c.alloc(4096)
            reg = oc.register(fd, 0, MB)  # the last id given out
            before = region_ids(sink.socket)
            assert len(before) == 3
            sink.crash()

            def step():
                select.select([oc.fileno(), c.fileno()], [], [], 0.2)
                oc.progress()
                c.progress()

            assert deadline_loop(
                lambda: oc.reattaches >= 1 and c.reattaches >= 1, 10, step)
            own = oc.import_remote(oc.peer(sink.listen), kept.descriptor())
            with pytest.raises(rma.NoRegion):
                oc.put(reg, 0, own, 0, 8).wait(20)
            fresh = oc.alloc(4096)
            # kept and src came back; fresh has an id never given out
            after = region_ids(sink.socket)
            assert len(after) == 3 and len(after - before) == 1
            got = []
            oc.on_notification(got.append)
            remote = c.import_remote(c.peer(sink.listen), fresh.descriptor())
            c.put(src, 0, remote, 0, 8, notify=3).wait(20)
            assert deadline_loop(lambda: got, 10, step)
            assert got[0].region is fresh
    finally:
        os.close(fd)
        sink.stop()
