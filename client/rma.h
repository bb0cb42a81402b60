/* SPDX-License-Identifier: BSD-2-Clause */
/**
 * @file rma.h
 * @brief librma: remote memory access through the local rmad daemon.
 *
 * A process connects to the rmad on its host, allocates regions (memory
 * shared with the daemon), hands a region's descriptor to other hosts, and
 * puts or gets bytes between its regions and regions that other processes
 * exposed, on this host or another. Every transfer is asynchronous and
 * modelled on ucxx::RequestMem: it returns a request that can be polled,
 * waited on with a timeout and checked for an error, and it can carry a
 * completion callback with user data.
 *
 * Threads: a client handle is not thread-safe. Use one rma_client_t per
 * thread, or serialize every call on a handle (its regions, remotes and
 * requests included) with your own lock. Callbacks run inside
 * rma_progress(), rma_request_wait() and the blocking wrappers, in the
 * calling thread; a callback must not call rma_disconnect().
 *
 * fork(): a client belongs to the process that connected it. In a child
 * of fork() (or of os.fork() in Python), every call on a client inherited
 * from the parent fails with RMA_ERR_INVALID and the detail "this client
 * belongs to the parent process": rma_progress(), rma_wait(), rma_poll(), every
 * transfer, atomic and flush (no request is made, no callback runs),
 * rma_request_wait() and rma_request_cancel(), rma_region_alloc(),
 * rma_region_register_fd(), rma_region_free(), rma_peer_connect(),
 * rma_remote_import(), rma_notify_next(). None of them reads, writes or reaps
 * anything of the parent's connection or shared ring, so the parent's
 * operations, before and after the fork, go on as if there were no child.
 * rma_disconnect() in the child releases only the child's copy (closes its file
 * descriptors, unmaps its regions and ring; outstanding requests of the copy
 * complete with RMA_ERR_INVALID), sending nothing; rma_remote_release()
 * likewise drops the child's handle only. The accessors (rma_last_error(),
 * rma_daemon_id(), rma_fd(), rma_in_flight(), rma_region_ptr() and the
 * other getters of handles) still answer from the copy; a region's memory
 * is the parent's shared mapping, so what the child writes there the
 * parent sees. A child that wants the daemon calls rma_connect() itself.
 * The child is told by a pthread_atfork() handler: a child made without
 * one (a raw clone(2)) is not.
 *
 * Event loops: rma_fd() is readable when the daemon has sent something;
 * call rma_progress() then (rma_wait() does both, polling the shared ring
 * first while operations are in flight; rma_poll() polls it for a
 * bounded time without sleeping, for a loop's reader). Register it once:
 * it stays the same open file for the client's life, across re-attaches.
 *
 * Shared ring: unless RMA_RING=0, the client asks the daemon at connect
 * for a ring in shared memory through which operations go and their
 * completions come back without a system call while both sides are busy
 * (the socket carries everything else and wakes a side that sleeps); a
 * daemon without one serves everything over the socket, with the same
 * results in the same order. See rma_wait() and rma(3).
 *
 * Batching: rma_put(), rma_get() and rma_flush() send their operation to
 * the daemon at once while no operation sent before is still in flight.
 * Otherwise the operation joins a batch, which goes out as one frame when
 * it holds 256 operations (fewer, when 256 would not fit in the daemon's
 * max_frame; into the shared ring at 32 already, if it has room), or else
 * at the next call that waits or talks to the daemon:
 * rma_progress(), rma_request_wait(), the _sync wrappers and every call
 * that asks the daemon something (rma_region_alloc(), rma_peer_connect()
 * ...), which send the batch first, so operations reach the daemon in the
 * order they were issued. A batch is never stranded: it exists only while
 * operations sent before it are in flight, and their completions make
 * rma_fd() readable.
 *
 * Errors: functions return RMA_OK (0) or a negative rma_status_t;
 * rma_strerror() names it and rma_last_error() gives the daemon's detail
 * for the last failed call on a handle.
 *
 * What a completed or failed operation means for the target's bytes:
 *
 * - A put that completed with RMA_OK has been applied by the target daemon
 *   (with rma_protocol = am, the default, always: the target copies, then
 *   answers; with rma_protocol = ucx, only with RMA_FLAG_REMOTE_COMPLETION
 *   or after a flush).
 * - A put refused before or by the target (RMA_ERR_INVALID, NO_REGION,
 *   OUT_OF_BOUNDS, BAD_DESCRIPTOR, STALE_DESCRIPTOR, NO_PEER, LIMIT,
 *   PERMISSION, PROTOCOL, VERSION, UNKNOWN_REQUEST) wrote nothing.
 * - A put that failed with a transport status (RMA_ERR_TIMEOUT, CANCELED,
 *   CONNECTION_RESET, UNREACHABLE, REJECTED, NOT_RMAD, TRANSPORT,
 *   SHUTDOWN, DAEMON_GONE, and NO_MEMORY or INTERNAL) may or may not have
 *   been applied. With rma_protocol = am it is applied in whole pieces:
 *   the target writes each piece with one copy once the piece has arrived.
 *   A put up to 8 KiB shares a batch message and is applied whole or not
 *   at all; one up to just under 64 KiB (a fragment of UCX's tcp
 *   transport) is one message, applied whole or not at all; a bigger one
 *   travels as pieces of equal size, so a failed one may have written
 *   some of its pieces and not others. With rma_protocol = ucx any part of
 *   the range may have been written. Either way it is never applied after a
 *   later operation from the same initiating daemon (any of its clients,
 *   any of its workers) to the same target address has completed, nor
 *   after one from the initiating daemon restarted at the same address:
 *   the target applies an operation only if it arrived on a current
 *   connection of the initiating daemon, and a new connection closes the
 *   old one at the target before anything is sent on it. A connection
 *   that fails retires its daemon's other connections to that target (one
 *   per worker) with it, and the next one closes them all; a daemon that
 *   took its predecessor's place (rmad --take-over, a restart from
 *   systemd's fd store) closes every connection its predecessor left, on
 *   any worker (those from another source address of its host: with a
 *   cluster key), with its own first. A put
 *   never lands in a region of a restarted target (its descriptors are
 *   refused as stale). So: after a failed put, put the bytes again and
 *   wait for RMA_OK; absent other writers, that is what the target keeps.
 * - While the target daemon hands its regions over (rmad --take-over, or
 *   a restart through systemd's fd store), a region whose owner has
 *   already left the old process fails with RMA_ERR_SHUTDOWN (nothing
 *   written) until the new process serves it: retry.
 *   RMA_ERR_STALE_DESCRIPTOR is final: the region was freed, or its
 *   daemon restarted without its regions.
 * - A get never changes the target. After a failed get the bytes of the
 *   local range are unspecified.
 * - A flush that completed with RMA_OK means every operation submitted to
 *   its peer before it has completed (each with its own status, which the
 *   flush does not repeat) and none of them is still on its way. A flush
 *   waiting when the connection to its peer fails or is replaced fails
 *   with that status, and fails at once while the peer is down; it never
 *   claims completion for operations lost with an old connection.
 */
#ifndef RMA_H
#define RMA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Status codes: the negated wire Status of rma.proto, 1:1. */
typedef enum rma_status {
	RMA_OK = 0,
	RMA_ERR_INVALID = -1,  /**< bad argument or request; also every call
				on a client inherited across fork() */
	RMA_ERR_PROTOCOL = -2, /**< daemon and library disagree on framing */
	RMA_ERR_VERSION = -3,  /**< protocol version mismatch */
	RMA_ERR_UNKNOWN_REQUEST =
	    -4,			/**< the daemon does not know the request */
	RMA_ERR_NO_MEMORY = -5, /**< out of memory (here or in the daemon) */
	RMA_ERR_NO_REGION = -6, /**< region unknown, freed or not yours */
	RMA_ERR_OUT_OF_BOUNDS = -7,	/**< offset + length outside a region */
	RMA_ERR_BAD_DESCRIPTOR = -8,	/**< descriptor corrupt or malformed */
	RMA_ERR_STALE_DESCRIPTOR = -9,	/**< region freed or owner restarted */
	RMA_ERR_NO_PEER = -10,		/**< unknown peer or remote */
	RMA_ERR_UNREACHABLE = -11,	/**< peer cannot be reached */
	RMA_ERR_REJECTED = -12,		/**< peer refused the connection */
	RMA_ERR_CONNECTION_RESET = -13, /**< peer failed while in use */
	RMA_ERR_TIMEOUT = -14,		/**< deadline passed */
	RMA_ERR_CANCELED = -15,		/**< operation canceled */
	RMA_ERR_NOT_RMAD = -16,	  /**< listener spoke first: not an rmad */
	RMA_ERR_SHUTDOWN = -17,	  /**< the daemon is shutting down */
	RMA_ERR_LIMIT = -18,	  /**< a client or user limit was reached */
	RMA_ERR_PERMISSION = -19, /**< not allowed */
	RMA_ERR_TRANSPORT = -20,  /**< other transport (UCX) error */
	RMA_ERR_DAEMON_GONE =
	    -21,		/**< the connection to the daemon is closed */
	RMA_ERR_INTERNAL = -22, /**< a bug: please report */
	/** The daemon was taken over (rmad --take-over), or restarted by
	 * systemd with its regions (its fd store), while this was in
	 * flight and the client re-attached (see rma_connect()): the
	 * operation or call may or may not have taken effect (a put may
	 * have landed, a get may have written part of its bytes) and is
	 * never reissued by the library (rma_region_free() excepted: it
	 * finishes the free itself). Retry it: the client, its regions,
	 * peers and remotes work again. */
	RMA_ERR_RESTARTED = -23,
	RMA_INPROGRESS = 1 /**< request not completed yet (not an error) */
} rma_status_t;

typedef struct rma_client rma_client_t;	  /**< a connection to rmad */
typedef struct rma_region rma_region_t;	  /**< memory shared with rmad */
typedef struct rma_peer rma_peer_t;	  /**< another host's rmad */
typedef struct rma_remote rma_remote_t;	  /**< a resolved remote region */
typedef struct rma_request rma_request_t; /**< one operation */

/**
 * Completion callback: runs once per request, with its final status.
 * The request stays valid during the call.
 */
typedef void (*rma_callback_t)(rma_request_t *req, rma_status_t status,
			       void *user_data);

/** Put flag: complete only once the data has reached the target memory. */
#define RMA_FLAG_REMOTE_COMPLETION 1u

/**
 * What rma_atomic() does to the remote word; old is its value before, and
 * every operation returns it (rma_request_value()). The FETCH_ names are
 * there for code written against UCX, libfabric or OpenSHMEM: here ADD and
 * FETCH_ADD (AND and FETCH_AND, ...) do the same. The values are the wire
 * AtomicOp's.
 */
typedef enum rma_atomic_op {
	RMA_ATOMIC_ADD = 0,	  /**< word += operand */
	RMA_ATOMIC_FETCH_ADD = 1, /**< word += operand */
	RMA_ATOMIC_SWAP = 2,	  /**< word = operand */
	RMA_ATOMIC_CSWAP = 3,	  /**< if (word == compare) word = operand */
	RMA_ATOMIC_AND = 4,	  /**< word &= operand */
	RMA_ATOMIC_OR = 5,	  /**< word |= operand */
	RMA_ATOMIC_XOR = 6,	  /**< word ^= operand */
	RMA_ATOMIC_FETCH_AND = 7, /**< word &= operand */
	RMA_ATOMIC_FETCH_OR = 8,  /**< word |= operand */
	RMA_ATOMIC_FETCH_XOR = 9  /**< word ^= operand */
} rma_atomic_op_t;

/**
 * Default socket: $RMAD_SOCKET if set; else the user's own daemon at
 * $XDG_RUNTIME_DIR/rmad.sock (without XDG_RUNTIME_DIR: at
 * ${TMPDIR:-/tmp}/rmad-UID/rmad.sock) if it is there; else the system
 * service's /run/rmad/rmad.sock if that is there; else the user's path.
 * The directory rmad-UID, which rmad creates, counts only while it is the
 * user's alone: a directory (not a symlink) owned by the user, mode 0700.
 */
const char *rma_default_socket(void);

/** How long a client tries to get back to a daemon that was taken over
 * (see rma_connect()); RMA_REATTACH_TIMEOUT_MS overrides it. */
#define RMA_REATTACH_TIMEOUT_DEFAULT_MS 5000

/** rma_connect()'s deadline for reaching the daemon and its answer. */
#define RMA_CONNECT_TIMEOUT_DEFAULT_MS 5000

/**
 * Connect to rmad, as rma_connect_timeout() with
 * RMA_CONNECT_TIMEOUT_DEFAULT_MS (5 s).
 */
rma_status_t rma_connect(const char *socket_path, rma_client_t **client_p);

/**
 * Connect to rmad and say hello, waiting at most @p timeout_ms in all.
 * @param socket_path  NULL for rma_default_socket().
 * @param timeout_ms   deadline for the connect and the daemon's answer to
 *                     the hello; -1 for none.
 * @param client_p     set on success; free with rma_disconnect().
 * The daemon must run as this user, as root, as the service user `rmad`
 * or as $RMAD_DAEMON_USER (a name or a uid), whatever the path: its
 * SO_PEERCRED is checked before anything is sent, since whoever serves
 * the socket hands out the memory regions are made of.
 *
 * Take-over: when the daemon closes the connection, the client connects
 * again to the same path within RMA_REATTACH_TIMEOUT_MS (default
 * RMA_REATTACH_TIMEOUT_DEFAULT_MS, 5 s) and, if the daemon there has the
 * same identity (rmad --take-over, or a restart after a crash through
 * systemd's fd store: a reset connection counts as closed), claims its
 * regions back with their
 * secret generation: every rma_region_t keeps its mapping, pointer and
 * descriptors, remote writes into it keep landing. Its peers are
 * connected and its remotes imported again; for one that cannot be, each
 * operation tries again first and, if that fails too, fails at once with
 * the status it got (rma_peer_status() says why): retry it.
 * Operations the old process could not finish complete with
 * RMA_ERR_SHUTDOWN (it gives up on them as it exits), those it never
 * answered, or still queued here, with RMA_ERR_RESTARTED, as does a call
 * waiting for its answer: retry them; none is reissued by the library.
 * rma_fd() stays the same file: an event loop that registered it once
 * (epoll included) keeps being woken; rma_on_reattach() tells the program
 * of each re-attach, rma_reattach_count() counts them. What is tried
 * again, every 10 ms until RMA_REATTACH_TIMEOUT_MS after the close was
 * seen: any failure to connect or to be answered (the socket absent,
 * ENOENT, or refusing, ECONNREFUSED, while a restarted daemon comes up; a
 * daemon not accepting yet; not a trusted daemon; a connection closed
 * before the hello was answered); and, if the new process is taken over
 * too while the regions are claimed, the whole re-attach. Not tried again:
 * a daemon that answers with another identity, or refuses the client
 * (its uid over max_clients_per_uid, not allowed, another protocol
 * version): RMA_ERR_DAEMON_GONE at once, with the daemon's reason. While it
 * tries, the call that noticed the close (rma_progress() included) blocks, up
 * to that deadline. The client notices only when it calls the library
 * (rma_progress() when rma_fd() polls readable, or any call), so it must do so
 * within the daemon's --reattach-timeout, counted from the first restart that
 * left the region unclaimed (a daemon crashing again and again does not extend
 * it), after which the regions nobody claimed are freed. Re-attach is per
 * region: one the new process does not give back (freed meanwhile, its
 * --reattach-timeout passed, dropped at a restart, or over a limit) is lost
 * alone: rma_put(), rma_get() and the other operations naming it as the local
 * region fail at once with RMA_ERR_NO_REGION, its descriptors are stale, its
 * mapping (rma_region_ptr()) stays valid memory of this process until
 * rma_region_free(), which then returns RMA_OK; the other regions are
 * back. A daemon with another identity, or no daemon within the
 * deadline: RMA_ERR_DAEMON_GONE, as always. RMA_NO_REATTACH=1 in the
 * environment at rma_connect() keeps that behaviour at every close (no
 * re-attach is tried). On failure rma_last_error(NULL) gives the detail.
 * @return RMA_OK,
 *         RMA_ERR_INVALID (@p client_p NULL, or the path is empty or too
 *         long for a Unix socket),
 *         RMA_ERR_DAEMON_GONE (nothing listens at the socket, or it
 *         closed the connection before answering),
 *         RMA_ERR_LIMIT (this user already holds the daemon's
 *         max_clients_per_uid connections),
 *         RMA_ERR_PERMISSION (the daemon refused this user; or the socket
 *         is served by another user, or lies in a per-user directory that
 *         is not this user's alone),
 *         RMA_ERR_TIMEOUT (no connection or no answer within
 *         @p timeout_ms: the daemon is stopped, overloaded or not
 *         accepting, or what listens there is not an rmad),
 *         RMA_ERR_VERSION (the daemon speaks another protocol version),
 *         RMA_ERR_PROTOCOL (the answer was not an rmad's hello reply),
 *         RMA_ERR_NO_MEMORY (no memory, or no file descriptor, here),
 *         RMA_ERR_INTERNAL (a socket option or flag could not be set).
 */
rma_status_t rma_connect_timeout(const char *socket_path, int timeout_ms,
				 rma_client_t **client_p);

/**
 * Close the connection. Also the way back after the daemon went away
 * (RMA_ERR_DAEMON_GONE, e.g. it was restarted): rma_disconnect() the old
 * handle and rma_connect() again. Nothing carries over: regions, peers and
 * remotes belong to one connection, a daemon restarted without its
 * regions (a stop and a start, or a crash outside systemd) has a new
 * identity,
 * and descriptors of the old regions are refused everywhere as stale.
 * Allocate and export new regions.
 *
 * Outstanding requests complete with
 * RMA_ERR_DAEMON_GONE (callbacks run), regions are unmapped here and freed
 * by the daemon, and every handle of this client becomes invalid except
 * requests the caller still holds, which must be released.
 *
 * In a child of fork() on a client the parent connected, only the child's
 * copy is released: its file descriptors are closed and its mappings
 * unmapped, its outstanding requests complete with RMA_ERR_INVALID
 * (callbacks run), and nothing reaches the daemon, whose connection and
 * regions stay the parent's (see fork() above).
 */
void rma_disconnect(rma_client_t *client);

/**
 * Text of the daemon's or library's detail for the last failure on
 * @p client ("" if none). With NULL: the detail of the last failed
 * rma_connect() in the calling thread.
 */
const char *rma_last_error(const rma_client_t *client);

/** Name of a status. Never NULL. */
const char *rma_strerror(rma_status_t status);

/** Identity of the connected daemon (changes with every start). */
const char *rma_daemon_id(const rma_client_t *client);

/**
 * The daemon's state as `rmactl status` shows it (clients, regions, peers,
 * operations in flight, counters): one rma.v1.StatusReply message of
 * proto/rma.proto, packed. Fields are only ever added to it, so a reader
 * built from an older rma.proto keeps reading what it knows.
 * @param status_p receives a malloc()ed buffer with the message, which
 *        the caller frees with free(); set only on RMA_OK.
 * @param len_p receives its length in bytes; set only on RMA_OK.
 * @return RMA_OK, RMA_ERR_INVALID (an argument NULL; a client of the
 *         parent of fork()), RMA_ERR_PROTOCOL (the reply was no status),
 *         RMA_ERR_NO_MEMORY, RMA_ERR_TIMEOUT (no reply within 30 s),
 *         RMA_ERR_DAEMON_GONE, RMA_ERR_RESTARTED (the daemon was taken
 *         over meanwhile: ask again).
 */
rma_status_t rma_daemon_status(rma_client_t *client, void **status_p,
			       size_t *len_p);

/**
 * Allocate a zeroed region of @p length bytes, shared with the daemon.
 * @return RMA_OK, RMA_ERR_INVALID (length 0), RMA_ERR_LIMIT (the
 *         client's max_regions or max_region_bytes, or its user's
 *         max_regions_per_uid or max_region_bytes_per_uid over all its
 *         connections), RMA_ERR_NO_MEMORY, RMA_ERR_DAEMON_GONE.
 */
rma_status_t rma_region_alloc(rma_client_t *client, size_t length,
			      rma_region_t **region_p);

/**
 * Make memory the application already shares a region: [@p offset,
 * @p offset + @p length) of the memory file @p fd, which the daemon maps
 * too. From then on it is a region like any other: descriptors (the
 * read-only one too), puts, gets, atomics and notifications into it from
 * this host or others, rma_region_ptr(), rma_region_free(); it counts
 * against the same per-client limits as rma_region_alloc() (max_regions,
 * max_region_bytes); `rmactl status` lists it with KIND "fd" (in its
 * --json, "registered": true).
 *
 * What @p fd must be, so that its owner cannot crash the daemon (a
 * write into a mapped page past the end of a file is SIGBUS):
 * - a memory file: a regular file on tmpfs or hugetlbfs, which in
 *   practice is memfd_create(name, MFD_ALLOW_SEALING) (with MFD_HUGETLB
 *   for huge pages), sized with ftruncate() and sealed with
 *   fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) before this call. Without the
 *   seal it is refused. A POSIX shared-memory object (shm_open()) or any
 *   other tmpfs file cannot be sealed on Linux (they are born with
 *   F_SEAL_SEAL) and is refused: use a memfd, and share that with other
 *   processes by passing its fd or through /proc/PID/fd. Sockets, pipes,
 *   directories, devices (/dev/zero too), files on /proc, /sys, NFS or
 *   any disk filesystem are refused.
 * - open for reading and writing (a memfd is): a region is written by
 *   gets and by other hosts' puts. An fd opened read-only is refused
 *   with RMA_ERR_PERMISSION; to let others only read, hand out
 *   rma_region_read_only_descriptor().
 * - @p offset a multiple of the page size, @p length > 0, and the range
 *   within the file's size at the call. On hugetlbfs, offset and length
 *   are multiples of the huge page size, and the daemon adds
 *   F_SEAL_FUTURE_WRITE once it has mapped the file: mappings that exist
 *   keep writing, but no new writable mapping, write(2) or hole punch
 *   is allowed from then on (a punched hole would need a fresh huge page
 *   from a pool that may be empty: SIGBUS). The daemon then faults in
 *   every huge page of the range, so they are taken from the pool at
 *   this call; if one cannot be had (a hole punched during the call and
 *   the pool empty) the call fails with RMA_ERR_NO_MEMORY. Map it
 *   before this call.
 *
 * The seal means the owner can never shrink the file: ftruncate() to a
 * smaller size fails with EPERM, for the owner and everybody else,
 * whether or not the region is still registered. Growing it is allowed
 * and changes nothing for the region. Punching a hole into a memfd
 * (fallocate(FALLOC_FL_PUNCH_HOLE)) is not prevented: the hole reads as
 * zeroes afterwards, here and for every host that gets from it.
 *
 * The library maps the range itself (rma_region_ptr() is that mapping,
 * MAP_SHARED, unmapped by rma_region_free()); the caller's own mappings
 * of the file see the same bytes and stay the caller's. @p fd stays the
 * caller's: it may be closed as soon as this returns (the daemon and
 * the library keep their own references).
 *
 * A registered region does not survive a take-over or a restart of the
 * daemon (rma_connect()). A successor adopts only memfds sealed as rmad
 * seals its own (F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_SEAL, the region
 * the whole file), which an application's file need not be; the records
 * that carry regions to a successor (the hand-over and systemd's fd
 * store) have no offset into a file; and on hugetlbfs the
 * F_SEAL_FUTURE_WRITE the daemon added forbids the successor the
 * writable mapping it would need. So neither keeps it, and its id is
 * given to no other region. After one, the client's re-attach leaves it
 * out: operations
 * naming it fail with RMA_ERR_NO_REGION, its descriptors are refused as
 * stale, and its memory (the caller's file) stays as it was. Register
 * it again.
 * @param fd the memory file; not consumed.
 * @param offset where the region starts in the file.
 * @param length bytes of the region.
 * @param region_p receives the region; set only on RMA_OK.
 * @return RMA_OK; RMA_ERR_INVALID (NULL argument, length 0, an fd that is
 *         not open or not a sealed memory file, a misaligned offset; the
 *         detail says which and what to do; the connection goes on);
 *         RMA_ERR_PERMISSION (fd not open read-write, or the file sealed
 *         against writes); RMA_ERR_OUT_OF_BOUNDS (range past the end of
 *         the file); RMA_ERR_LIMIT (the client's max_regions or
 *         max_region_bytes, or its user's max_regions_per_uid or
 *         max_region_bytes_per_uid); RMA_ERR_NO_MEMORY; RMA_ERR_SHUTDOWN (the
 *         daemon is handing over); RMA_ERR_TIMEOUT; RMA_ERR_DAEMON_GONE.
 */
rma_status_t rma_region_register_fd(rma_client_t *client, int fd,
				    uint64_t offset, size_t length,
				    rma_region_t **region_p);

/** Local address of the region's memory, valid until the region is freed;
 * NULL once it is. */
void *rma_region_ptr(const rma_region_t *region);
/** Length of the region, as asked of rma_region_alloc(); 0 once freed. */
size_t rma_region_length(const rma_region_t *region);

/** The printable descriptor to hand to other hosts (NUL-terminated, owned by
 * the region, valid until the region is freed; "" once it is). */
const char *rma_region_descriptor(const rma_region_t *region);

/**
 * A second descriptor of the same region that allows gets only (owned and
 * valid as rma_region_descriptor()'s; "" once freed). It carries another
 * secret than the full descriptor, which the owning daemon knows grants
 * reads: a put or atomic through it completes with RMA_ERR_PERMISSION,
 * refused by the owner (on this host, by this daemon) with nothing
 * written, and it cannot be turned into the full descriptor (editing its
 * prefix fails its checksum; recomputing the checksum still carries the
 * read-only secret). Text: "rmar:" then hex, as long as a full one.
 */
const char *rma_region_read_only_descriptor(const rma_region_t *region);

/**
 * Free a region: the daemon releases it once its in-flight operations are
 * done. The local mapping goes at once, whatever the result.
 *
 * The handle itself stays valid, as a freed region, until
 * rma_disconnect() (it keeps about a hundred bytes until then; handles
 * are never reused): rma_region_ptr() gives NULL, rma_region_length() 0,
 * rma_region_descriptor() "", rma_put() and rma_get() naming it fail at
 * once with RMA_ERR_NO_REGION, and so does rma_region_free() again.
 * Operations from other hosts naming its descriptor fail with
 * RMA_ERR_STALE_DESCRIPTOR.
 *
 * A take-over or a restart (see rma_connect()) while the free is asked
 * does not leave the region alive: the client re-attaches its other
 * regions, then frees this one in the new process with its secret (it
 * is an orphan there until then) or finds it already freed, all within
 * RMA_REATTACH_TIMEOUT_MS, and returns RMA_OK.
 * @return RMA_OK (a region lost at a re-attach included); RMA_ERR_INVALID
 *         (NULL, or a region of another client) or RMA_ERR_NO_REGION
 *         (already freed), which change nothing; or the daemon's failure
 *         (RMA_ERR_TIMEOUT: no answer within 30 s; RMA_ERR_DAEMON_GONE,
 *         also when the client could not get back after a take-over;
 *         RMA_ERR_RESTARTED only with RMA_NO_REATTACH=1, when the daemon
 *         was handing its regions over: the next process frees it after
 *         its --reattach-timeout), after which the handle is a freed
 *         region all the same and the daemon frees the region with the
 *         connection at the latest.
 */
rma_status_t rma_region_free(rma_client_t *client, rma_region_t *region);

/**
 * Connect the daemon to the rmad listening at "host:port" (or reuse its
 * connection). Blocks until the peer answered or the daemon's connect
 * deadline passed. The handle belongs to the client, is the same for every
 * connect to the same peer, and lives until rma_disconnect().
 * @return RMA_OK, RMA_ERR_INVALID (bad address), RMA_ERR_UNREACHABLE,
 *         RMA_ERR_REJECTED, RMA_ERR_NOT_RMAD, RMA_ERR_TIMEOUT,
 *         RMA_ERR_SHUTDOWN (the daemon is shutting down or handing over:
 *         it dials nobody; connect again once the client re-attached),
 *         RMA_ERR_DAEMON_GONE.
 */
rma_status_t rma_peer_connect(rma_client_t *client, const char *address,
			      rma_peer_t **peer_p);

/**
 * The peer's state as the daemon last reported it (events arrive during
 * rma_progress() and waits, to clients holding remotes on the peer):
 * RMA_OK while it is up, else the status it failed with. The daemon
 * reconnects on its own when operations need the peer again.
 */
rma_status_t rma_peer_status(const rma_peer_t *peer);

/** The daemon's detail for the peer's last failure ("" if none). */
const char *rma_peer_detail(const rma_peer_t *peer);

/** Longest descriptor text rma_remote_import() takes, whitespace around it
 * included (a descriptor is under 100 bytes). */
#define RMA_DESCRIPTOR_MAX 1024

/**
 * Resolve a descriptor with its owning daemon through @p peer. Only the
 * owner's answer is trusted for bounds.
 * @return RMA_OK, RMA_ERR_BAD_DESCRIPTOR (malformed or corrupt; one over
 *         RMA_DESCRIPTOR_MAX bytes is refused without asking the daemon;
 *         or @p peer is not the descriptor's owner: "wrong peer", with
 *         the owner's address when the daemon knows it),
 *         RMA_ERR_STALE_DESCRIPTOR (region freed, or the owner at
 *         @p peer restarted), RMA_ERR_NO_PEER, peer failures,
 *         RMA_ERR_SHUTDOWN (this client's daemon is shutting down or
 *         handing over), RMA_ERR_DAEMON_GONE. An import asked while the
 *         owner hands its regions over is answered by the new process.
 */
rma_status_t rma_remote_import(rma_client_t *client, rma_peer_t *peer,
			       const char *descriptor, rma_remote_t **remote_p);

/** Length of the remote region, as its owner answered. */
uint64_t rma_remote_length(const rma_remote_t *remote);

/**
 * Forget a remote (and tell the daemon). Operations already submitted on it
 * are not affected: an rma_put_buf() or rma_get_buf() whose pieces still
 * wait for staging room keeps the remote until its last piece is issued,
 * and the daemon hears of the release then (@p remote is invalid for the
 * caller at once either way). A failure only shows in rma_last_error().
 */
void rma_remote_release(rma_client_t *client, rma_remote_t *remote);

/**
 * Start a put of @p length bytes from @p region at @p offset to @p remote
 * at @p remote_offset. Completion means the local bytes may be reused; with
 * RMA_FLAG_REMOTE_COMPLETION (and always with rma_protocol = am) it means
 * the target has applied the data. A put that failed with a transport
 * status may still have been applied, but never after a later operation
 * of this client to the same target completed (see the file comment).
 *
 * @param cb         optional completion callback.
 * @param user_data  passed to @p cb; must live until it runs.
 * @param req_p      if not NULL, receives the request, which the caller
 *                   must rma_request_release(); if NULL the library
 *                   releases it after the callback.
 * @return RMA_OK when submitted: sent, or queued in a batch (see
 *         "Batching" in the file comment); errors found by the daemon,
 *         such as RMA_ERR_OUT_OF_BOUNDS, arrive as the request's status.
 *         Or an error when nothing was submitted: RMA_ERR_INVALID (NULL
 *         region or remote, one of another client, unknown flags, or
 *         @p length 0: an empty transfer is refused, not completed),
 *         RMA_ERR_NO_MEMORY, RMA_ERR_DAEMON_GONE (the daemon was found
 *         gone while this very call sent the batch; see below for one
 *         known gone before).
 *
 * Immediate completion: an operation the library can decide without the
 * daemon returns RMA_OK with the request already completed: @p cb has
 * run, in the caller's thread, before rma_put() returns (as
 * ucxx::RequestMem completes requests that finish at once), nothing went
 * to the daemon, and rma_last_error() has the detail. These are:
 *  - a range the library can tell is outside @p region or outside the
 *    remote region's length as its owner resolved it:
 *    RMA_ERR_OUT_OF_BOUNDS;
 *  - @p region already freed (rma_region_free()): RMA_ERR_NO_REGION;
 *  - a daemon already known gone (the connection failed earlier, the
 *    daemon died or shut down): RMA_ERR_DAEMON_GONE. The callbacks of
 *    requests sent before it, which complete with RMA_ERR_DAEMON_GONE
 *    too, run at the next rma_progress(): possibly after this one's.
 * Arguments that are wrong whatever the regions hold (NULL, foreign
 * handles, length 0, unknown flags) and a remote to import again after a
 * take-over are returned as errors, with no request, as listed above.
 */
rma_status_t rma_put(rma_client_t *client, rma_region_t *region,
		     uint64_t offset, rma_remote_t *remote,
		     uint64_t remote_offset, uint64_t length, unsigned flags,
		     rma_callback_t cb, void *user_data, rma_request_t **req_p);

/** Start a get from @p remote into @p region; as rma_put(). */
rma_status_t rma_get(rma_client_t *client, rma_region_t *region,
		     uint64_t offset, rma_remote_t *remote,
		     uint64_t remote_offset, uint64_t length, rma_callback_t cb,
		     void *user_data, rma_request_t **req_p);

/** Largest put that rma_put_buf() copies before it returns. */
#define RMA_BUF_COPY_MAX 65536

/**
 * Start a put of @p len bytes from any memory of this process at @p buf
 * (the stack, malloc(), a mapped file, another library's buffer) to
 * @p remote at @p remote_offset. The daemon cannot read private memory,
 * so the library moves the bytes through a staging area of its own: a
 * region (see rma_region_alloc()) that it allocates at the first
 * rma_put_buf() or rma_get_buf() of the client, which therefore waits
 * for the daemon's answer (and may run callbacks, as any call that asks
 * the daemon something). Its size is RMA_STAGING_SIZE bytes from the
 * environment at that first call (a number, or with K, M or G; 256K to
 * 1G; default 16M; anything else fails the call with RMA_ERR_INVALID),
 * and a sixteenth more (at most 256 KiB) for transfers of up to 256
 * bytes, which keep to a ring of their own so that a stream of them
 * stays in the caches; it
 * counts against the daemon's per-client limits (max_regions,
 * max_region_bytes) as any region, shows in `rmactl status`, survives a
 * take-over or a restart as regions do, and lives until rma_disconnect().
 *
 * A transfer travels in pieces of a quarter of the area, at most 1 MiB
 * (64 KiB to 1 MiB), each an ordinary put of the staging region (see
 * rma_put() for what completion and failure mean); the pieces of a big
 * transfer flow through the area, the next copied in while the ones
 * before it are on the wire, as completions give room back (the library
 * drives them from rma_progress() and the waits). The request completes
 * once every piece has: with RMA_OK, or with the first failure of a
 * piece (its detail in rma_request_detail(); no piece is issued after a
 * failure, those in flight complete unseen). rma_request_bytes() gives
 * the bytes of the pieces that worked. rma_in_flight() counts a
 * transfer's pieces in flight.
 *
 * When the area is full, or other transfers wait for it, the transfer
 * waits in a queue, in the order of the calls, and goes on as pieces
 * complete: that is not an error. At most 4096 transfers wait, holding
 * at most 64 MiB of copies of small puts; one more is refused with
 * RMA_ERR_LIMIT (nothing submitted): make progress, then retry. The
 * queue keeps the order of the buffer transfers (and of rma_flush(),
 * which waits in it behind them), not their order with the operations
 * that need no staging: an rma_put(), rma_get() or rma_atomic() called
 * after a transfer that waits reaches the daemon before that transfer's
 * waiting pieces.
 *
 * The buffer: a put of at most RMA_BUF_COPY_MAX (64 KiB) bytes is copied
 * before rma_put_buf() returns (into the area, or into memory of the
 * library while it waits): the caller may reuse or free @p buf at once.
 * A bigger one is read until the request completes: @p buf must stay
 * valid and unchanged until then (rma_request_is_completed(), or the
 * callback). rma_request_cancel() works as for rma_putv(): pieces not
 * issued yet are dropped (the request then completes with
 * RMA_ERR_CANCELED once those in flight are done; it may have written
 * some pieces).
 *
 * fork(): as every transfer (see the file comment); the area is the
 * parent's in the child.
 *
 * @return as rma_put(): RMA_OK when submitted (or queued); RMA_OK with
 *         the request already completed for a remote range outside the
 *         remote region (RMA_ERR_OUT_OF_BOUNDS) or a daemon known gone
 *         (see "Immediate completion" at rma_put()). Errors with nothing
 *         submitted: RMA_ERR_INVALID (NULL @p buf or remote, a remote of
 *         another client, @p len 0, unknown flags, a bad
 *         RMA_STAGING_SIZE), RMA_ERR_LIMIT (the queue is full, or the
 *         daemon refused the staging area: its limits), RMA_ERR_NO_MEMORY,
 *         RMA_ERR_DAEMON_GONE, and at the first call what
 *         rma_region_alloc() returns.
 */
rma_status_t rma_put_buf(rma_client_t *client, const void *buf, size_t len,
			 rma_remote_t *remote, uint64_t remote_offset,
			 unsigned flags, rma_callback_t cb, void *user_data,
			 rma_request_t **req_p);

/**
 * Start a get of @p len bytes from @p remote at @p remote_offset into any
 * memory of this process at @p buf, through the staging area, as
 * rma_put_buf(). Each piece is copied from the area into @p buf when its
 * get completed with RMA_OK, before the request completes: once it has
 * completed with RMA_OK, @p buf holds the bytes. @p buf must stay valid
 * until the request completes (the library writes it until then, and
 * never after).
 *
 * A failed get (a failure, RMA_ERR_CANCELED included) leaves @p buf in
 * pieces: each piece (the range [k * P, (k + 1) * P) of @p buf, P the
 * piece size above, 64 KiB to 1 MiB) whose get worked holds the
 * remote's bytes, the others what they held before, untouched. So
 * pieces before the failure may have landed, and after it too (those
 * already in flight).
 * @return as rma_put_buf().
 */
rma_status_t rma_get_buf(rma_client_t *client, void *buf, size_t len,
			 rma_remote_t *remote, uint64_t remote_offset,
			 rma_callback_t cb, void *user_data,
			 rma_request_t **req_p);

/**
 * Blocking rma_put_buf(): waits up to @p timeout_ms (-1: no limit) and
 * returns the final status. On RMA_ERR_TIMEOUT the transfer is canceled
 * (rma_request_cancel()) and the library reads @p buf no more: pieces in
 * flight may still land.
 */
rma_status_t rma_put_buf_sync(rma_client_t *client, const void *buf, size_t len,
			      rma_remote_t *remote, uint64_t remote_offset,
			      unsigned flags, int timeout_ms);

/**
 * Blocking rma_get_buf(). On RMA_ERR_TIMEOUT the transfer is canceled and
 * the library writes @p buf no more, whatever its pieces in flight do:
 * @p buf is the caller's again (its bytes as a failed get leaves them).
 */
rma_status_t rma_get_buf_sync(rma_client_t *client, void *buf, size_t len,
			      rma_remote_t *remote, uint64_t remote_offset,
			      int timeout_ms);

/**
 * Start a flush: completes when everything issued before it to @p peer
 * (every peer if NULL) is complete at the target, or has failed with its
 * own status. Fails if the connection to a peer fails or is replaced while
 * it waits (see "What a completed or failed operation means" above).
 * Transfers of rma_put_buf() and rma_get_buf() called before it count as
 * issued though some of their pieces still wait for staging room: the
 * flush then waits in that queue behind them (whatever their peer), so
 * it covers their last pieces too; it counts as one of the 4096 that
 * may wait (RMA_ERR_LIMIT past them).
 */
rma_status_t rma_flush(rma_client_t *client, rma_peer_t *peer,
		       rma_callback_t cb, void *user_data,
		       rma_request_t **req_p);

/**
 * Start an atomic operation on the naturally aligned @p width-byte word
 * (4 or 8) at @p remote_offset of @p remote. The owning daemon applies it
 * with the CPU's atomic instructions on the region's memory (sequentially
 * consistent), so it is atomic with respect to every other rma_atomic(),
 * from any host, and to the owning process's own __atomic operations on
 * its mapping of the word; plain puts and gets of the word are not
 * ordered with it. On success rma_request_value() gives the word's old
 * value (zero-extended for width 4; for CSWAP: equal to @p compare when
 * the swap happened). Operands of width 4 use their low 32 bits.
 * Atomics travel as rmad's own messages in both rma_protocol modes: a
 * completed atomic has been applied at the target.
 *
 * @param compare  CSWAP's expected value; ignored by the others.
 * @return as rma_put(): RMA_OK when submitted (the request then completes
 *         with RMA_OK, or RMA_ERR_PERMISSION through a read-only
 *         descriptor, RMA_ERR_STALE_DESCRIPTOR, peer failures...); RMA_OK
 *         with the request already completed (see "Immediate completion"
 *         at rma_put()) with RMA_ERR_INVALID when @p remote_offset is not
 *         a multiple of @p width, or RMA_ERR_OUT_OF_BOUNDS when the word
 *         is not inside the remote region, or RMA_ERR_DAEMON_GONE when
 *         the daemon is already known gone; nothing is touched either
 *         way. RMA_ERR_INVALID (NULL or foreign remote, width not 4 or 8,
 *         unknown op), RMA_ERR_NO_MEMORY, RMA_ERR_DAEMON_GONE (found gone
 *         while this call sent the batch) when nothing was submitted.
 */
rma_status_t rma_atomic(rma_client_t *client, rma_remote_t *remote,
			uint64_t remote_offset, rma_atomic_op_t op,
			unsigned width, uint64_t operand, uint64_t compare,
			rma_callback_t cb, void *user_data,
			rma_request_t **req_p);

/** Blocking atomic: rma_atomic() + rma_request_wait(); on RMA_OK the word's
 * old value goes to @p old_p (if not NULL). */
rma_status_t rma_atomic_sync(rma_client_t *client, rma_remote_t *remote,
			     uint64_t remote_offset, rma_atomic_op_t op,
			     unsigned width, uint64_t operand, uint64_t compare,
			     uint64_t *old_p, int timeout_ms);

/** One piece of a vectored transfer: bytes at @p offset of the local
 * region and at @p remote_offset of the remote region. */
typedef struct rma_iov {
	uint64_t offset;
	uint64_t remote_offset;
	uint64_t length;
} rma_iov_t;

/** Most pieces one vectored transfer takes. */
#define RMA_IOV_MAX 1024

/**
 * Start a vectored put: the @p n pieces of @p iov from @p region to
 * @p remote, as one request with one completion. The pieces go to the
 * daemon in one frame, and the daemon sends those of up to 8 KiB to the
 * target in one message (bigger ones travel alone); they may be applied
 * in any order, each whole (as rma_put()'s). The request completes once
 * every piece has, with RMA_OK or the first failure of a piece (its
 * detail in rma_request_detail(); the other pieces may still have been
 * applied), and rma_request_bytes() gives the bytes of the pieces that
 * succeeded. Every piece is checked before any is sent: one outside
 * either region completes the request at once with RMA_ERR_OUT_OF_BOUNDS
 * and nothing moves; so do a freed @p region (RMA_ERR_NO_REGION) and a
 * daemon known gone (RMA_ERR_DAEMON_GONE): see "Immediate completion" at
 * rma_put().
 * rma_request_cancel() cancels the pieces still in the library's batch
 * and asks the daemon for those parked there: the request then completes
 * with RMA_ERR_CANCELED once the others are done.
 * @param flags  RMA_FLAG_REMOTE_COMPLETION applies to every piece.
 * @return as rma_put(); also RMA_ERR_INVALID for @p n 0 or over
 *         RMA_IOV_MAX, or a piece of length 0.
 */
rma_status_t rma_putv(rma_client_t *client, rma_region_t *region,
		      rma_remote_t *remote, const rma_iov_t *iov, size_t n,
		      unsigned flags, rma_callback_t cb, void *user_data,
		      rma_request_t **req_p);

/** Start a vectored get into @p region; as rma_putv(). */
rma_status_t rma_getv(rma_client_t *client, rma_region_t *region,
		      rma_remote_t *remote, const rma_iov_t *iov, size_t n,
		      rma_callback_t cb, void *user_data,
		      rma_request_t **req_p);

/** Nonzero once the request completed (successfully or not). */
int rma_request_is_completed(const rma_request_t *req);

/** RMA_INPROGRESS, or the final status. */
rma_status_t rma_request_status(const rma_request_t *req);

/** Bytes moved by a completed request (an atomic's: its width). */
uint64_t rma_request_bytes(const rma_request_t *req);

/** An atomic's result: the word's old value once the request completed
 * with RMA_OK; 0 otherwise, and for puts, gets and flushes. */
uint64_t rma_request_value(const rma_request_t *req);

/** Daemon's detail for a failed request ("" if none). */
const char *rma_request_detail(const rma_request_t *req);

/**
 * Wait until @p req completes or @p timeout_ms passes (-1: no limit),
 * making progress meanwhile (other callbacks may run).
 * @return the request's final status, or RMA_ERR_TIMEOUT if still in
 *         progress (the request stays valid and may complete later).
 */
rma_status_t rma_request_wait(rma_client_t *client, rma_request_t *req,
			      int timeout_ms);

/**
 * Cancel an operation. What happens depends on where it is:
 *  - still in the library's batch (see "Batching"): it completes at once
 *    with RMA_ERR_CANCELED, its callback runs before this returns, and
 *    the daemon never hears of it; returns RMA_OK. A flush, put, get or
 *    atomic alike.
 *  - sent, and parked in the daemon (a put, get or atomic waiting for its
 *    peer to reconnect, or for the remote region to be confirmed again
 *    after a reconnect): the daemon is asked to take it back and does so
 *    as soon as it reads the request: it completes with RMA_ERR_CANCELED
 *    (at the next rma_progress() that reads it) and never reaches the
 *    target; returns RMA_INPROGRESS.
 *  - sent, and on the wire or done (the daemon started it; with
 *    rma_protocol = am a put may be at the target already): not canceled.
 *    It completes with its own status, which says what happened; returns
 *    RMA_INPROGRESS.
 * A vectored request: the pieces in the batch are canceled here, those
 * parked in the daemon there; it completes with RMA_ERR_CANCELED once
 * the others are done.
 * @return RMA_OK (canceled), RMA_INPROGRESS (sent: canceled only if the
 *         daemon still held it, the completion says), RMA_ERR_INVALID
 *         (NULL, another client's, or already completed).
 */
rma_status_t rma_request_cancel(rma_client_t *client, rma_request_t *req);

/**
 * Release a request obtained through req_p; an in-flight one is detached
 * and completes unseen (its callback, if any, still runs).
 */
void rma_request_release(rma_request_t *req);

/**
 * File descriptor to poll for readability (poll(), epoll, an event
 * loop's reader), then call rma_progress(). It is the same open file for
 * the client's life, across every re-attach (an epoll instance of the
 * library's own, holding the connection to the daemon, which also carries
 * the shared ring's wake-ups): register it once. Readable while the daemon
 * has sent something not yet handled, and for good once the client is
 * gone (rma_progress() then returns RMA_ERR_DAEMON_GONE). Owned by the
 * client: do not read or close it; rma_disconnect() closes it.
 * @return the fd, or -1 if @p client is NULL.
 */
int rma_fd(const rma_client_t *client);

/**
 * Re-attach callback: the client got back to its daemon after a
 * take-over or a restart (see rma_connect()); @p count is
 * rma_reattach_count(), this one included.
 */
typedef void (*rma_reattach_callback_t)(rma_client_t *client, uint64_t count,
					void *user_data);

/**
 * Call @p cb (NULL: none) with @p user_data at each re-attach, once its
 * regions, peers and remotes are back and the requests it cut completed
 * (RMA_ERR_RESTARTED or RMA_ERR_SHUTDOWN, their callbacks run first). It
 * runs where completion callbacks run, in the call that noticed the
 * close; it may make any call but rma_disconnect(). Nothing is needed of
 * an event loop (rma_fd() stays the same): it is there to retry what
 * failed with RMA_ERR_RESTARTED, or to log.
 * @return RMA_OK, or RMA_ERR_INVALID if @p client is NULL.
 */
rma_status_t rma_on_reattach(rma_client_t *client, rma_reattach_callback_t cb,
			     void *user_data);

/**
 * Number of re-attaches the client made since rma_connect(); a failed one
 * (the daemon gone for good) does not count.
 * @return the count, 0 if @p client is NULL.
 */
uint64_t rma_reattach_count(const rma_client_t *client);

/**
 * Send coalesced submissions and handle whatever the daemon sent, without
 * blocking; runs completion callbacks.
 * @return RMA_OK, or RMA_ERR_DAEMON_GONE once the daemon is gone (every
 *         outstanding request has then completed with that status).
 */
rma_status_t rma_progress(rma_client_t *client);

/**
 * rma_progress(), and if nothing completed and no event came, wait for
 * something up to @p timeout_ms (< 0: no limit), then rma_progress()
 * again. With the shared ring (the default, see RMA_RING) it first
 * polls the ring while operations are in flight, for RMA_RING_SPIN_US
 * microseconds (default 100) after the last completion, then sleeps on
 * rma_fd(): the lowest latency an event loop gets is through this call
 * rather than its own poll() of rma_fd(), which always works too.
 * Environment: RMA_RING=0 asks for no ring (the socket alone, as with a
 * daemon that has none); RMA_RING_SPIN_US sets the spin (0: sleep at
 * once; longer: lower latency under sparse traffic, more CPU).
 * @return RMA_OK, RMA_ERR_TIMEOUT when nothing came in time, or
 *         RMA_ERR_DAEMON_GONE (every outstanding request has then
 *         completed with that status).
 */
rma_status_t rma_wait(rma_client_t *client, int timeout_ms);

/**
 * rma_progress(), and if nothing completed and no event came, poll the
 * shared ring for something to come, for at most @p spin_us
 * microseconds (< 0: RMA_RING_SPIN_US, default 100), then handle it.
 * Never sleeps in the kernel: it is for an event loop's reader of
 * rma_fd(), which may call it again while it returns RMA_OK, to keep
 * taking completions that come a few microseconds apart (and run the
 * work they unblock between calls) instead of going back to its poll
 * at once; the caller bounds how long it keeps doing so. The spin runs
 * only while operations are in flight and the client has a ring (a
 * client without one, RMA_RING=0 or a daemon without rings, or with
 * nothing in flight, gets rma_progress() alone), and it ends early when
 * the socket turns readable or another process waits for this CPU. On
 * return the daemon wakes rma_fd() again, as after rma_progress().
 * @return RMA_OK if a completion, notification or event was handled,
 *         RMA_ERR_TIMEOUT if nothing came (the loop may sleep on
 *         rma_fd()), RMA_ERR_DAEMON_GONE (every outstanding request has
 *         then completed with that status), or RMA_ERR_INVALID if
 *         @p client is NULL or belongs to the parent process (fork()).
 */
rma_status_t rma_poll(rma_client_t *client, int spin_us);

/** Number of requests submitted and not yet completed. */
size_t rma_in_flight(const rma_client_t *client);

/**
 * A put that notifies the owner of the remote region: as rma_put(), and
 * once the bytes are in the region, the client that owns it receives an
 * rma_notification_t (its callback, see rma_notify_callback(), or
 * rma_notify_next()) with the region, @p remote_offset, @p length,
 * @p value and this daemon's id. Never before the bytes are visible
 * there; the notifications of the puts of one daemon arrive in the order
 * the puts were applied. With rma_protocol = ucx these puts still go
 * through rmad's own messages (only the target daemon can tell the
 * owner), so their completion always means the data is at the target.
 * A notification vouches for its own put's bytes only: to publish data
 * written by earlier plain puts, complete them first (rma_flush()), then
 * put the notifying one. Timing: an owner asleep in its event loop is
 * woken at once, but under a stream (its last wake-up found 8 or more)
 * the daemon lets the next 500 us pass after that one, so that a wake-up
 * carries many: a notification may then come up to that much after its
 * put completed. One at a time is never held back.
 *
 * The target daemon holds at most 4096 notifications per owning client
 * that the client has not consumed (taken with rma_notify_next() or
 * handed to its callback), and from one initiator (a client, of the
 * owner's daemon or of another) at most half of what the others leave
 * free. Alone it may have 2048 unconsumed, beside one holding 2048 it may
 * have 1024, and so on: one initiator that fills its share never starves
 * the others. A put beyond either bound fails with
 * RMA_ERR_LIMIT and its bytes are NOT written: nothing is lost silently;
 * back off and put again once the owner caught up. A program streaming
 * them learns that from its own puts: it waits for those still in flight
 * (sending nothing new), puts the refused ones again at once if one of
 * those got through (the owner had room again), and sleeps first only
 * if none did, a little longer each round that fails whole (rmactl
 * bench: 100 us, doubled up to 2 ms). Puts sent after the refused one
 * may have been applied meanwhile: put again, it lands after them, so
 * to bytes they also wrote the older value comes last. A put to a
 * region whose owner is away (after a daemon hand-over, before the
 * owner reconnected) fails with RMA_ERR_NO_REGION, bytes not written.
 * An owner that disconnects or dies takes its regions with it: from then
 * on puts to them fail with RMA_ERR_STALE_DESCRIPTOR, bytes not written
 * (RMA_ERR_NO_REGION for one that raced with the region's going). Puts
 * applied before that completed with RMA_OK, and the notifications of
 * theirs the owner had not received yet went with it: there is nobody
 * left to tell.
 */
rma_status_t rma_put_notify(rma_client_t *client, rma_region_t *region,
			    uint64_t offset, rma_remote_t *remote,
			    uint64_t remote_offset, uint64_t length,
			    uint64_t value, unsigned flags, rma_callback_t cb,
			    void *user_data, rma_request_t **req_p);

/** What a notifying put (rma_put_notify()) wrote into a region of ours. */
typedef struct rma_notification {
	rma_region_t *region; /**< ours; NULL if freed since */
	uint64_t offset;      /**< where in it */
	uint64_t length;      /**< bytes written */
	uint64_t value;	      /**< the initiator's value */
	char daemon_id[64];   /**< the initiating daemon's id (hex) */
} rma_notification_t;

/**
 * Notification callback: runs in rma_progress() (and every call that
 * makes progress), in arrival order; @p n is valid during the call only.
 */
typedef void (*rma_notify_callback_t)(rma_client_t *client,
				      const rma_notification_t *n,
				      void *user_data);

/**
 * Deliver notifications to @p cb as they arrive instead of queuing them
 * for rma_notify_next(); NULL goes back to queuing. Those already queued
 * stay for rma_notify_next().
 */
void rma_notify_callback(rma_client_t *client, rma_notify_callback_t cb,
			 void *user_data);

/**
 * Take the oldest queued notification, making progress (without
 * blocking) first if none is queued. Poll rma_fd() to wait for one.
 * @return 1 with *@p n filled, 0 when none is there, or a negative
 *         rma_status_t (RMA_ERR_DAEMON_GONE) once the daemon is gone and
 *         the queue is empty.
 */
int rma_notify_next(rma_client_t *client, rma_notification_t *n);

/** Blocking put: rma_put() + rma_request_wait(); returns the final status. */
rma_status_t rma_put_sync(rma_client_t *client, rma_region_t *region,
			  uint64_t offset, rma_remote_t *remote,
			  uint64_t remote_offset, uint64_t length,
			  unsigned flags, int timeout_ms);

/** Blocking get. */
rma_status_t rma_get_sync(rma_client_t *client, rma_region_t *region,
			  uint64_t offset, rma_remote_t *remote,
			  uint64_t remote_offset, uint64_t length,
			  int timeout_ms);

/** Blocking flush. */
rma_status_t rma_flush_sync(rma_client_t *client, rma_peer_t *peer,
			    int timeout_ms);

#ifdef __cplusplus
}
#endif

#endif
