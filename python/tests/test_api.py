# SPDX-License-Identifier: BSD-2-Clause
"""The Python API as tools see it: signatures, docstrings, the stub
(mypy.stubtest), and the semantics the README promises for close() and
for cancelled awaits."""

import asyncio
import inspect
import os
import signal
import subprocess
import sys

import pytest

import rma

HERE = os.path.dirname(os.path.abspath(__file__))
PUBLIC_TYPES = (rma.Client, rma.Region, rma.Peer, rma.Remote, rma.Request)


def public_callables():
    for t in PUBLIC_TYPES:
        for name, obj in vars(t).items():
            if callable(obj) and (not name.startswith("_") or
                                  name in ("__enter__", "__exit__")):
                yield "%s.%s" % (t.__name__, name), getattr(t, name)
    yield "default_socket", rma.default_socket
    yield "strerror", rma.strerror


def test_every_method_has_a_signature_and_a_doc():
    seen = 0
    for name, f in public_callables():
        assert f.__text_signature__, name
        inspect.signature(f)  # raises if the text signature is bad
        doc = f.__doc__ or ""
        assert len(doc.strip()) > 10, name
        assert "--" not in doc.split("\n")[0], name  # the marker is cut
        seen += 1
    assert seen >= 25
    assert str(inspect.signature(rma.Client)) == \
        "(socket=None, timeout=5.0)"


def test_put_signature_and_doc_name_every_argument():
    # two forms (a region and its range, or any buffer): the doc gives
    # both signatures, as the stub's overloads do
    doc = rma.Client.put.__doc__
    assert doc.startswith(
        "put(region, offset, remote, remote_offset, length, callback=None, "
        "user_data=None, *, remote_completion=False, notify=None)\n"
        "put(buffer, remote, remote_offset, callback=None, user_data=None, "
        "*, remote_completion=False)\n")
    assert rma.Client.get.__doc__.startswith(
        "get(region, offset, remote, remote_offset, length, callback=None, "
        "user_data=None)\nget(buffer, remote, remote_offset, callback=None, "
        "user_data=None)\n")
    assert "ClientClosed" in rma.Client.put.__doc__
    assert "wait_for" in rma.Client.put.__doc__
    assert list(inspect.signature(rma.Client.alloc).parameters) == [
        "self", "size"]


def _interpreters():
    seen = []
    for exe in (sys.executable, "/usr/bin/python3", "python3"):
        real = os.path.realpath(exe) if os.path.isabs(exe) else exe
        if real not in seen:
            seen.append(real)
            yield exe


def test_stubtest_clean():
    """mypy.stubtest compares __init__.pyi with the module at run time.
    Run by the first interpreter that has mypy and imports this build's
    rma (Debian's python3-mypy is for /usr/bin/python3)."""
    tried = []
    for exe in _interpreters():
        probe = subprocess.run(
            [exe, "-c", "import mypy.stubtest, rma; print(rma.__file__)"],
            capture_output=True, text=True, timeout=60)
        tried.append("%s: %s" % (exe, (probe.stderr.strip().splitlines() or
                                       ["ok"])[-1]))
        if probe.returncode != 0:
            continue
        res = subprocess.run(
            [exe, "-m", "mypy.stubtest", "--allowlist",
             os.path.join(HERE, "stubtest-allowlist.txt"), "rma"],
            capture_output=True, text=True, timeout=240,
            # mypy reads the stub from the current directory first: that
            # of the rma the interpreter imports (build/python)
            cwd=os.path.dirname(os.path.dirname(probe.stdout.strip())))
        out = res.stdout + res.stderr
        print("stubtest by %s:\n%s" % (exe, out))
        assert res.returncode == 0, out
        assert "Success" in out, out
        return
    pytest.skip("no interpreter has both mypy and this build's rma "
                "(apt install python3-mypy for /usr/bin/python3): " +
                "; ".join(tried))


@pytest.fixture
def link(two):
    a, b = two
    cb = rma.Client(b.socket)
    rb = cb.alloc(1 << 20)
    c = rma.Client(a.socket)
    r = c.alloc(1 << 20)
    remote = c.import_remote(c.peer(b.listen), rb.descriptor())
    yield a, b, c, r, remote, cb, rb
    c.close()
    cb.close()


def test_calls_after_close_raise_client_closed(link):
    _, _, c, r, remote, _, _ = link
    peer = remote.peer
    c.close()
    assert issubclass(rma.ClientClosed, rma.Error)
    with pytest.raises(rma.ClientClosed) as e:
        c.put(r, 0, remote, 0, 8)
    assert "closed" in str(e.value)
    for call in (lambda: c.get(r, 0, remote, 0, 8),
                 lambda: c.putv(r, remote, [(0, 0, 8)]),
                 lambda: c.atomic(remote, 0, "add", 1),
                 lambda: c.flush(),
                 lambda: c.alloc(16),
                 lambda: c.peer(peer.address),
                 lambda: c.progress(),
                 lambda: c.fileno(),
                 lambda: r.descriptor(),
                 lambda: remote.length,
                 lambda: remote.release()):
        with pytest.raises(rma.ClientClosed):
            call()


def test_cancelled_await_leaves_the_put_running(link):
    """wait_for() timing out and task.cancel() end the await, not the
    put: its bytes land and the request completes with OK."""
    _, b, c, r, remote, _, rb = link
    half = 1 << 19
    with memoryview(r) as mv:
        mv[:half] = b"\x5a" * half
        mv[half:] = b"\xa5" * half

    async def main():
        os.kill(b.proc.pid, signal.SIGSTOP)  # the puts cannot complete
        try:
            first = c.put(r, 0, remote, 0, half)
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(first, 0.05)
            second = c.put(r, half, remote, half, half)

            async def waiter():
                await second

            task = asyncio.ensure_future(waiter())
            await asyncio.sleep(0)  # the task is now awaiting the put
            assert not second.done()
            assert task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert not first.done() and not second.done()
        finally:
            os.kill(b.proc.pid, signal.SIGCONT)
        await asyncio.wait_for(first, 30)
        await asyncio.wait_for(second, 30)
        return first, second

    first, second = asyncio.run(main())
    assert first.status == rma.OK and second.status == rma.OK
    assert first.bytes == half and second.bytes == half
    with memoryview(rb) as mb:
        assert mb[:half] == b"\x5a" * half
        assert mb[half:] == b"\xa5" * half


def test_wrong_peer_import_is_bad_descriptor(daemons):
    """A descriptor imported through a daemon that is not its owner:
    BadDescriptor ('wrong peer', with the owner's address once it is a
    peer), not StaleDescriptor (freed or restarted)."""
    a, b = daemons(), daemons()
    with rma.Client(a.socket) as c, rma.Client(b.socket) as cb:
        rb = cb.alloc(4096)  # kept: a freed region's descriptor is stale
        desc = rb.descriptor()
        to_self = c.peer(a.listen)
        with pytest.raises(rma.BadDescriptor) as e:
            c.import_remote(to_self, desc)
        assert "wrong peer" in e.value.detail
        c.import_remote(c.peer(b.listen), desc).release()
        with pytest.raises(rma.BadDescriptor) as e:
            c.import_remote(to_self, desc)
        assert b.listen in e.value.detail


def test_readme_names_every_exception():
    readme = open(os.path.join(HERE, "..", "..", "README.md")).read()
    start = readme.index("- Errors: `rma.Error`")
    section = readme[start:readme.index("\n- ", start + 1)]
    for name, obj in vars(rma.errors).items():
        if isinstance(obj, type) and issubclass(obj, rma.Error) and \
                obj is not rma.Error:
            assert "`%s`" % name in section, name
