/* SPDX-License-Identifier: BSD-2-Clause */
/* Transfers from and to any buffer (rma_put_buf, rma_get_buf). The daemon
 * cannot read a process's private memory, so the bytes go through a
 * staging area: a region of the client's own (rma_region_alloc, so it is
 * re-attached after a take-over like any other), made at the first such
 * call. A transfer is cut into pieces of at most s->piece bytes; each
 * piece takes an extent of the area, is an ordinary put or get of that
 * region, and gives its extent back when it completes (a get's bytes are
 * copied out first, rma_request.c: request_complete -> staging_release).
 *
 * Extents are handed out as a ring, in order, and come back in any order
 * (two rings: pieces, and transfers of up to 256 bytes in a sixteenth
 * more, at most 256 KiB):
 * the oldest busy one holds the tail, so a slow piece holds the room
 * behind it, never more than the area. A transfer that finds no room, or
 * others waiting before it, waits in a FIFO queue; each staged completion
 * pumps the queue (staging_pump), so a big transfer's pieces flow through
 * the area while the ones before them are on the wire: the copy of one
 * piece overlaps the transfer of the others. Something waits only while
 * some piece holds room, so a completion always comes to pump it.
 *
 * One piece with room and nobody waiting is the caller's request itself
 * (the fast path, as cheap as rma_put plus a copy). Otherwise the caller
 * gets a request of pieces, as rma_putv's (parent, parts_left,
 * first_error), whose xfer says what is left to issue. */
#include "rma_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The area holds what is in flight: as much as a window of 16 puts of
 * 1 MiB from a region has. With 4 MiB (and pieces of 256 KiB), 1 MiB
 * puts from a buffer kept the sending daemon's queue short: it ran dry
 * whenever the client waited for a CPU, slept and woke more often, and
 * spent 1.1 to 1.4 times the CPU per MiB of puts from a region (the same
 * as puts from a region with a window of 4); with 16 MiB and pieces of
 * 1 MiB it spends what it does for those. */
#define STAGING_SIZE_DEFAULT (16u << 20)
#define STAGING_SIZE_MIN (256u << 10)
#define STAGING_SIZE_MAX (1u << 30)
/* A piece: a quarter of the area, at most this; so four at least are on
 * the wire while the next is copied. A 1 MiB put is one piece: the
 * daemons see the same operations as for a put from a region (four
 * pieces of 256 KiB cost them more per MiB). */
#define STAGING_PIECE_MAX (1u << 20)
/* Transfers of up to STAGING_SMALL_MAX bytes take extents of their own
 * ring, a sixteenth of the area more (at most STAGING_SMALL_RING),
 * 16-byte aligned: a stream of small puts cycles over a few KiB that
 * stay in the caches of the client and the daemon, where one ring of the
 * whole area would draw every one from memory. A full window of them
 * never empties the ring, so it cycles over all of it: kept small. Pieces
 * are 64-byte aligned. */
#define STAGING_SMALL_MAX 256u
#define STAGING_SMALL_RING (256u << 10)
#define STAGING_SMALL_ALIGN 16u
#define STAGING_ALIGN 64u
/* Extents of a ring in use at once. */
#define STAGING_EXTENTS 8192u
/* What may wait for room: transfers, and bytes of small puts' copies. */
#define STAGING_QUEUE_MAX 4096u
#define STAGING_COPIES_MAX (64u << 20)

struct staging_ext {
	uint32_t off;  /* its bytes in the area */
	uint32_t len;  /* the piece's length */
	uint32_t span; /* what it gives back: its rounded length, and the
			* end of the area it skipped to start at 0 */
	bool busy;
};

/* A transfer with pieces still to issue (a request of pieces). */
struct staging_xfer {
	struct rma_request *req; /* the caller's; its parts_left counts
				  * the pieces in flight, and one more
				  * while it is queued */
	struct staging_xfer *next;
	Rma__V1__OpKind kind;
	uint8_t *buf;		   /* the caller's buffer, or copy */
	uint8_t *copy;		   /* a small put's bytes, taken at the call */
	uint64_t len, pos;	   /* bytes in all, issued so far */
	struct rma_remote *remote; /* its staged count holds a release */
	uint64_t remote_offset;
	uint64_t peer_id; /* a flush's (kind FLUSH: no bytes, no remote) */
	unsigned flags;
	uint64_t reattaches; /* the client's count at the call */
	bool queued;	     /* in the queue: pieces to issue */
};

/* Extents handed out in order, given back in any order. */
struct staging_ring {
	uint32_t base, size; /* its bytes in the area */
	uint32_t align;
	uint32_t head; /* where the next extent starts (from base) */
	uint32_t used; /* bytes held by extents (spans) */
	uint32_t first, n;
	struct staging_ext ext[STAGING_EXTENTS];
};

enum { STAGING_PIECES, STAGING_SMALL, STAGING_RINGS };

struct staging {
	rma_region_t *region;
	uint8_t *base;
	uint32_t piece;
	struct staging_xfer *q_head, *q_tail;
	uint32_t q_n;
	size_t q_copies; /* bytes of copies held by queued transfers */
	bool pumping, again;
	struct staging_ring ring[STAGING_RINGS];
};

/* ---- the area's extents ---- */

/* Extent e (ring * STAGING_EXTENTS + index + 1, as handed out). */
static struct staging_ext *
staging_ext(struct staging *s, uint32_t e)
{
	return &s->ring[(e - 1) / STAGING_EXTENTS]
		    .ext[(e - 1) % STAGING_EXTENTS];
}

/* An extent of n bytes (at most s->piece), as e; 0 when there is no
 * room. Its off is from the area's start. */
static uint32_t
staging_alloc(struct staging *s, uint32_t n)
{
	uint32_t k = n <= STAGING_SMALL_MAX ? STAGING_SMALL : STAGING_PIECES;
	struct staging_ring *r = &s->ring[k];
	uint32_t span = (n + r->align - 1) & ~(r->align - 1);
	uint32_t off, pad = 0, i;

	if (r->n == STAGING_EXTENTS)
		return 0;
	if (r->n == 0)
		r->head = 0; /* all free: start at the beginning again */
	off = r->head;
	if (off + span > r->size) {
		pad = r->size - off;
		off = 0;
	}
	if (r->used + pad + span > r->size)
		return 0;
	i = (r->first + r->n) % STAGING_EXTENTS;
	r->ext[i].off = r->base + off;
	r->ext[i].len = n;
	r->ext[i].span = pad + span;
	r->ext[i].busy = true;
	r->n++;
	r->used += pad + span;
	r->head = off + span;
	return k * STAGING_EXTENTS + i + 1;
}

static void
staging_ext_free(struct staging *s, uint32_t e)
{
	struct staging_ring *r = &s->ring[(e - 1) / STAGING_EXTENTS];

	staging_ext(s, e)->busy = false;
	while (r->n > 0 && !r->ext[r->first].busy) {
		r->used -= r->ext[r->first].span;
		r->first = (r->first + 1) % STAGING_EXTENTS;
		r->n--;
	}
}

static void
staging_ring_init(struct staging_ring *r, uint32_t base, uint32_t size,
		  uint32_t align)
{
	r->base = base;
	r->size = size;
	r->align = align;
}

void
staging_drop(rma_client_t *c, uint32_t e)
{
	if (c->staging != NULL && e != 0)
		staging_ext_free(c->staging, e);
}

void
staging_release(rma_client_t *c, struct rma_request *req)
{
	struct staging *s = c->staging;
	uint32_t e = req->stage_ext;

	req->stage_ext = 0;
	if (s == NULL || e == 0)
		return;
	if (req->stage_dst != NULL && req->status == RMA_OK)
		memcpy(req->stage_dst, s->base + staging_ext(s, e)->off,
		       staging_ext(s, e)->len);
	staging_ext_free(s, e);
}

/* ---- the area ---- */

/* RMA_STAGING_SIZE: bytes, or with K, M or G; rounded up to pages. */
static rma_status_t
staging_size(rma_client_t *c, uint32_t *size_p)
{
	const char *env = getenv("RMA_STAGING_SIZE");
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (env == NULL || env[0] == '\0') {
		*size_p = STAGING_SIZE_DEFAULT;
		return RMA_OK;
	}
	errno = 0;
	v = isdigit((unsigned char)env[0]) ? strtoull(env, &end, 10) : 0;
	if (v != 0 && errno == 0) {
		switch (*end) {
		case 'k':
		case 'K':
			shift = 10;
			end++;
			break;
		case 'm':
		case 'M':
			shift = 20;
			end++;
			break;
		case 'g':
		case 'G':
			shift = 30;
			end++;
			break;
		}
	}
	if (v == 0 || errno != 0 || *end != '\0' ||
	    v > (STAGING_SIZE_MAX >> shift) || (v << shift) < STAGING_SIZE_MIN)
		return client_error(c, RMA_ERR_INVALID,
				    "RMA_STAGING_SIZE=\"%.32s\": want a size "
				    "from 256K to 1G (bytes, or with K, M "
				    "or G)",
				    env);
	*size_p = (uint32_t)((v << shift) + 4095) & ~4095u;
	return RMA_OK;
}

static rma_status_t
staging_create(rma_client_t *c, struct staging **s_p)
{
	struct staging *s;
	uint32_t size = 0, small;
	rma_status_t st;

	st = staging_size(c, &size);
	if (st != RMA_OK)
		return st;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return client_error(c, RMA_ERR_NO_MEMORY,
				    "no memory for the staging area");
	small = size / 16 < STAGING_SMALL_RING ? size / 16 : STAGING_SMALL_RING;
	st = rma_region_alloc(c, size + small, &s->region);
	if (st != RMA_OK) {
		free(s);
		return client_error(c, st, "staging area of %u bytes: %s",
				    size + small, c->last_error);
	}
	s->base = rma_region_ptr(s->region);
	staging_ring_init(&s->ring[STAGING_PIECES], 0, size, STAGING_ALIGN);
	staging_ring_init(&s->ring[STAGING_SMALL], size, small,
			  STAGING_SMALL_ALIGN);
	s->piece = size / 4 < STAGING_PIECE_MAX ? size / 4 : STAGING_PIECE_MAX;
	*s_p = s;
	return RMA_OK;
}

/* The area, made at the first call; made again if a restart lost it
 * (once nothing of the old one is in use). */
static rma_status_t
staging_ready(rma_client_t *c, struct staging **s_p)
{
	struct staging *s = c->staging;
	rma_status_t st;

	if (s != NULL && s->region->lost != RMA_OK &&
	    s->ring[STAGING_PIECES].n == 0 && s->ring[STAGING_SMALL].n == 0 &&
	    s->q_head == NULL) {
		(void)rma_region_free(c, s->region);
		staging_free(c);
		s = NULL;
	}
	if (s == NULL) {
		st = staging_create(c, &s);
		if (st != RMA_OK)
			return st;
		c->staging = s;
	}
	*s_p = s;
	return RMA_OK;
}

void
staging_free(rma_client_t *c)
{
	struct staging *s = c->staging;

	if (s == NULL)
		return;
	/* nothing waits by now: request_complete_all failed the queue */
	while (s->q_head != NULL) {
		struct staging_xfer *x = s->q_head;

		s->q_head = x->next;
		x->req->xfer = NULL;
		free(x->copy);
		free(x);
	}
	free(s);
	c->staging = NULL;
}

/* ---- transfers of pieces ---- */

/* The transfer's first failure wins; later pieces are not issued. */
static void
staging_fail(struct staging_xfer *x, rma_status_t st, const char *detail)
{
	struct rma_request *parent = x->req;

	if (parent->first_error != RMA_OK)
		return;
	parent->first_error = st;
	free(parent->detail);
	parent->detail = strdup(detail);
}

/* One reference of the transfer's request gone (a piece, or the queue's
 * hold); the last completes it. */
static void
staging_xfer_put(struct staging_xfer *x)
{
	struct rma_request *parent = x->req;

	if (parent->parts_left == 1) {
		parent->xfer = NULL;
		free(x->copy);
		free(x);
	}
	request_part_finish(parent);
}

static void
staging_piece_done(rma_request_t *piece, rma_status_t st, void *arg)
{
	struct staging_xfer *x = arg;

	if (st == RMA_OK)
		x->req->bytes += piece->bytes;
	else
		staging_fail(x, st,
			     rma_request_detail(piece)[0] != '\0'
				 ? rma_request_detail(piece)
				 : rma_strerror(st));
	staging_xfer_put(x);
}

/* x issues nothing more: off the queue, its copy freed, its hold
 * dropped. */
static void
staging_xfer_end(rma_client_t *c, struct staging *s, struct staging_xfer *x)
{
	struct staging_xfer **pp = &s->q_head, *prev = NULL;

	while (*pp != x) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	*pp = x->next;
	if (s->q_tail == x)
		s->q_tail = prev;
	s->q_n--;
	x->queued = false;
	if (x->copy != NULL) {
		s->q_copies -= x->len;
		free(x->copy);
		x->copy = NULL;
	}
	x->buf = NULL;
	if (x->remote != NULL)
		peer_remote_unstage(c, x->remote);
	staging_xfer_put(x);
}

/* Whether x may issue its next piece; if not, its first failure says
 * why. */
static bool
staging_may_issue(rma_client_t *c, struct staging *s, struct staging_xfer *x)
{
	if (x->req->first_error != RMA_OK)
		return false;
	if (fork_inherited(c))
		staging_fail(x, RMA_ERR_INVALID,
			     "this client belongs to the parent process");
	else if (c->gone)
		staging_fail(x, RMA_ERR_DAEMON_GONE, c->gone_detail);
	else if (c->reattaches != x->reattaches)
		staging_fail(x, RMA_ERR_RESTARTED,
			     "the daemon was taken over while the transfer "
			     "was under way: retry");
	else if (x->kind != RMA__V1__OP_KIND__FLUSH &&
		 s->region->lost != RMA_OK)
		staging_fail(x, RMA_ERR_NO_REGION,
			     "the staging area was not given back after a "
			     "restart");
	return x->req->first_error == RMA_OK;
}

/* The op of a piece: n bytes at extent e (index + 1) for x's range at
 * pos. */
static void
staging_op(struct staging *s, Rma__V1__Op *op, Rma__V1__OpKind kind, uint32_t e,
	   uint64_t n, uint64_t remote_id, uint64_t remote_offset,
	   unsigned flags)
{
	op->kind = kind;
	op->region_id = s->region->region_id;
	op->offset = staging_ext(s, e)->off;
	op->remote_id = remote_id;
	op->remote_offset = remote_offset;
	op->length = n;
	op->flags = flags;
}

/* x's next piece into the area and to the daemon; false when there is no
 * room for it. */
static bool
staging_issue(rma_client_t *c, struct staging *s, struct staging_xfer *x)
{
	Rma__V1__Op op = RMA__V1__OP__INIT;
	uint64_t n = x->len - x->pos;
	struct request_stage stage;
	rma_status_t st;

	if (n > s->piece)
		n = s->piece;
	stage.ext = staging_alloc(s, (uint32_t)n);
	if (stage.ext == 0)
		return false;
	stage.dst = NULL;
	stage.parent = x->req;
	if (x->kind == RMA__V1__OP_KIND__PUT)
		memcpy(s->base + staging_ext(s, stage.ext)->off,
		       x->buf + x->pos, n);
	else
		stage.dst = x->buf + x->pos;
	staging_op(s, &op, x->kind, stage.ext, n, x->remote->remote_id,
		   x->remote_offset + x->pos, x->flags);
	x->pos += n;
	x->req->parts_left++;
	st = request_submit_staged(c, &op, &stage, staging_piece_done, x, NULL);
	if (st != RMA_OK) {
		x->req->parts_left--;
		staging_fail(x, st, c->last_error);
	} else if (c->pending_n > 0 && n >= RMA_BUF_COPY_MAX) {
		/* the daemon starts on it while the next is copied */
		request_flush(c);
	}
	return true;
}

/* A flush whose turn came: everything queued before it is issued, so
 * the daemon's flush covers it. Its one piece is the flush op. */
static bool
staging_issue_flush(rma_client_t *c, struct staging_xfer *x)
{
	Rma__V1__Op op = RMA__V1__OP__INIT;
	rma_status_t st;

	op.kind = RMA__V1__OP_KIND__FLUSH;
	op.peer_id = x->peer_id;
	x->req->parts_left++;
	st = request_submit_staged(c, &op, NULL, staging_piece_done, x, NULL);
	if (st != RMA_OK) {
		x->req->parts_left--;
		staging_fail(x, st, c->last_error);
	}
	return true;
}

void
staging_pump(rma_client_t *c)
{
	struct staging *s = c->staging;

	if (s == NULL)
		return;
	if (s->pumping) {
		/* a completion inside a submit below: the loop goes on */
		s->again = true;
		return;
	}
	s->pumping = true;
	do {
		s->again = false;
		while (s->q_head != NULL) {
			struct staging_xfer *x = s->q_head;

			if (!staging_may_issue(c, s, x)) {
				staging_xfer_end(c, s, x);
				continue;
			}
			if (x->kind == RMA__V1__OP_KIND__FLUSH
				? !staging_issue_flush(c, x)
				: !staging_issue(c, s, x))
				break;
			if (x->pos == x->len || x->req->first_error != RMA_OK)
				staging_xfer_end(c, s, x);
		}
	} while (s->again);
	s->pumping = false;
}

bool
staging_cancel(rma_client_t *c, struct rma_request *parent)
{
	struct staging_xfer *x = parent->xfer;
	struct staging *s = c->staging;

	if (!x->queued || s == NULL)
		return false;
	staging_fail(x, RMA_ERR_CANCELED, "canceled before it was sent");
	/* the pump would end it too; here, so that it ends now */
	parent->refs++;
	staging_xfer_end(c, s, x);
	request_unref(parent);
	return true;
}

/* ---- the calls ---- */

/* One piece, room for it and nobody waiting: the caller's request is
 * the piece. RMA_INPROGRESS when there is no room. */
static rma_status_t
staging_one(rma_client_t *c, struct staging *s, Rma__V1__OpKind kind, void *buf,
	    size_t len, const rma_remote_t *remote, uint64_t remote_offset,
	    unsigned flags, rma_callback_t cb, void *user_data,
	    rma_request_t **req_p)
{
	Rma__V1__Op op = RMA__V1__OP__INIT;
	struct request_stage stage;
	rma_status_t st;

	stage.ext = staging_alloc(s, (uint32_t)len);
	if (stage.ext == 0)
		return RMA_INPROGRESS;
	stage.dst = NULL;
	stage.parent = NULL;
	if (kind == RMA__V1__OP_KIND__PUT)
		memcpy(s->base + staging_ext(s, stage.ext)->off, buf, len);
	else
		stage.dst = buf;
	staging_op(s, &op, kind, stage.ext, len, remote->remote_id,
		   remote_offset, flags);
	/* on failure the extent was given back */
	st = request_submit_staged(c, &op, &stage, cb, user_data, req_p);
	/* as staging_issue: the daemon starts on a big one while the
	 * caller copies its next, rather than when the caller next waits */
	if (st == RMA_OK && c->pending_n > 0 && len >= RMA_BUF_COPY_MAX)
		request_flush(c);
	return st;
}

/* x (made by the caller, and the caller's to free on failure) becomes a
 * request of pieces, queued and pumped. */
static rma_status_t
staging_enqueue(rma_client_t *c, struct staging *s, struct staging_xfer *x,
		rma_callback_t cb, void *user_data, rma_request_t **req_p)
{
	struct rma_request *parent = request_alloc(c);

	if (parent == NULL)
		return client_error(c, RMA_ERR_NO_MEMORY,
				    "no memory for a transfer");
	parent->refs = 1; /* the library's, until the last piece */
	parent->cb = cb;
	parent->user_data = user_data;
	parent->parts_left = 1; /* the queue's hold */
	parent->xfer = x;
	x->req = parent;
	x->reattaches = c->reattaches;
	if (s->q_tail != NULL)
		s->q_tail->next = x;
	else
		s->q_head = x;
	s->q_tail = x;
	s->q_n++;
	x->queued = true;
	if (req_p != NULL) {
		parent->refs++;
		request_hold(c, parent);
		*req_p = parent;
	}
	staging_pump(c);
	return RMA_OK;
}

static rma_status_t
staging_queue_full(rma_client_t *c, const struct staging *s)
{
	return client_error(c, RMA_ERR_LIMIT,
			    "%u transfers (%zu bytes of small puts) wait for "
			    "staging room already: let some complete "
			    "(rma_progress), then retry",
			    s->q_n, s->q_copies);
}

/* A transfer that waits for room behind others, or for lack of it. */
static rma_status_t
staging_queue(rma_client_t *c, struct staging *s, Rma__V1__OpKind kind,
	      void *buf, size_t len, rma_remote_t *remote,
	      uint64_t remote_offset, unsigned flags, rma_callback_t cb,
	      void *user_data, rma_request_t **req_p)
{
	bool small = kind == RMA__V1__OP_KIND__PUT && len <= RMA_BUF_COPY_MAX;
	struct staging_xfer *x;
	rma_status_t st;

	if (s->q_n >= STAGING_QUEUE_MAX ||
	    (small && s->q_copies + len > STAGING_COPIES_MAX))
		return staging_queue_full(c, s);
	x = calloc(1, sizeof(*x));
	if (x == NULL)
		return client_error(c, RMA_ERR_NO_MEMORY,
				    "no memory for a transfer");
	x->buf = buf;
	if (small) {
		/* the caller may reuse its buffer when this returns */
		x->copy = malloc(len);
		if (x->copy == NULL) {
			free(x);
			return client_error(c, RMA_ERR_NO_MEMORY,
					    "no memory for a transfer");
		}
		memcpy(x->copy, buf, len);
		x->buf = x->copy;
		s->q_copies += len;
	}
	x->kind = kind;
	x->len = len;
	x->remote = remote;
	x->remote_offset = remote_offset;
	x->flags = flags;
	remote->staged++;
	st = staging_enqueue(c, s, x, cb, user_data, req_p);
	if (st != RMA_OK) {
		remote->staged--;
		if (small)
			s->q_copies -= len;
		free(x->copy);
		free(x);
	}
	return st;
}

rma_status_t
staging_flush(rma_client_t *c, uint64_t peer_id, rma_callback_t cb,
	      void *user_data, rma_request_t **req_p)
{
	struct staging *s = c->staging;
	struct staging_xfer *x;

	if (s == NULL || s->q_head == NULL)
		return RMA_INPROGRESS;
	if (s->q_n >= STAGING_QUEUE_MAX)
		return staging_queue_full(c, s);
	x = calloc(1, sizeof(*x));
	if (x == NULL)
		return client_error(c, RMA_ERR_NO_MEMORY,
				    "no memory for a flush");
	x->kind = RMA__V1__OP_KIND__FLUSH;
	x->peer_id = peer_id;
	if (staging_enqueue(c, s, x, cb, user_data, req_p) != RMA_OK) {
		free(x);
		return RMA_ERR_NO_MEMORY;
	}
	return RMA_OK;
}

static rma_status_t
staging_transfer(rma_client_t *c, Rma__V1__OpKind kind, void *buf, size_t len,
		 rma_remote_t *remote, uint64_t remote_offset, unsigned flags,
		 rma_callback_t cb, void *user_data, rma_request_t **req_p)
{
	const char *name = kind == RMA__V1__OP_KIND__PUT ? "put" : "get";
	struct staging *s;
	rma_status_t st;

	if (c == NULL)
		return RMA_ERR_INVALID;
	if (fork_inherited(c))
		return fork_error(c);
	if (buf == NULL || remote == NULL)
		return client_error(c, RMA_ERR_INVALID,
				    "%s needs a buffer and a remote", name);
	if (remote->client != c)
		return client_error(c, RMA_ERR_INVALID,
				    "remote of another client");
	if (remote->lost != RMA_OK && (st = peer_remote_revive(c, remote)))
		return st;
	if (len == 0)
		return client_error(c, RMA_ERR_INVALID,
				    "%s of 0 bytes: length must be at least 1",
				    name);
	if (flags & ~RMA_FLAG_REMOTE_COMPLETION)
		return client_error(c, RMA_ERR_INVALID, "unknown %s flags 0x%x",
				    name, flags);
	if (request_decided_here(c, NULL, name, cb, user_data, req_p, &st))
		return st;
	if (remote_offset > remote->length ||
	    len > remote->length - remote_offset)
		return request_complete_now(
		    c, RMA_ERR_OUT_OF_BOUNDS, cb, user_data, req_p,
		    "remote range [%llu, +%zu) is outside the remote region "
		    "of %llu bytes",
		    (unsigned long long)remote_offset, len,
		    (unsigned long long)remote->length);
	st = staging_ready(c, &s);
	if (st != RMA_OK)
		return st;
	if (len <= s->piece && s->q_head == NULL && s->region->lost == RMA_OK) {
		st = staging_one(c, s, kind, buf, len, remote, remote_offset,
				 flags, cb, user_data, req_p);
		if (st != RMA_INPROGRESS)
			return st;
	}
	return staging_queue(c, s, kind, buf, len, remote, remote_offset, flags,
			     cb, user_data, req_p);
}

RMA_API rma_status_t
rma_put_buf(rma_client_t *client, const void *buf, size_t len,
	    rma_remote_t *remote, uint64_t remote_offset, unsigned flags,
	    rma_callback_t cb, void *user_data, rma_request_t **req_p)
{
	/* read only: a put's pieces are copied from it */
	return staging_transfer(client, RMA__V1__OP_KIND__PUT, (void *)buf, len,
				remote, remote_offset, flags, cb, user_data,
				req_p);
}

RMA_API rma_status_t
rma_get_buf(rma_client_t *client, void *buf, size_t len, rma_remote_t *remote,
	    uint64_t remote_offset, rma_callback_t cb, void *user_data,
	    rma_request_t **req_p)
{
	return staging_transfer(client, RMA__V1__OP_KIND__GET, buf, len, remote,
				remote_offset, 0, cb, user_data, req_p);
}

/* A _sync call that timed out: the request goes on without the
 * caller's buffer, which the library neither reads nor writes from now
 * on. Its pieces not issued yet never are, those in flight complete
 * without copying out. */
static void
staging_abandon(rma_client_t *c, struct rma_request *req)
{
	if (req->status != RMA_INPROGRESS)
		return;
	(void)rma_request_cancel(c, req);
	if (req->status != RMA_INPROGRESS)
		return;
	for (uint32_t i = 0; i < c->slots_used; i++) {
		struct rma_request *r = c->slots[i];

		if (r != NULL && (r == req || r->parent == req))
			r->stage_dst = NULL;
	}
}

/* The wait of the _sync forms: rma_request_wait, and if it timed out,
 * staging_abandon. */
static rma_status_t
staging_wait(rma_client_t *c, rma_request_t *req, int timeout_ms)
{
	rma_status_t st = rma_request_wait(c, req, timeout_ms);

	if (st == RMA_ERR_TIMEOUT && req->status == RMA_INPROGRESS)
		staging_abandon(c, req);
	rma_request_release(req);
	return st;
}

RMA_API rma_status_t
rma_put_buf_sync(rma_client_t *client, const void *buf, size_t len,
		 rma_remote_t *remote, uint64_t remote_offset, unsigned flags,
		 int timeout_ms)
{
	rma_request_t *req = NULL;
	rma_status_t st;

	st = rma_put_buf(client, buf, len, remote, remote_offset, flags, NULL,
			 NULL, &req);
	if (st != RMA_OK)
		return st;
	return staging_wait(client, req, timeout_ms);
}

RMA_API rma_status_t
rma_get_buf_sync(rma_client_t *client, void *buf, size_t len,
		 rma_remote_t *remote, uint64_t remote_offset, int timeout_ms)
{
	rma_request_t *req = NULL;
	rma_status_t st;

	st = rma_get_buf(client, buf, len, remote, remote_offset, NULL, NULL,
			 &req);
	if (st != RMA_OK)
		return st;
	return staging_wait(client, req, timeout_ms);
}
