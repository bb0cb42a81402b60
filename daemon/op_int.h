/* SPDX-License-Identifier: BSD-2-Clause */
/* The operations' own header: what op.c (submission, local copies, the
 * end of an op), op_am.c (rmad's protocol), op_atomic.c, op_batch.c and
 * op_park.c share, and no other file calls. What the rest of the daemon
 * may call is the op.c section of daemon.h. */
#ifndef RMAD_OP_INT_H
#define RMAD_OP_INT_H

#include "daemon.h"

struct op {
	struct daemon *d;
	struct conn *conn; /* ref held */
	uint64_t op_id;
	Rma__V1__OpKind kind;
	struct region *region; /* ref held (PUT/GET) */
	struct resolved *res;  /* ref held (PUT/GET) */
	struct peer *peer;     /* NULL for local copies and flush-all */
	uint64_t length;
	void *buf;   /* local bytes (PUT/GET) */
	int pending; /* what is outstanding: UCX requests, answer, barrier */
	/* The first failure, with its detail, set where it is found
	 * (op_set_failed); UCX codes are converted as they come in. */
	wire_status_t status;
	char detail[200];
	bool reported; /* the client got its completion already */
	bool listed;   /* on peer->ops */
	bool barrier;  /* flush: waiting for older operations on its peer */
	bool awaiting_answer; /* rmad protocol: the target has not answered */
	uint64_t token;	      /* rmad protocol: names the op in the answer */
	/* rmad protocol: the messages a put or get travels in, each with its
	 * own token (token + i) and answer (op_send_am): how many, handed to
	 * UCX, answered, the bytes of each but the last; with more than one,
	 * their headers until sent. */
	uint32_t pieces, sent, answered;
	uint64_t piece;
	struct am_rma_range *piece_hdrs;
	union { /* rmad protocol: header, alive until sent */
		struct am_rma hdr;
		struct am_rma_notify nhdr;     /* PUT with notify */
		struct am_batch_atomic atomic; /* ATOMIC, until batched */
	};
	uint64_t value; /* ATOMIC: the word's old value, for the client */
	bool notify;	/* PUT: tell the region's owner (OP_FLAG_NOTIFY) */
	uint64_t notify_value; /* what to tell it */
	double started; /* daemon_now() when the client's op was accepted */
	double deadline;
	union {
		struct op *flush_all_parent; /* flush of every peer: the
						aggregate */
		struct op *next_free;	     /* on d->op_free */
	};
	TAILQ_ENTRY(op) link; /* peer->ops */
};

/* Shared by op.c and op_batch.c: an op's failure, set where it is found
 * (the first one decides); the answer came or will not. */
void op_set_failed(struct op *op, wire_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void op_set_ucs_failed(struct op *op, ucs_status_t st);
void op_set_refused(struct op *op, wire_status_t st);
void op_done_waiting(struct op *op);
/* Fails o before it became an op (counted, completed at once). */
void op_fail(struct conn *c, const Rma__V1__Op *o, wire_status_t st,
	     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void op_submit_one(struct conn *c, const Rma__V1__Op *o, bool unparked);
/* The remote of c that o names and its bounds, checked the same way for
 * RMA and atomics: op_remote fails o (ERR_NO_PEER) and returns NULL when
 * c has no such remote; op_fail_remote_bounds fails o (ERR_OUT_OF_BOUNDS)
 * for a remote range or word (what) outside res. */
struct remote *op_remote(struct conn *c, const Rma__V1__Op *o);
void op_fail_remote_bounds(struct conn *c, const Rma__V1__Op *o,
			   const char *what, const struct resolved *res);
/* op.c's steps that op_atomic.c shares: an op record begun (counted,
 * listed on p), its submission ended; the local region an op names. */
struct op *op_begin(struct conn *c, const Rma__V1__Op *o, struct peer *p);
void op_end_submit(struct op *op);
struct op *op_begin_remote(struct conn *c, const Rma__V1__Op *o,
			   struct remote *rem, bool unparked);
struct region *op_local_target(struct conn *c, const Rma__V1__Op *o,
			       const struct resolved *res, bool write);
/* op_atomic.c: an atomic submitted by a client. */
void op_start_atomic(struct conn *c, const Rma__V1__Op *o, bool unparked);
/* op_park.c: o waits for p to come back (see op_unpark). */
void op_park(struct conn *c, const Rma__V1__Op *o, struct peer *p);
/* op_batch.c: add a small op to its peer's batch; send every batch. */
void op_batch_add(struct op *op, const struct resolved *res,
		  uint64_t remote_offset);
void op_batch_send_all(struct daemon *d);
/* op.c: the op is done (its completion queued, its record recycled);
 * the flushes waiting on p's older operations go on. */
void op_finish(struct op *op);
void op_release_barriers(struct peer *p);
/* op.c: the deadline passed (peer.c closes the endpoint next, which
 * completes the op); the client hears now, UCX still holds the op. */
void op_set_timed_out(struct op *op);
void op_report_overdue(struct op *op);
/* op_am.c: a put or get as rmad's messages (pieces, tokens, answers). */
void op_send_am(struct op *op, const struct resolved *res,
		uint64_t remote_offset);

/* Answers naming the op's tokens are not for it any more. */
static inline void
op_forget_tokens(struct op *op)
{
	if (op->token == 0)
		return;
	/* a batched op's token is named at once, a piece's once sent */
	for (uint32_t i = 0; i < op->sent || i == 0; i++)
		idmap_remove(&op->d->ops_by_token, op->token + i);
	op->token = 0;
}

/* Every UCX call that may run an op's callback is counted before it is
 * made (op_expect): UCX can complete a request, callback included, before
 * returning it, and counting afterwards then leaves the op waiting for a
 * callback that already came. op_track uncounts it when no callback will
 * come: done at once, or failed at once. */
static inline void
op_expect(struct op *op)
{
	op->pending++;
}

static inline void
op_track(struct op *op, ucs_status_ptr_t sp)
{
	if (sp != NULL && !UCS_PTR_IS_ERR(sp))
		return;
	op->pending--;
	if (UCS_PTR_IS_ERR(sp))
		op_set_ucs_failed(op, UCS_PTR_STATUS(sp));
}

#endif
