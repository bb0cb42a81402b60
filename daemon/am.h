/* SPDX-License-Identifier: BSD-2-Clause */
/* Daemon-to-daemon messages: UCX active messages with fixed structs,
 * always sent with a reply endpoint. Every struct starts with the magic,
 * so a stray or foreign message is dropped. */
#ifndef RMAD_AM_H
#define RMAD_AM_H

#include <stddef.h>
#include <stdint.h>

#include "descriptor.h"

enum am_id {
	AM_HELLO = 1,	      /* am_hello: who I am, which connection this is */
	AM_HELLO_REPLY = 2,   /* am_hello_reply: accepted (or refused) */
	AM_RESOLVE = 3,	      /* am_resolve: describe one of your regions */
	AM_RESOLVE_REPLY = 4, /* am_resolve_reply [+ packed rkey] */
	AM_FREED = 5,	      /* am_freed: a region you resolved is gone */
	AM_PUT = 6,	      /* header am_rma, data: the bytes to write */
	AM_PUT_ACK = 7,	      /* header am_rma_answer: written (or refused) */
	AM_GET = 8,	      /* header am_rma: send me these bytes */
	AM_GET_REPLY = 9,     /* header am_rma_answer, data: the bytes */
	AM_BATCH = 10,	      /* data: am_rma records (kind says which), put
				 records followed by their bytes, atomic
				 ones by an am_batch_atomic */
	AM_BATCH_REPLY = 11,  /* data: am_rma_answer + uint64 length + bytes,
				 one per record, in order (an atomic's
				 bytes: the old word, 8) */
	AM_HELLO_PROOF = 12,  /* am_hello_proof: keyed handshake, 3rd step */
	AM_HELLO_DONE = 13,   /* am_hello_reply: keyed handshake, accepted */
};

/* Ids below this are rmad's; every other 16-bit id gets a handler that
 * drops the message (UCX 1.13 reads the handler table before checking
 * the id against its length). */
#define AM_ID_LIMIT 64

/* Puts and gets up to this size travel in batches: one message per peer
 * per client frame, one answer per batch. A batch message is at most
 * AM_BATCH_BYTES; its answer at most AM_BATCH_REPLY_BYTES of data plus
 * one am_rma_answer and length per record. */
#define AM_BATCH_SMALL 8192
#define AM_BATCH_BYTES (64 * 1024)
#define AM_BATCH_REPLY_BYTES (128 * 1024)

/* A put or get bigger than one fragment of UCX's tcp transport travels
 * as pieces, each an AM_PUT or AM_GET of its own (op_send_am): at most
 * this many of one operation's pieces are unanswered at a time, so that
 * one big operation never makes its target hold many answers. */
#define AM_PIECES_IN_FLIGHT 32
/* The most put pieces one answer covers (am_rma_answer_range): a fourth
 * of AM_PIECES_IN_FLIGHT, so that one big put is never held up by its
 * own answers held back. */
#define AM_ACK_RANGE_MAX 8
/* The runs in which a ranged get (am_rma_range) asks for the pieces of a
 * get bigger than AM_PIECES_IN_FLIGHT as earlier ones are answered; one
 * that fits is asked for whole. */
#define AM_RANGE_PIECES 8

#define AM_MAGIC 0x726d6164u /* "rmad" */
/* 3: the handshake binds both nonces, both ids, the roles and the address
 * dialed (am_hello.dialed), and a HELLO of another version is answered
 * with ERR_VERSION. A daemon of 2 closes a version 3 connection
 * unanswered; one of 3 refuses a version 2 hello with ERR_VERSION (the
 * protocol 2 initiator reports "refused the connection"). */
#define AM_VERSION 3
#define AM_RKEY_MAX 4096

#define AM_NONCE_SIZE 32
#define AM_PROOF_SIZE 32
#define AM_TRANSCRIPT_SIZE 32 /* the handshake's hash, BLAKE2b-256 */

/* am_hello.flags and am_hello_reply.flags */
#define AM_HELLO_KEYED 1u /* the initiator holds a cluster key */
/* am_hello_reply.flags: this target answers ranged gets (am_rma_range);
 * a target of before does not set it, and gets one request per piece */
#define AM_HELLO_GET_RANGES 2u
/* am_hello.flags: this initiator takes one answer for several written
 * pieces of puts (am_rma_answer_range); a target of before answers every
 * piece alone, and an initiator of before gets that */
#define AM_HELLO_PUT_ACK_RANGES 4u
/* am_hello.flags: the hello carries am_hello.retire (a hello of before
 * ends at it); am_hello_reply.flags: the target read it, and it is in
 * the transcript (handshake.c) */
#define AM_HELLO_RETIRE 8u
/* am_hello.flags: the hello carries am_hello.floor (a hello of before
 * ends at it); am_hello_reply.flags: the target read it, and it is in
 * the transcript */
#define AM_HELLO_FLOOR 16u

/* An address as the handshake binds it: the target's listen address as
 * the initiator dialed it. An IPv4-mapped IPv6 address is IPv4. */
struct am_addr {
	uint16_t family; /* 4 or 6 */
	uint16_t port;	 /* host order */
	uint8_t addr[16];
};

/* The first 16 bytes of every hello, of every version: what a version
 * mismatch is answered from. */
struct am_hello_head {
	uint32_t magic;
	uint32_t version;
	uint64_t token;
};

/* Initiator -> target, first message on a new endpoint. The target keeps,
 * per origin (source address + listen_port), lane and path, the connection
 * of the highest epoch: a newer one closes the older at the target before
 * anything is served on it, so data still on an old connection can never
 * land after operations on the new one. A different daemon_id from the
 * same origin is a restarted daemon: every connection of the old one
 * closes. A target refuses a hello with its own daemon_id or a nonce it
 * issued itself (a hello of its own, reflected), and, keyed, one whose
 * dialed is not the address the connection reached (a hello relayed from
 * somewhere else). */
struct am_hello {
	uint32_t magic;
	uint32_t version;
	uint64_t token;
	uint8_t daemon_id[DAEMON_ID_SIZE];
	uint64_t epoch;	      /* grows with every connection a daemon opens */
	uint16_t lane;	      /* the initiator's worker index */
	uint16_t listen_port; /* the initiator's own listen port */
	uint32_t flags;	      /* AM_HELLO_* */
	/* The initiator's name for the address it dialed (its peer id):
	 * two addresses of one target are two connections, not one
	 * replacing the other. */
	uint32_t path;
	uint8_t nonce[AM_NONCE_SIZE]; /* fresh random bytes, every hello */
	struct am_addr dialed;	      /* the target's address, as dialed */
	/* With AM_HELLO_RETIRE: every connection of this daemon to the
	 * address dialed with an epoch below it is dead (one of them
	 * failed, and the others were closed with it): close them all, on
	 * every lane, before this one is served. A hello of before ends here
	 * (AM_HELLO_SIZE_V3), and counts as 0. */
	uint64_t retire;
	/* With AM_HELLO_FLOOR: every connection of this daemon id with an
	 * epoch below it, to any address, is a predecessor's (this process
	 * took its place: rmad --take-over, a restart from the fd store),
	 * dead with it: close them all. 0 for a daemon without one. A hello
	 * of before ends here (AM_HELLO_SIZE_V4), and counts as 0. */
	uint64_t floor;
};

#define AM_HELLO_SIZE_V3 offsetof(struct am_hello, retire)
#define AM_HELLO_SIZE_V4 offsetof(struct am_hello, floor)

/* Target -> initiator. Keyed, the handshake is a transcript hash in the
 * manner of Noise (NNpsk0 without its Diffie-Hellman; handshake.c):
 *   h = H(name), h = H(h | "hello" | am_hello), h = H(h | "reply" |
 *   this reply with proof zeroed), k = MAC(cluster key, h),
 *   proof = MAC(k, "target"), am_hello_proof.proof = MAC(k, "initiator"),
 * so that each proof covers both nonces, both daemon ids, the address
 * dialed and its own role. The target serves nothing on the endpoint
 * until the initiator's proof is right. */
struct am_hello_reply {
	uint32_t magic;
	int32_t status; /* wire status: OK, or why the connection is refused */
	uint64_t token;
	uint8_t daemon_id[DAEMON_ID_SIZE];
	uint32_t flags;	  /* AM_HELLO_KEYED: a proof is required */
	uint32_t version; /* AM_VERSION of the target (0 from protocol 2) */
	uint8_t nonce[AM_NONCE_SIZE];
	uint8_t proof[AM_PROOF_SIZE];
};

/* Initiator -> target, keyed handshake only: the initiator's proof (see
 * am_hello_reply). */
struct am_hello_proof {
	uint32_t magic;
	uint32_t pad;
	uint64_t token;
	uint8_t proof[AM_PROOF_SIZE];
};

struct am_resolve {
	uint32_t magic;
	uint32_t pad;
	uint64_t token;
	uint8_t daemon_id[DAEMON_ID_SIZE];
	uint64_t region_id;
	uint64_t generation;
};

struct am_resolve_reply {
	uint32_t magic;
	int32_t status; /* wire status */
	uint64_t token;
	uint64_t addr; /* 0 unless UCX-native RMA is offered */
	uint64_t length;
	uint32_t rkey_len; /* 0: use AM_PUT/AM_GET */
	uint32_t flags;	   /* AM_RESOLVE_* */
			   /* rkey_len bytes of packed rkey follow */
};

/* am_resolve_reply.flags: the generation asked with is the region's
 * read-only secret; the owner serves gets only through it (and gives no
 * rkey, so every access reaches its checks). */
#define AM_RESOLVE_READ_ONLY 1u

struct am_freed {
	uint32_t magic;
	uint32_t pad;
	uint8_t daemon_id[DAEMON_ID_SIZE];
	uint64_t region_id;
	uint64_t generation;
};

/* A put or get named by region, never by address: the target checks it
 * against its own region table before touching memory. */
struct am_rma {
	uint32_t magic;
	uint32_t kind; /* in a batch: AM_PUT or AM_GET */
	uint64_t token;
	uint64_t region_id;
	uint64_t generation;
	uint64_t offset;
	uint64_t length;
};

struct am_rma_answer {
	uint32_t magic;
	int32_t status; /* wire status */
	uint64_t token;
};
/* Target -> initiator, an AM_PUT_ACK for count pieces of puts with
 * consecutive tokens (token .. token + count - 1), every one written; a
 * refusal is always an am_rma_answer of its own. Only to an initiator
 * whose hello said AM_HELLO_PUT_ACK_RANGES. */
struct am_rma_answer_range {
	uint32_t magic;
	int32_t status; /* always OK */
	uint64_t token;
	uint32_t count; /* 1 .. AM_ACK_RANGE_MAX */
	uint32_t pad;
};

/* In a batch, after an am_rma of kind AM_ATOMIC (its length: the word's
 * width, 4 or 8): what to do to the word. The target's CPU applies it to
 * the region's memory and answers with the old word. */
struct am_batch_atomic {
	uint32_t op; /* Rma__V1__AtomicOp */
	uint32_t pad;
	uint64_t operand;
	uint64_t compare;
};

/* A get of several pieces in one request: AM_GET with this longer header,
 * sent only to a target whose hello reply carried AM_HELLO_GET_RANGES.
 * The target answers piece i (piece bytes, the last one the rest) with an
 * AM_GET_REPLY of its own named rma.token + i, so that each fits in one
 * fragment; a refusal is one answer, named rma.token. At most
 * AM_PIECES_IN_FLIGHT pieces: a bigger request is refused. */
struct am_rma_range {
	struct am_rma rma;
	uint64_t piece;
};

/* am_rma.kind of an atomic in a batch (not a message id of its own) */
#define AM_ATOMIC 14

/* A put that notifies the region's owner: as AM_PUT's header with the
 * value and the initiating client after it (AM_PUT with this longer
 * header), or in a batch a record of kind AM_PUT_NOTIFY followed by an
 * am_batch_notify and the bytes. client is the client that put, as its
 * daemon numbers them (its connection's id + 1): the target gives each
 * (daemon, client) its own share of the owner's bound on notifications
 * (notification.c). Since AM_VERSION 3; before, the value alone. */
struct am_rma_notify {
	struct am_rma rma;
	uint64_t value;
	uint64_t client;
};

struct am_batch_notify {
	uint64_t value;
	uint64_t client;
};

#define AM_PUT_NOTIFY 15

#endif
