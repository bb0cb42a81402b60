/* SPDX-License-Identifier: BSD-2-Clause */
/* rmactl bench: puts or gets to a remote region with up to --window in
 * flight, as fast as the daemon takes them; ops/s, bytes/s and latency
 * percentiles (submit to completion, CLOCK_MONOTONIC).
 *
 * The library coalesces what is submitted between two rma_progress()
 * calls into one frame, so the loop submits a burst up to the window,
 * then progresses. Timestamps live in one array allocated up front: a
 * burst shares one submit time (its ops leave in one frame) and the ops
 * that one rma_progress() completed share one completion time (taken when
 * it returns, which is when the program could act on them). Two clock
 * reads per op would cost as much as the daemon's own work at 8 bytes.
 *
 * bench/raw_ucx.c runs the same loop on raw UCX: keep the two alike. */
#include "rma.h"
#include "bench_params.h"
#include "bench_report.h"
#include "monotime.h"
#include "rmactl.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <time.h>

#define BENCH_TIMEOUT_DEFAULT_S 60
/* The first and the longest back-off (us) after notifying puts came back
 * with LIMIT and none of those sent with them got through: the owner was
 * woken and waits for a CPU, which takes from a tenth of a millisecond to
 * a few on a busy machine; each round that comes too early costs a
 * window of refused puts, each too late the puts of that time. */
#define BENCH_BACKOFF_MIN_US 100
#define BENCH_BACKOFF_MAX_US 2000
/* Local buffer: one slot per op in flight, at most this many bytes. */
#define BENCH_LOCAL_MAX (64ull << 20)

/* One op in flight: what its callback needs. Kept on a free list, as
 * many as the window: no malloc per op. */
struct bench_slot {
	struct bench *b;
	uint64_t op;  /* index in the measured run's stamps */
	uint64_t seq; /* its number among all issued: offset and value */
	struct bench_slot *next;
};

/* A notifying put refused with LIMIT, to put again (see bench_on_done). */
struct bench_retry {
	uint64_t op, seq;
};

struct bench {
	/* arguments */
	const char *peer;
	const char *descriptor_file;
	int get;
	int notify; /* put-notify: rma_put_notify(), the op number as value */
	int atomic; /* an rma_atomic_op_t, or -1: put or get */
	const char *op_name;
	struct bench_params p; /* size, count, window, warm-up */
	int json;
	int remote_completion;
	int from_buffer; /* rma_put_buf / rma_get_buf from buf */
	int timeout_ms;

	/* connection */
	rma_client_t *client;
	rma_peer_t *peer_h;
	rma_remote_t *remote;
	rma_region_t *region;
	uint8_t *buf;	/* --from-buffer: malloc'd, in place of region */
	uint64_t slots; /* local buffer = slots * size bytes */
	uint64_t span;	/* remote length - size + 1 */

	/* run */
	uint64_t next_op; /* ops issued so far, warm-up included */
	uint64_t *stamp;  /* per op: submit time, then latency (ns) */
	uint64_t *done;	  /* ops completed and not yet stamped */
	uint64_t ndone;
	uint64_t in_flight;
	int recording; /* stamps are kept (not the warm-up) */
	struct bench_slot *slot_mem, *slot_free;
	rma_status_t error; /* first failure */
	char error_detail[256];
	/* put-notify: refused because the owner's queue was full */
	struct bench_retry *retry;
	uint64_t retry_n;
	uint64_t retried;    /* in all */
	int room_seen;	     /* one got through after one was refused */
	unsigned backoff_us; /* the next back-off, if none gets through */
	/* the next op in order: its number, local slot and remote offset
	 * before alignment (see bench_offsets) */
	uint64_t next_seq, next_slot, next_off;
};

/* The usage error for a --size, --count, --window or --warmup out of
 * bench_params_set's bounds. */
static int
bench_bad_param(int param, const char *arg)
{
	switch (param) {
	case BENCH_PARAM_SIZE:
		return rmactl_usage_error(RMACTL_BENCH,
					  "bench: bad size \"%s\"", arg);
	case BENCH_PARAM_COUNT:
		return rmactl_usage_error(
		    RMACTL_BENCH, "bench: bad count \"%s\" (1 to %llu)", arg,
		    (unsigned long long)BENCH_COUNT_MAX);
	case BENCH_PARAM_WINDOW:
		return rmactl_usage_error(RMACTL_BENCH,
					  "bench: bad window \"%s\" (1 to %d)",
					  arg, BENCH_WINDOW_MAX);
	default:
		return rmactl_usage_error(RMACTL_BENCH,
					  "bench: bad warmup \"%s\"", arg);
	}
}

/* The checks across options, once all are read; op is --op's text. */
static int
bench_args_check(struct bench *b, const char *op)
{
	b->atomic = op != NULL ? rmactl_atomic_op_parse(op) : -1;
	if (b->atomic >= 0 && b->p.size == 0)
		b->p.size = 8; /* one 64-bit word */
	if (b->peer == NULL || b->descriptor_file == NULL || op == NULL ||
	    b->p.size == 0)
		return rmactl_usage_error(RMACTL_BENCH,
					  "bench: --peer, --descriptor, --op "
					  "and --size are required");
	if (rmactl_check_address(b->peer) < 0)
		return rmactl_usage_error(
		    RMACTL_BENCH,
		    "bench: bad peer address \"%s\" (want "
		    "HOST:PORT)",
		    b->peer);
	b->op_name = op;
	if (b->atomic >= 0) {
		if (b->p.size != 8 && b->p.size != 4)
			return rmactl_usage_error(
			    RMACTL_BENCH, "bench: an atomic's --size is "
					  "8 or 4");
		if (b->atomic == RMA_ATOMIC_CSWAP)
			return rmactl_usage_error(RMACTL_BENCH,
						  "bench: cswap is not "
						  "benchmarked (use swap)");
	} else if (strcmp(op, "put") == 0)
		b->get = 0;
	else if (strcmp(op, "put-notify") == 0)
		b->notify = 1;
	else if (strcmp(op, "get") == 0)
		b->get = 1;
	else
		return rmactl_usage_error(RMACTL_BENCH,
					  "bench: bad op \"%s\" (put, "
					  "put-notify, get, or an atomic: "
					  "fetch-add ...)",
					  op);
	if (b->from_buffer && (b->atomic >= 0 || b->notify))
		return rmactl_usage_error(RMACTL_BENCH,
					  "bench: --from-buffer is for put and "
					  "get");
	if ((b->get || b->atomic >= 0) && b->remote_completion)
		return rmactl_usage_error(RMACTL_BENCH,
					  "bench: --remote-completion is for "
					  "puts (a get completes at the target "
					  "anyway)");
	return 0;
}

/* The warm-up of a bench from a buffer: at least the operations that
 * cycle once over what librma's default staging area gives their size
 * (rma_put_buf: 16 MiB, 256 KiB for transfers of up to 256 bytes; the
 * sizes of client/staging.c, STAGING_SIZE_DEFAULT, STAGING_SMALL_MAX and
 * STAGING_SMALL_RING, which rma.h does not export: an RMA_STAGING_SIZE
 * set in the environment is not followed here). The
 * area is made at the first such call and its pages are touched first by
 * the copies into it: with a warm-up of 4 MiB, 256 timed puts of 1 MiB
 * took 3078 page faults and 72-78 ms of the client's CPU, against 6 and
 * 22-25 ms with this one (getrusage around the timed loop). Timed, they
 * charged the buffer's row with what the region's row does not pay
 * (bench_open touches the region before the clock starts). */
static uint64_t
bench_staging_warmup(uint64_t size, uint64_t warmup)
{
	uint64_t area = size <= 256 ? 256u << 10 : 16u << 20;
	uint64_t n = (area + size - 1) / size;

	return n > warmup ? n : warmup;
}

static int
bench_args(int argc, char **argv, struct bench *b)
{
	static const struct option opts[] = {
	    {"peer", required_argument, NULL, 'p'},
	    {"descriptor", required_argument, NULL, 'd'},
	    {"op", required_argument, NULL, 'o'},
	    BENCH_PARAM_OPTIONS,
	    {"remote-completion", no_argument, NULL, 'r'},
	    {"from-buffer", no_argument, NULL, 'f'},
	    {"json", no_argument, NULL, 'j'},
	    {"timeout", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *op = NULL;
	int c, rc;

	bench_params_init(&b->p);
	b->timeout_ms = BENCH_TIMEOUT_DEFAULT_S * 1000;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			b->peer = optarg;
			break;
		case 'd':
			b->descriptor_file = optarg;
			break;
		case 'o':
			op = optarg;
			break;
		case BENCH_PARAM_SIZE:
		case BENCH_PARAM_COUNT:
		case BENCH_PARAM_WINDOW:
		case BENCH_PARAM_WARMUP:
			if (bench_params_set(&b->p, c, optarg) < 0)
				return bench_bad_param(c, optarg);
			break;
		case 'r':
			b->remote_completion = 1;
			break;
		case 'f':
			b->from_buffer = 1;
			break;
		case 'j':
			b->json = 1;
			break;
		case 't':
			if (rmactl_parse_timeout(optarg, &b->timeout_ms) < 0)
				return rmactl_usage_error(
				    RMACTL_BENCH, "bench: bad timeout \"%s\"",
				    optarg);
			break;
		case 'h':
			fputs(rmactl_cmd_usage[RMACTL_BENCH], stdout);
			return -1;
		default:
			return rmactl_usage_error(RMACTL_BENCH,
						  "bench: unknown option %s",
						  argv[optind - 1]);
		}
	}
	if (optind != argc)
		return rmactl_usage_error(RMACTL_BENCH,
					  "bench: unexpected argument %s",
					  argv[optind]);
	rc = bench_args_check(b, op);
	if (rc != 0)
		return rc;
	bench_params_default(&b->p);
	if (b->from_buffer && !b->p.have_warmup)
		b->p.warmup = bench_staging_warmup(b->p.size, b->p.warmup);
	return 0;
}

static void
bench_on_done(rma_request_t *req, rma_status_t st, void *user_data)
{
	struct bench_slot *slot = user_data;
	struct bench *b = slot->b;

	/* The owner is behind on its notifications and nothing was written:
	 * rma_put_notify says to back off and put again, and that is what a
	 * program streaming notifying puts does. */
	if (st == RMA_ERR_LIMIT && b->notify) {
		b->retry[b->retry_n].op = slot->op;
		b->retry[b->retry_n].seq = slot->seq;
		b->retry_n++;
		b->retried++;
		b->in_flight--;
		slot->next = b->slot_free;
		b->slot_free = slot;
		return;
	}
	/* Applied after one that was refused: the owner took some since.
	 * Applied with none waiting: the episode is over, and the next one
	 * starts with the shortest back-off again. */
	if (st == RMA_OK && b->retry_n > 0)
		b->room_seen = 1;
	else if (st == RMA_OK)
		b->backoff_us = BENCH_BACKOFF_MIN_US;
	if (st != RMA_OK && b->error == RMA_OK) {
		b->error = st;
		snprintf(b->error_detail, sizeof(b->error_detail), "%s",
			 rma_request_detail(req));
	}
	if (b->recording)
		b->done[b->ndone++] = slot->op;
	b->in_flight--;
	slot->next = b->slot_free;
	b->slot_free = slot;
}

/* Connect, reach the peer, import the descriptor, make the buffers. */
static int
bench_open(struct bench *b, const char *desc)
{
	uint64_t rlen, local;
	rma_status_t st;

	st = rma_connect(rmactl_socket, &b->client);
	if (st != RMA_OK) {
		b->client = NULL;
		return rmactl_fail("bench", st, NULL);
	}
	st = rma_peer_connect(b->client, b->peer, &b->peer_h);
	if (st == RMA_OK)
		st = rma_remote_import(b->client, b->peer_h, desc, &b->remote);
	if (st != RMA_OK)
		return rmactl_fail("bench", st, b->client);
	rlen = rma_remote_length(b->remote);
	if (b->p.size > rlen)
		return rmactl_errx(EX_DATAERR, "bench",
				   "size %" PRIu64 " is bigger than the remote "
				   "region (%" PRIu64 " bytes)",
				   b->p.size, rlen);
	b->span = rlen - b->p.size + 1;
	b->slots = BENCH_LOCAL_MAX / b->p.size;
	if (b->slots > b->p.window)
		b->slots = b->p.window;
	if (b->slots == 0)
		b->slots = 1;
	local = b->slots * b->p.size;
	if (b->from_buffer) {
		/* the application's own memory: librma stages it */
		b->buf = malloc((size_t)local);
		if (b->buf == NULL)
			return rmactl_errx(EX_SOFTWARE, "bench",
					   "out of memory");
	} else {
		st = rma_region_alloc(b->client, (size_t)local, &b->region);
		if (st != RMA_OK) {
			b->region = NULL;
			return rmactl_fail("bench", st, b->client);
		}
		b->buf = rma_region_ptr(b->region);
	}
	/* touch it: page faults are not what we measure */
	memset(b->buf, 0xa5, (size_t)local);

	b->stamp = calloc(b->p.count, sizeof(*b->stamp));
	b->done = calloc(b->p.window, sizeof(*b->done));
	b->slot_mem = calloc(b->p.window, sizeof(*b->slot_mem));
	b->retry = calloc(b->p.window, sizeof(*b->retry));
	if (b->stamp == NULL || b->done == NULL || b->slot_mem == NULL ||
	    b->retry == NULL)
		return rmactl_errx(EX_SOFTWARE, "bench", "out of memory");
	b->backoff_us = BENCH_BACKOFF_MIN_US;
	for (uint64_t i = 0; i < b->p.window; i++) {
		b->slot_mem[i].b = b;
		b->slot_mem[i].next = b->slot_free;
		b->slot_free = &b->slot_mem[i];
	}
	return 0;
}

static void
bench_close(struct bench *b)
{
	/* disconnecting completes what is still in flight (callbacks run,
	 * so the slots must still be there) */
	if (b->client != NULL) {
		if (b->region != NULL)
			rma_region_free(b->client, b->region);
		rma_disconnect(b->client);
	}
	if (b->from_buffer)
		free(b->buf);
	free(b->stamp);
	free(b->done);
	free(b->slot_mem);
	free(b->retry);
}

/* Remote offsets cycle over the region, aligned to the size, so that
 * every size fits. */
static uint64_t
bench_remote_offset(const struct bench *b, uint64_t i)
{
	unsigned __int128 off = (unsigned __int128)i * b->p.size % b->span;

	return (uint64_t)off / b->p.size * b->p.size;
}

/* The local and remote offsets of op number seq. The ops issued in
 * order take theirs from the one before, without a division, for a size
 * that is a power of two and fits the span twice: the two divisions an op
 * (one of 128 bits) were 8% of the client's time at 8 B, window 256. The
 * same offsets as bench_remote_offset's either way. */
static void
bench_offsets(struct bench *b, uint64_t seq, uint64_t *local_p,
	      uint64_t *remote_p)
{
	uint64_t size = b->p.size;

	if (seq != b->next_seq || (size & (size - 1)) != 0 || size >= b->span) {
		*local_p = seq % b->slots * size;
		*remote_p = bench_remote_offset(b, seq);
		return;
	}
	/* next_off is seq * size % span */
	*local_p = b->next_slot * size;
	*remote_p = b->next_off & ~(size - 1);
	b->next_seq++;
	if (++b->next_slot == b->slots)
		b->next_slot = 0;
	b->next_off += size;
	if (b->next_off >= b->span)
		b->next_off -= b->span;
}

/* Issues op (its stamp index) as number seq of all issued: new, or
 * again after LIMIT. */
static int
bench_issue(struct bench *b, uint64_t op, uint64_t seq)
{
	struct bench_slot *slot = b->slot_free;
	uint64_t local, remote;
	rma_status_t st;

	bench_offsets(b, seq, &local, &remote);

	b->slot_free = slot->next;
	slot->op = op;
	slot->seq = seq;
	if (b->atomic >= 0)
		st = rma_atomic(b->client, b->remote, remote,
				(rma_atomic_op_t)b->atomic, (unsigned)b->p.size,
				1, 0, bench_on_done, slot, NULL);
	else if (b->from_buffer && b->get)
		st = rma_get_buf(b->client, b->buf + local, b->p.size,
				 b->remote, remote, bench_on_done, slot, NULL);
	else if (b->from_buffer)
		st = rma_put_buf(
		    b->client, b->buf + local, b->p.size, b->remote, remote,
		    b->remote_completion ? RMA_FLAG_REMOTE_COMPLETION : 0,
		    bench_on_done, slot, NULL);
	else if (b->get)
		st = rma_get(b->client, b->region, local, b->remote, remote,
			     b->p.size, bench_on_done, slot, NULL);
	else if (b->notify)
		st = rma_put_notify(
		    b->client, b->region, local, b->remote, remote, b->p.size,
		    seq, b->remote_completion ? RMA_FLAG_REMOTE_COMPLETION : 0,
		    bench_on_done, slot, NULL);
	else
		st = rma_put(
		    b->client, b->region, local, b->remote, remote, b->p.size,
		    b->remote_completion ? RMA_FLAG_REMOTE_COMPLETION : 0,
		    bench_on_done, slot, NULL);
	if (st != RMA_OK) {
		slot->next = b->slot_free;
		b->slot_free = slot;
		return rmactl_fail("bench", st, b->client);
	}
	b->in_flight++;
	return 0;
}

static int
bench_submit(struct bench *b, uint64_t op, uint64_t now)
{
	int rc = bench_issue(b, op, b->next_op);

	if (rc != 0)
		return rc;
	if (b->recording)
		b->stamp[op] = now;
	b->next_op++;
	return 0;
}

/* Sleeps us microseconds (a signal may end it sooner). */
static void
bench_sleep_us(unsigned us)
{
	struct timespec ts = {.tv_sec = us / 1000000,
			      .tv_nsec = (long)(us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

/* Puts again what came back with LIMIT, as rma_put_notify advises: once
 * the puts sent with them are back (nothing new goes out meanwhile), at
 * once if one of those got through (the owner has room again), else
 * after a back-off that leaves the owner the CPU to catch up, doubled
 * while rounds keep failing whole. Their latency counts from the first
 * try. */
static int
bench_resubmit(struct bench *b)
{
	int rc;

	if (b->retry_n == 0 || b->in_flight > 0)
		return 0;
	if (b->room_seen) {
		b->backoff_us = BENCH_BACKOFF_MIN_US;
	} else {
		bench_sleep_us(b->backoff_us);
		if (b->backoff_us < BENCH_BACKOFF_MAX_US)
			b->backoff_us *= 2;
	}
	b->room_seen = 0;
	while (b->retry_n > 0 && b->in_flight + b->ndone < b->p.window) {
		b->retry_n--;
		rc = bench_issue(b, b->retry[b->retry_n].op,
				 b->retry[b->retry_n].seq);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* Runs n ops (recorded or not), window in flight, until all completed. */
static int
bench_loop(struct bench *b, uint64_t n)
{
	uint64_t submitted = 0, completed = 0, now, last = monotime_ns();
	uint64_t timeout_ns = (uint64_t)b->timeout_ms * 1000000u;
	rma_status_t st;
	int rc, left;

	b->ndone = 0;
	while (completed < n) {
		now = monotime_ns();
		rc = bench_resubmit(b);
		if (rc != 0)
			return rc;
		/* the refused go first: nothing new while any waits */
		while (b->error == RMA_OK && submitted < n && b->retry_n == 0 &&
		       b->in_flight + b->ndone < b->p.window) {
			rc = bench_submit(b, submitted, now);
			if (rc != 0)
				return rc;
			submitted++;
		}
		st = rma_progress(b->client);
		if (st != RMA_OK)
			return rmactl_fail("bench", st, b->client);
		if (b->error != RMA_OK)
			return rmactl_errx(rmactl_exit_code(b->error), "bench",
					   "%s%s%s", rma_strerror(b->error),
					   b->error_detail[0] ? ": " : "",
					   b->error_detail);
		if (submitted - b->in_flight - b->retry_n > completed) {
			now = monotime_ns();
			for (uint64_t k = 0; k < b->ndone; k++)
				b->stamp[b->done[k]] =
				    now - b->stamp[b->done[k]];
			b->ndone = 0;
			completed = submitted - b->in_flight - b->retry_n;
			last = now;
			continue;
		}
		/* nothing came: sleep until the daemon says something, or
		 * put again what was refused (an owner that never catches
		 * up times the run out as well) */
		now = monotime_ns();
		if (now - last >= timeout_ns)
			return rmactl_errx(
			    EX_TEMPFAIL, "bench",
			    "timeout: no completion within "
			    "%.1f s (%" PRIu64 " of %" PRIu64 " done)",
			    b->timeout_ms / 1000.0, completed, n);
		if (b->retry_n > 0 && b->in_flight == 0)
			continue; /* bench_resubmit backs off */
		left = (int)((timeout_ns - (now - last)) / 1000000u) + 1;
		/* rma_wait spins on the shared ring while ops are in flight,
		 * then sleeps on rma_fd(); a timeout is judged above */
		st = rma_wait(b->client, left);
		if (st != RMA_OK && st != RMA_ERR_TIMEOUT)
			return rmactl_fail("bench", st, b->client);
	}
	return 0;
}

static int
bench_report(const struct bench *b, double seconds)
{
	struct bench_result r = {
	    .tool = "rmad",
	    .get = b->get,
	    .op = b->atomic >= 0 || b->notify ? b->op_name : NULL,
	    .size = b->p.size,
	    .count = b->p.count,
	    .window = b->p.window,
	    .remote_completion = b->remote_completion,
	    .seconds = seconds,
	    .latency_ns = b->stamp,
	};

	if (bench_report_print(&r, b->json) < 0)
		return rmactl_errx(EX_IOERR, "bench", "write to stdout: %s",
				   strerror(errno));
	if (b->retried > 0)
		fprintf(stderr,
			"rmactl: bench: %" PRIu64 " notifying puts found the "
			"owner's queue full (LIMIT, nothing written) and were "
			"put again\n",
			b->retried);
	return 0;
}

int
rmactl_bench_run(int argc, char **argv)
{
	struct bench b = {0};
	uint64_t t0, t1;
	rma_status_t st;
	char *desc;
	int rc;

	rc = bench_args(argc, argv, &b);
	if (rc != 0)
		return rc < 0 ? 0 : rc;
	rc = rmactl_file_read_descriptor("bench", b.descriptor_file, &desc);
	if (rc != 0)
		return rc;
	rc = bench_open(&b, desc);
	free(desc);
	if (rc != 0)
		goto out;

	if (b.p.warmup > 0) {
		rc = bench_loop(&b, b.p.warmup);
		if (rc != 0)
			goto out;
	}
	b.recording = 1;
	t0 = monotime_ns();
	rc = bench_loop(&b, b.p.count);
	if (rc != 0)
		goto out;
	/* puts count once they are at the target, as raw_ucx's do */
	if (!b.get && b.atomic < 0) {
		st = rma_flush_sync(b.client, b.peer_h, b.timeout_ms);
		if (st != RMA_OK) {
			rc = rmactl_fail("bench", st, b.client);
			goto out;
		}
	}
	t1 = monotime_ns();
	rc = bench_report(&b, (double)(t1 - t0) / 1e9);
out:
	bench_close(&b);
	return rc;
}
