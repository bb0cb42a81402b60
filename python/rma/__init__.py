# SPDX-License-Identifier: BSD-2-Clause
"""rma: remote memory access through the host's rmad, from Python.

A thin CPython binding of librma (rma.h)::

    import asyncio, rma

    async def main():
        with rma.Client() as c:
            region = c.alloc(4096)
            memoryview(region)[:5] = b"hello"
            peer = c.peer("10.0.0.2:7300")
            remote = c.import_remote(peer, descriptor)
            await c.put(region, 0, remote, 0, 5)

    asyncio.run(main())

Requests are awaitable; the client's fd is registered with the running
loop (loop.add_reader) the first time a request is awaited, and progress
runs in the loop: no thread, no polling. The fd stays the same across
take-overs and restarts of the daemon (the client re-attaches by itself,
Client.reattaches counts it): awaits and notifications() carry on. Failures raise subclasses of
rma.Error carrying the daemon's detail.
"""

from . import errors
from .errors import (Error, InvalidArgument, ProtocolError, NoMemory,
                     NoRegion, OutOfBounds, BadDescriptor, StaleDescriptor,
                     NoPeer, Unreachable, ConnectionReset, Timeout, Canceled,
                     DaemonGone, Limit, Permission, Internal, Restarted,
                     ClientClosed)
from ._rma import (Client, Region, Peer, Remote, Request, Notification,
                   default_socket,
                   strerror)
from ._rma import *  # noqa: F401,F403 (status constants: OK, ERR_*, ...)

__all__ = [
    "Client", "Region", "Peer", "Remote", "Request", "Notification",
    "default_socket",
    "strerror", "Error", "InvalidArgument", "ProtocolError", "NoMemory",
    "NoRegion", "OutOfBounds", "BadDescriptor", "StaleDescriptor", "NoPeer",
    "Unreachable", "ConnectionReset", "Timeout", "Canceled", "DaemonGone",
    "Limit", "Permission", "Internal", "Restarted", "ClientClosed",
]
