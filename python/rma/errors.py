# SPDX-License-Identifier: BSD-2-Clause
"""Exceptions of the rma package: one class per family of librma statuses.

Every exception carries ``status`` (the negative rma_status_t), ``name``
(its symbolic name, e.g. ``"RMA_ERR_TIMEOUT"``) and ``detail`` (the
daemon's or library's detail text, possibly empty).
"""


class Error(Exception):
    """Any failure reported by librma or the daemon."""

    status = -22
    name = "RMA_ERR_INTERNAL"
    detail = ""

    def __init__(self, message="", status=None, name=None, detail=""):
        super().__init__(message)
        if status is not None:
            self.status = status
        if name is not None:
            self.name = name
        self.detail = detail


class InvalidArgument(Error, ValueError):
    """A bad argument or request (RMA_ERR_INVALID)."""


class ProtocolError(Error):
    """Daemon and library disagree (PROTOCOL, VERSION, UNKNOWN_REQUEST)."""


class NoMemory(Error, MemoryError):
    """Out of memory here or in the daemon (RMA_ERR_NO_MEMORY)."""


class NoRegion(Error):
    """The region is unknown, freed or not this client's (NO_REGION)."""


class OutOfBounds(Error, IndexError):
    """offset + length lies outside a region (RMA_ERR_OUT_OF_BOUNDS)."""


class BadDescriptor(Error, ValueError):
    """A descriptor is corrupt or malformed (RMA_ERR_BAD_DESCRIPTOR)."""


class StaleDescriptor(Error):
    """The region was freed or its owner restarted (STALE_DESCRIPTOR)."""


class NoPeer(Error):
    """Unknown peer or remote (RMA_ERR_NO_PEER)."""


class Unreachable(Error, ConnectionError):
    """A peer cannot be reached or refused us (UNREACHABLE, REJECTED,
    NOT_RMAD)."""


class ConnectionReset(Error, ConnectionError):
    """A peer failed while in use (CONNECTION_RESET, TRANSPORT)."""


class Timeout(Error, TimeoutError):
    """A deadline passed (RMA_ERR_TIMEOUT)."""


class Canceled(Error):
    """The operation was canceled (RMA_ERR_CANCELED)."""


class DaemonGone(Error, ConnectionError):
    """The connection to the local daemon is closed, or the daemon is
    shutting down (DAEMON_GONE, SHUTDOWN)."""


class Restarted(Error):
    """The daemon was taken over while this was in flight; the client
    re-attached: retry it (RMA_ERR_RESTARTED)."""


class Limit(Error):
    """A per-client or per-user limit was reached (RMA_ERR_LIMIT)."""


class Permission(Error, PermissionError):
    """Not allowed (RMA_ERR_PERMISSION)."""


class ClientClosed(Error, ValueError):
    """A call on a Client after its close(), or on a Region, Peer, Remote
    or notification iterator it made (raised by the binding, no librma
    status: ``status`` is RMA_ERR_INVALID's)."""

    status = -1
    name = "RMA_ERR_INVALID"


class Internal(Error):
    """A bug in rmad or librma (RMA_ERR_INTERNAL): please report."""


# status -> class; the C extension builds every exception through _make
BY_STATUS = {
    -1: InvalidArgument, -2: ProtocolError, -3: ProtocolError,
    -4: ProtocolError, -5: NoMemory, -6: NoRegion, -7: OutOfBounds,
    -8: BadDescriptor, -9: StaleDescriptor, -10: NoPeer, -11: Unreachable,
    -12: Unreachable, -13: ConnectionReset, -14: Timeout, -15: Canceled,
    -16: Unreachable, -17: DaemonGone, -18: Limit, -19: Permission,
    -20: ConnectionReset, -21: DaemonGone, -22: Internal, -23: Restarted,
}


def _make(status, name, text, detail):
    """The exception for a status (called by the C extension)."""
    cls = BY_STATUS.get(status, Error)
    message = "%s: %s" % (text, detail) if detail else text
    return cls(message, status=status, name="RMA_" + name, detail=detail)
