#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Write a string into a region another process exposed, then read it back,
from and into the program's own objects (librma moves them through a
staging area).

usage: put.py HOST:PORT DESCRIPTOR   (the local rmad: $RMAD_SOCKET or default)
"""
import asyncio
import sys

import rma


async def main(address, descriptor):
    with rma.Client() as c:
        remote = c.import_remote(c.peer(address), descriptor)
        await c.put(b"hello, remote memory\0", remote, 0,
                    remote_completion=True,
                    callback=lambda req, st, msg: print(
                        "%s: %s" % (msg, rma.strerror(st))),
                    user_data="put")
        back = bytearray(20)
        await c.get(back, remote, 0)
        print("read back:", back.decode())


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: put.py HOST:PORT DESCRIPTOR")
    try:
        asyncio.run(main(sys.argv[1], sys.argv[2]))
    except rma.Error as e:
        sys.exit("put.py: %s" % e)
