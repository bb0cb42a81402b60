#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Write a string into a region another process exposed, then read it back.

usage: put.py HOST:PORT DESCRIPTOR   (the local rmad: $RMAD_SOCKET or default)
"""
import asyncio
import sys

import rma


async def main(address, descriptor):
    with rma.Client() as c:
        region = c.alloc(4096)
        remote = c.import_remote(c.peer(address), descriptor)
        view = memoryview(region)
        view[:21] = b"hello, remote memory\0"
        await c.put(region, 0, remote, 0, 21, remote_completion=True,
                    callback=lambda req, st, msg: print(
                        "%s: %s" % (msg, rma.strerror(st))),
                    user_data="put")
        await c.get(region, 100, remote, 0, 21)
        print("read back:", bytes(view[100:120]).decode())
        view.release()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: put.py HOST:PORT DESCRIPTOR")
    try:
        asyncio.run(main(sys.argv[1], sys.argv[2]))
    except rma.Error as e:
        sys.exit("put.py: %s" % e)
