#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Share memory this process already has: a memfd it maps itself,
registered with the local rmad as a region. Prints the region's
descriptor, then, for each of COUNT notifying puts from anywhere, the
bytes they wrote, read from its own mapping.

usage: register.py [COUNT]   (the local rmad: $RMAD_SOCKET or default)
"""
import fcntl
import mmap
import os
import select
import sys

import rma

SIZE = 1 << 20


def main(count):
    fd = os.memfd_create("shared", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, SIZE)
    # the daemon maps it too: sealed, nobody can shrink it under a write
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    data = mmap.mmap(fd, SIZE)  # this process's own mapping
    with rma.Client() as c:
        region = c.register(fd, 0, SIZE)
        os.close(fd)  # the region keeps what it needs
        print(region.descriptor(), flush=True)
        got = []
        c.on_notification(got.append)
        while len(got) < count:
            select.select([c.fileno()], [], [])
            c.progress()
        for n in got:
            text = data[n.offset:n.offset + n.length].decode()
            print("%d %d: %s" % (n.offset, n.length, text), flush=True)
    data.close()


if __name__ == "__main__":
    try:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
    except rma.Error as e:
        sys.exit("register.py: %s" % e)
