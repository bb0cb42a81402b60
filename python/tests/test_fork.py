# SPDX-License-Identifier: BSD-2-Clause
"""After os.fork() the child's calls on the parent's Client raise
rma.InvalidArgument ("this client belongs to the parent process") and take
nothing of the parent's connection or ring: the parent's requests, issued
before and after the fork, complete in the parent (issue 23, finding 7)."""

import json
import os
import select
import time

import pytest

import rma

SIZE = 1 << 16
CHILD_SECONDS = 30.0


@pytest.fixture
def link(two):
    """(c, r, remote, rb, b): a client on A with a region r, the remote of
    region rb, which a client on B holds, and daemon B."""
    a, b = two
    cb = rma.Client(b.socket)
    rb = cb.alloc(SIZE)
    c = rma.Client(a.socket)
    r = c.alloc(SIZE)
    remote = c.import_remote(c.peer(b.listen), rb.descriptor())
    yield c, r, remote, rb, b
    c.close()
    cb.close()


def content(region, start, length):
    with memoryview(region) as mv:
        return bytes(mv[start:start + length])


def child_calls(c, r, remote, pending, b):
    """In the child: what each call did ("refused", or what else
    happened). Runs no pytest code: its failures go back as data."""
    with memoryview(r) as mv:
        mv[4096:4160] = b"Z" * 64  # would be put by the calls below
    calls = {
        # first what would read the parent's completion
        "progress": lambda: c.progress(),
        "wait": lambda: pending.wait(1),
        "put": lambda: c.put(r, 4096, remote, 4096, 64),
        "put notify": lambda: c.put(r, 4096, remote, 4096, 64, notify=1),
        "get": lambda: c.get(r, 0, remote, 0, 64),
        "atomic": lambda: c.atomic(remote, 8192, "add", 1),
        "putv": lambda: c.putv(r, remote, [(4096, 4096, 64)]),
        "getv": lambda: c.getv(r, remote, [(0, 0, 64)]),
        "flush": lambda: c.flush(),
        "alloc": lambda: c.alloc(4096),
        "peer": lambda: c.peer(b.listen),
        "import_remote": lambda: c.import_remote(c.peer(b.listen),
                                                 "rma1:x"),
        "free": lambda: r.free(),
    }
    out = {}
    for name, call in calls.items():
        try:
            call()
            out[name] = "returned"
        except rma.InvalidArgument as e:
            out[name] = ("refused" if "belongs to the parent process"
                         in str(e) else "InvalidArgument: %s" % e)
        except Exception as e:  # noqa: BLE001 (reported to the parent)
            out[name] = "%s: %s" % (type(e).__name__, e)
    try:
        c.close()  # the child's copy only
        out["close"] = "ok"
    except Exception as e:  # noqa: BLE001
        out["close"] = "%s: %s" % (type(e).__name__, e)
    return out


def test_fork_child_refused_parent_unharmed(link):
    c, r, remote, rb, b = link
    with memoryview(r) as mv:
        mv[0:256] = b"A" * 64 + b"B" * 64 + b"C" * 64 + b"D" * 64
    # before the fork: one waited for, one still the library's at the fork
    c.put(r, 0, remote, 0, 64).wait(10)
    pending = c.put(r, 64, remote, 64, 64)
    # it landed at B; its completion is in the ring, the socket, or close
    end = time.monotonic() + 10
    while content(rb, 64, 64) != b"B" * 64:
        assert time.monotonic() < end, "the put did not land within 10 s"
        select.select([], [], [], 0.01)
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(rfd)
            os.write(wfd, json.dumps(
                child_calls(c, r, remote, pending, b)).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(wfd)
    data = b""
    end = CHILD_SECONDS
    while True:
        ready = select.select([rfd], [], [], end)[0]
        assert ready, "the child said nothing within %.0f s" % CHILD_SECONDS
        chunk = os.read(rfd, 65536)
        if not chunk:
            break
        data += chunk
    os.close(rfd)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    verdict = json.loads(data)
    assert verdict == dict.fromkeys(verdict, "refused") | {"close": "ok"}
    assert len(verdict) == 14

    # the parent: its completion was left to it, and it goes on
    pending.wait(10)
    assert pending.bytes == 64
    c.put(r, 128, remote, 128, 64).wait(10)
    c.putv(r, remote, [(192, 192, 64)]).wait(10)
    assert c.atomic(remote, 8192, "add", 1).wait(10) is None
    with memoryview(r) as mv:
        mv[0:256] = bytes(256)
    got = c.get(r, 0, remote, 0, 256)
    got.wait(10)
    assert got.bytes == 256
    assert content(r, 0, 256) == content(rb, 0, 256) == (
        b"A" * 64 + b"B" * 64 + b"C" * 64 + b"D" * 64)
    c.flush().wait(10)
    # none of the child's calls reached B; the parent's atomic did, once
    assert content(rb, 4096, 64) == bytes(64)
    assert content(rb, 8192, 8) == (1).to_bytes(8, "little")
    assert c.in_flight == 0
    # the region the child "freed" is the parent's still
    assert content(r, 4096, 64) == b"Z" * 64
