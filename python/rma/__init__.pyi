# SPDX-License-Identifier: BSD-2-Clause
"""Typing stubs of the rma package (the C extension rma._rma)."""

import asyncio
from typing import (Any, AsyncIterator, Callable, ClassVar, Final,
                    Generator, Literal, Optional, Protocol, Sequence, Tuple,
                    TypeVar, Union, final, overload)

from .errors import (Error as Error, InvalidArgument as InvalidArgument,
                     ProtocolError as ProtocolError, NoMemory as NoMemory,
                     NoRegion as NoRegion, OutOfBounds as OutOfBounds,
                     BadDescriptor as BadDescriptor,
                     StaleDescriptor as StaleDescriptor, NoPeer as NoPeer,
                     Unreachable as Unreachable,
                     ConnectionReset as ConnectionReset, Timeout as Timeout,
                     Canceled as Canceled, DaemonGone as DaemonGone,
                     Limit as Limit, Permission as Permission,
                     Internal as Internal, Restarted as Restarted,
                     ClientClosed as ClientClosed)

# Names of the stub only (no such attribute at run time): private.
_U = TypeVar("_U")
_Callback = Callable[["Request", int, Any], object]
# What put() and get() take besides a Region: any object with the buffer
# protocol (PEP 688's collections.abc.Buffer, which typing has from 3.12
# only: bytes, bytearray, memoryview, array, numpy arrays, mmap).
_Buffer = Any


class _HasFileno(Protocol):
    def fileno(self) -> int: ...

OK: int
INPROGRESS: int
ERR_INVALID: int
ERR_PROTOCOL: int
ERR_VERSION: int
ERR_UNKNOWN_REQUEST: int
ERR_NO_MEMORY: int
ERR_NO_REGION: int
ERR_OUT_OF_BOUNDS: int
ERR_BAD_DESCRIPTOR: int
ERR_STALE_DESCRIPTOR: int
ERR_NO_PEER: int
ERR_UNREACHABLE: int
ERR_REJECTED: int
ERR_CONNECTION_RESET: int
ERR_TIMEOUT: int
ERR_CANCELED: int
ERR_NOT_RMAD: int
ERR_SHUTDOWN: int
ERR_LIMIT: int
ERR_PERMISSION: int
ERR_TRANSPORT: int
ERR_DAEMON_GONE: int
ERR_INTERNAL: int
ERR_RESTARTED: int


def default_socket() -> str:
    """The socket librma connects to by default."""


def strerror(status: int, /) -> str:
    """The phrase for a status ("timed out")."""


@final
class Region:
    """Memory shared with the daemon; a writable buffer (no copy)."""
    @property
    def address(self) -> int: ...
    @property
    def freed(self) -> bool: ...
    def __len__(self) -> int: ...
    def __buffer__(self, flags: int) -> memoryview: ...
    def descriptor(self) -> str: ...
    def read_only_descriptor(self) -> str:
        """A descriptor allowing gets only: puts and atomics through it
        fail with rma.Permission."""
    def free(self) -> None: ...


@final
class Peer:
    """Another host's rmad."""
    @property
    def address(self) -> str: ...
    @property
    def status(self) -> int: ...
    @property
    def detail(self) -> str: ...


@final
class Remote:
    """A remote region, resolved with its owner."""
    @property
    def peer(self) -> Peer: ...
    @property
    def length(self) -> int: ...
    def release(self) -> None: ...


_AtomicOp = Literal["add", "fetch-add", "swap", "cswap", "and", "or", "xor",
                   "fetch-and", "fetch-or", "fetch-xor"]
_Piece = Tuple[int, int, int]  # (offset, remote_offset, length)


@final
class Request:
    """One put, get, flush, atomic or vectored transfer; awaitable (an
    atomic's await gives the word's old value, the others' None)."""
    @property
    def status(self) -> int: ...
    @property
    def detail(self) -> str: ...
    @property
    def bytes(self) -> int: ...
    def done(self) -> bool: ...
    def wait(self, timeout: Optional[float] = None) -> None: ...
    def future(self) -> "asyncio.Future[Optional[int]]": ...
    @property
    def value(self) -> Optional[int]:
        """An atomic's old value once it completed with OK, else None."""
    def error(self) -> Optional[Error]: ...
    def cancel(self) -> bool:
        """Cancel if not yet sent to the daemon (then it fails with
        rma.Canceled before this returns): True; else False."""
    def __await__(self) -> Generator[Any, None, Optional[int]]: ...


@final
class Notification(Tuple[Optional[Region], int, int, int, str]):
    """What a notifying put wrote into a region of this client (a struct
    sequence, as os.stat_result)."""
    n_fields: ClassVar[int]
    n_sequence_fields: ClassVar[int]
    n_unnamed_fields: ClassVar[int]
    __match_args__: Final = ("region", "offset", "length", "value",
                             "sender")
    @property
    def region(self) -> Optional[Region]: ...
    @property
    def offset(self) -> int: ...
    @property
    def length(self) -> int: ...
    @property
    def value(self) -> int: ...
    @property
    def sender(self) -> str: ...

@final
class Client:
    """A connection to the host's rmad; a context manager."""
    def __init__(self, socket: Optional[str] = None,
                 timeout: float = 5.0) -> None: ...
    @property
    def daemon_id(self) -> Optional[str]: ...
    @property
    def in_flight(self) -> int: ...
    @property
    def reattaches(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Client": ...
    def __exit__(self, *exc: object) -> bool: ...
    def alloc(self, size: int, /) -> Region: ...
    def register(self, fd: Union[int, _HasFileno], offset: int = 0,
                 length: Optional[int] = None, /) -> Region:
        """Make [offset, offset + length) of a memfd sealed with
        F_SEAL_SHRINK (length None: the rest of the file) a region. An
        mmap.mmap raises TypeError: pass the fd it maps."""
    def peer(self, address: str, /) -> Peer: ...
    def import_remote(self, peer: Peer, descriptor: str, /) -> Remote: ...
    @overload
    def put(self, region: Region, offset: int, remote: Remote,
            remote_offset: int, length: int,
            callback: Optional[_Callback] = None, user_data: Any = None, *,
            remote_completion: bool = False,
            notify: Optional[int] = None) -> Request: ...
    @overload
    def put(self, buffer: _Buffer, remote: Remote, remote_offset: int,
            callback: Optional[_Callback] = None, user_data: Any = None, *,
            remote_completion: bool = False) -> Request:
        """All of buffer (C-contiguous), through librma's staging area:
        up to 64 KiB is copied before this returns; a bigger one is read
        (and held) until the request completes."""
    def on_notification(
            self,
            callback: Optional[Callable[[Notification], object]],
            /) -> None: ...
    def notifications(self) -> AsyncIterator[Notification]: ...
    @overload
    def get(self, region: Region, offset: int, remote: Remote,
            remote_offset: int, length: int,
            callback: Optional[_Callback] = None,
            user_data: Any = None) -> Request: ...
    @overload
    def get(self, buffer: _Buffer, remote: Remote, remote_offset: int,
            callback: Optional[_Callback] = None,
            user_data: Any = None) -> Request:
        """len(buffer) bytes into buffer (writable, C-contiguous),
        through librma's staging area; written (and held) until the
        request completes."""
    def flush(self, peer: Optional[Peer] = None,
              callback: Optional[_Callback] = None,
              user_data: Any = None) -> Request: ...
    def atomic(self, remote: Remote, offset: int, op: _AtomicOp, value: int,
               compare: Optional[int] = None, width: int = 64,
               callback: Optional[_Callback] = None,
               user_data: Any = None) -> Request: ...
    def putv(self, region: Region, remote: Remote, pieces: Sequence[_Piece],
             callback: Optional[_Callback] = None, user_data: Any = None, *,
             remote_completion: bool = False) -> Request: ...
    def getv(self, region: Region, remote: Remote, pieces: Sequence[_Piece],
             callback: Optional[_Callback] = None,
             user_data: Any = None) -> Request: ...
    def progress(self) -> None: ...
    def fileno(self) -> int: ...
