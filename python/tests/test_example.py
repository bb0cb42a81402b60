# SPDX-License-Identifier: BSD-2-Clause
"""examples/put.py, run as a user runs it, like tests/cli.sh runs put.c."""

import os
import shutil
import subprocess
import sys

import rma


def test_example_put(two):
    a, b = two
    with rma.Client(a.socket) as ca:
        target = ca.alloc(4096)
        env = dict(os.environ, RMAD_SOCKET=b.socket)
        out = subprocess.run(
            [sys.executable,
             os.path.join(os.environ["EXAMPLES_DIR"], "put.py"),
             a.listen, target.descriptor()],
            env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines() == [
            "put: success", "read back: hello, remote memory"]
        assert bytes(memoryview(target)[:20]) == b"hello, remote memory"


def test_example_put_reports_errors(two):
    a, b = two
    env = dict(os.environ, RMAD_SOCKET=b.socket)
    out = subprocess.run(
        [sys.executable, os.path.join(os.environ["EXAMPLES_DIR"], "put.py"),
         a.listen, "garbage"],
        env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "bad descriptor" in out.stderr


def test_example_register(two):
    """examples/register.py shares a memfd it maps; a put from the other
    daemon shows in its own mapping."""
    a, b = two
    env = dict(os.environ, RMAD_SOCKET=a.socket)
    proc = subprocess.Popen(
        [sys.executable,
         os.path.join(os.environ["EXAMPLES_DIR"], "register.py"), "1"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        descriptor = proc.stdout.readline().strip()
        assert descriptor.startswith("rma"), proc.stderr.read()
        with rma.Client(b.socket) as cb:
            src = cb.alloc(4096)
            memoryview(src)[:13] = b"from the wire"
            remote = cb.import_remote(cb.peer(a.listen), descriptor)
            cb.put(src, 0, remote, 300, 13, notify=1).wait(20)
            out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert out.splitlines() == ["300 13: from the wire"]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_bench_smoke():
    """python3 -m rma.bench runs (a handful of operations; nothing timed)."""
    out = subprocess.run(
        [sys.executable, "-m", "rma.bench", "--smoke", "--json",
         "--rows", "8:256,1048576:4"],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    import json
    rows = json.loads(out.stdout)["rows"]
    assert [(r["size"], r["window"]) for r in rows] == [(8, 256),
                                                        (1048576, 4)]
    assert all(r["python_ops_per_s"] > 0 and r["rmactl_ops_per_s"] > 0
               for r in rows)


def test_bench_daemon_that_fails(tmp_path):
    """A daemon that does not start: rma.bench says so with the end of
    its log, and keeps the run's directory with the logs."""
    fake = tmp_path / "rmad"
    fake.write_text("#!/bin/sh\necho 'rmad: no such option' >&2\nexit 64\n")
    fake.chmod(0o755)
    out = subprocess.run(
        [sys.executable, "-m", "rma.bench", "--smoke", "--rmad", str(fake),
         "--rmactl", "/bin/true"],
        capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "rmad a did not start:\nrmad: no such option" in out.stderr
    kept = out.stderr.split("logs are in ")[1].split("\n")[0]
    try:
        log = open(os.path.join(kept, "a.log")).read()
        assert log.count("rmad: no such option") == 3  # three tries
    finally:
        shutil.rmtree(kept, ignore_errors=True)
