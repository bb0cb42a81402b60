/* SPDX-License-Identifier: BSD-2-Clause */
/* The shared-memory ring of one client connection: its layout, shared by
 * the daemon (daemon/ring.c) and librma (client/ring.c).
 *
 * One memfd, made and sealed by the daemon, sent with the HelloReply:
 * a header page, then the submission ring (operation records of
 * proto/oprec.h, 64 bytes, written by the client), then the completion
 * ring (32-byte slots, written by the daemon). Both rings are single
 * producer, single consumer, with free-running 32-bit counters: slot =
 * counter % slots, slots a power of two. Each side keeps its own counter
 * privately and only publishes it here; what the other side publishes is
 * read once and checked (the daemon trusts nothing it reads here).
 *
 * Wake-ups: a side that goes to sleep sets its "sleeps" flag, then looks
 * at the ring once more (a full fence between); the other side, after
 * publishing, swaps the flag to 0 and if it was set says so over the
 * socket (RingWake). While both sides spin nothing crosses the socket.
 * Nor is it read for nothing: the daemon counts in socket_bytes what it
 * wrote there, so a client that read as much, and saw the daemon at work
 * in the ring since it last looked, need not ask the socket
 * (RINGREC_FEATURE_SOCKET_BYTES; an older daemon leaves features 0).
 *
 * A completion slot: op_id, bytes, value (8 each), status (wire Status,
 * 4), detail_len (2), kind (2, RINGREC_KIND_COMPLETION); a detail text of
 * detail_len bytes follows in the next slots, 32 bytes each, without a
 * terminating NUL.
 *
 * A notification (what a Notifications event's packed record carries)
 * takes two slots: the first a struct ringrec_notif_head (region_id,
 * offset, length where a completion has op_id, bytes, value; then 0, 0
 * and kind RINGREC_KIND_NOTIFICATION where a completion has its status,
 * detail_len and kind), the second a struct ringrec_notify: the value and
 * the sender's daemon id, inline (a table of
 * senders sent apart would need an order of its own between the socket
 * and the ring). Notifications share the completion ring and its order
 * with the socket: what went as a Notifications event for want of room
 * counts as a socket event (socket_events_seen), like Completions. */
#ifndef RMA_RINGREC_H
#define RMA_RINGREC_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>

#define RINGREC_MAGIC 0x31474e4952414d52ull /* "RMARING1" */
#define RINGREC_VERSION 2
#define RINGREC_HEADER_SIZE 4096
#define RINGREC_SUB_SLOTS 256
#define RINGREC_SUB_SIZE 64 /* OPREC_SIZE */
/* Completion slots: RINGREC_COMP_SLOTS unless the client asked for more
 * at hello (Hello.ring_comp_slots: a power of two up to
 * RINGREC_COMP_SLOTS_MAX), which librma does: a stream of notifications
 * then wakes its owner an eighth as often and seldom overflows onto the
 * socket. */
#define RINGREC_COMP_SLOTS 512
#define RINGREC_COMP_SLOTS_MAX 4096
#define RINGREC_COMP_SIZE 32
/* A longer detail is cut: 7 slots of text at most. */
#define RINGREC_DETAIL_MAX 224
/* The memfd's size for a ring of comp_slots completion slots. */
#define RINGREC_SIZE_FOR(comp_slots)                                           \
	(RINGREC_HEADER_SIZE + RINGREC_SUB_SLOTS * RINGREC_SUB_SIZE +          \
	 (comp_slots)*RINGREC_COMP_SIZE)
#define RINGREC_SIZE RINGREC_SIZE_FOR(RINGREC_COMP_SLOTS)

/* Each counter on a cache line of its own: the two sides write
 * different lines, so polling one costs the other nothing. */
struct ringrec_header {
	uint64_t magic;
	uint32_t version;
	uint32_t sub_slots, comp_slots;
	uint32_t sub_offset, comp_offset;
	uint32_t size;
	/* daemon, at creation: RINGREC_FEATURE_* (0 from a daemon older
	 * than the flags) */
	uint32_t features;
	_Alignas(64) uint32_t sub_tail; /* client: operations written */
	/* client: the CPU it last ran on. The daemon polls a ring only
	 * while its client runs on another CPU: on the same one, polling
	 * only keeps the client from running. (The client spins either
	 * way, yielding: see ring_spin in client/rma_ring.c.) */
	uint32_t client_cpu;
	_Alignas(64) uint32_t sub_head; /* daemon: operations taken */
	/* daemon: Submit frames it took from the socket. The client goes
	 * back to the ring only once every Submit it sent is taken, so the
	 * order of its operations holds across the two paths. */
	uint32_t socket_submits;
	_Alignas(64) uint32_t daemon_sleeps; /* daemon sets, client clears */
	_Alignas(64) uint32_t daemon_cpu;    /* daemon: see client_cpu */
	_Alignas(64) uint32_t comp_tail;     /* daemon: slots written */
	/* daemon, with RINGREC_FEATURE_SOCKET_BYTES: the bytes it wrote to
	 * the socket (mod 2^32), the hello reply included. Raised before
	 * each write (a full fence between), set to what went once it
	 * returned: never less than what the client can find there. A
	 * client that read as much knows, without a system call, that
	 * nothing waits on the socket. On comp_tail's line, which the
	 * client reads anyway. */
	uint32_t socket_bytes;
	_Alignas(64) uint32_t comp_head; /* client: slots taken */
	/* client: Completions and Notifications events it took from the
	 * socket. The daemon sends them there when the ring is full, and
	 * comes back to the ring once the client took them all, so order
	 * holds. */
	uint32_t socket_events_seen;
	_Alignas(64) uint32_t client_sleeps; /* client sets, daemon clears */
	/* daemon: set once it closed the socket, after its last completion:
	 * the client reads the end of the stream before it goes on, as it
	 * would have had the completions come over the socket */
	uint32_t closed;
};

/* features: socket_bytes is kept */
#define RINGREC_FEATURE_SOCKET_BYTES 1u

struct ringrec_comp {
	uint64_t op_id;
	uint64_t bytes;
	uint64_t value;
	int32_t status; /* Rma__V1__Status */
	uint16_t detail_len;
	uint16_t kind; /* enum ringrec_kind */
};

enum ringrec_kind {
	RINGREC_KIND_COMPLETION = 0,
	RINGREC_KIND_NOTIFICATION = 1,
};

#define RINGREC_SENDER_SIZE 16 /* DAEMON_ID_SIZE */

/* The second slot of a notification. */
struct ringrec_notify {
	uint64_t value;
	uint8_t sender[RINGREC_SENDER_SIZE];
	uint64_t reserved;
};

/* The first slot of a notification. */
struct ringrec_notif_head {
	uint64_t region_id;
	uint64_t offset;
	uint64_t length;
	int32_t zero;	   /* a completion's status */
	uint16_t zero_len; /* a completion's detail_len */
	uint16_t kind;	   /* RINGREC_KIND_NOTIFICATION */
};

#define RINGREC_NOTIFY_SLOTS 2

_Static_assert(sizeof(struct ringrec_header) <= RINGREC_HEADER_SIZE,
	       "ring header fits its page");
_Static_assert(sizeof(struct ringrec_comp) == RINGREC_COMP_SIZE,
	       "completion slot layout");
_Static_assert(sizeof(struct ringrec_notify) == RINGREC_COMP_SIZE,
	       "notification slot layout");
_Static_assert(sizeof(struct ringrec_notif_head) == RINGREC_COMP_SIZE &&
		   offsetof(struct ringrec_notif_head, kind) ==
		       offsetof(struct ringrec_comp, kind),
	       "a notification's first slot has its kind where a "
	       "completion's is");

/* The codec of the completion ring's records, for the daemon (which
 * writes) and librma (which reads). Stores go field by field straight
 * into the slot: a record built on the stack and copied in was read back
 * with loads wider than the stores that built it, which the CPU cannot
 * forward, so each waited for the store buffer to drain. */

/* A completion's first slot; its detail follows in detail_len bytes. */
static inline void
ringrec_store_completion(void *slot, uint64_t op_id, uint64_t bytes,
			 uint64_t value, int32_t status, uint16_t detail_len)
{
	struct ringrec_comp *k = (struct ringrec_comp *)slot;

	k->op_id = op_id;
	k->bytes = bytes;
	k->value = value;
	k->status = status;
	k->detail_len = detail_len;
	k->kind = RINGREC_KIND_COMPLETION;
}

/* A notification into its two slots (which need not be adjacent: the
 * second may be the ring's first), from its fields: the sender's id is
 * copied whole from where it lies (a byte loop over a record built on
 * the stack was a fifth of what the daemon spent on a notifying put). */
static inline void
ringrec_store_notification(void *head_slot, void *body_slot, uint64_t region_id,
			   uint64_t offset, uint64_t length, uint64_t value,
			   const uint8_t sender[RINGREC_SENDER_SIZE])
{
	struct ringrec_notif_head *h = (struct ringrec_notif_head *)head_slot;
	struct ringrec_notify *body = (struct ringrec_notify *)body_slot;

	h->region_id = region_id;
	h->offset = offset;
	h->length = length;
	h->zero = 0;
	h->zero_len = 0;
	h->kind = RINGREC_KIND_NOTIFICATION;
	body->value = value;
	__builtin_memcpy(body->sender, sender, RINGREC_SENDER_SIZE);
	body->reserved = 0;
}

/* Whether n completion slots make a ring: a power of two (slot numbers
 * wrap with the counters) from RINGREC_COMP_SLOTS to the maximum. */
static inline int
ringrec_comp_slots_valid(uint32_t n)
{
	return n >= RINGREC_COMP_SLOTS && n <= RINGREC_COMP_SLOTS_MAX &&
	       (n & (n - 1)) == 0;
}

/* Slots a completion with a detail of len bytes takes. */
static inline uint32_t
ringrec_comp_slots(size_t len)
{
	return 1 +
	       (uint32_t)((len + RINGREC_COMP_SIZE - 1) / RINGREC_COMP_SIZE);
}

static inline uint32_t
ringrec_load(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline void
ringrec_store(uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/* Between publishing and looking at the other side's sleep flag (and
 * between setting one's own and looking at the ring once more). */
static inline void
ringrec_fence(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* The other side's sleep flag: 1 if it sleeps (it is cleared, and the
 * caller wakes it), 0 if not. A plain load first: the line stays shared
 * while nobody sleeps. */
static inline int
ringrec_take_sleeper(uint32_t *flag)
{
	if (__atomic_load_n(flag, __ATOMIC_SEQ_CST) == 0)
		return 0;
	return __atomic_exchange_n(flag, 0, __ATOMIC_SEQ_CST) != 0;
}

/* Publishes the CPU we run on in *slot (written only when it changed:
 * the line stays shared); returns it. */
static inline uint32_t
ringrec_note_cpu(uint32_t *slot)
{
	uint32_t cpu = (uint32_t)sched_getcpu();

	if (__atomic_load_n(slot, __ATOMIC_RELAXED) != cpu)
		__atomic_store_n(slot, cpu, __ATOMIC_RELAXED);
	return cpu;
}

static inline void
ringrec_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

#endif
