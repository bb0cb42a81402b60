/* SPDX-License-Identifier: BSD-2-Clause */
/* The shared-memory ring (daemon/ring.c, client/ring.c) against real
 * rmad processes: librma gets a ring unless RMA_RING=0 or the daemon says
 * ring = no, and works either way; and a hostile client that maps its
 * ring and writes garbage records, wild counters, or stops taking its
 * completions. The daemon must survive, refuse what the socket path
 * refuses, cut that client off with a clear error, and serve the others
 * meanwhile. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "check_main.h"
#include "faults_common.h"
#include "oprec.h"
#include "raw_frame.h"
#include "ringrec.h"

/* A raw client on a daemon, past a Hello that asked for a ring. */
struct hostile {
	int fd;
	void *map;
	struct ringrec_header *h;
	uint8_t *sub, *comp;
	uint32_t tail; /* submission records written */
};

static int
hostile_wait(int fd, void *arg)
{
	(void)arg;
	return harness_wait_fd(fd, 5);
}

static void
hostile_send(struct hostile *x, const Rma__V1__Request *req)
{
	size_t len;
	uint8_t *buf = raw_frame_pack(&req->base, &len);

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(send(x->fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
	free(buf);
}

/* A raw client's hello asking for a ring (of comp_slots completion
 * slots; 0: as an older librma, none said): x->fd connected, the reply in
 * *m_p (checked: a ring came), the ring's memfd returned. */
static int
hostile_hello(const struct daemon_proc *d, struct hostile *x,
	      uint32_t comp_slots, Rma__V1__DaemonMessage **m_p)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__Hello hello = RMA__V1__HELLO__INIT;
	Rma__V1__DaemonMessage *m;
	int memfd;

	memset(x, 0, sizeof(*x));
	x->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(x->fd, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d->socket);
	ck_assert_int_eq(connect(x->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	hello.protocol_version = RMA_PROTOCOL_VERSION;
	hello.client_name = "hostile-ring";
	hello.ring = 1;
	hello.ring_comp_slots = comp_slots;
	req.id = 1;
	req.body_case = RMA__V1__REQUEST__BODY_HELLO;
	req.hello = &hello;
	hostile_send(x, &req);
	ck_assert_int_eq(raw_frame_recv(x->fd, hostile_wait, NULL, &memfd, &m),
			 1);
	ck_assert_int_eq(m->kind_case, RMA__V1__DAEMON_MESSAGE__KIND_REPLY);
	ck_assert_int_eq(m->reply->status, RMA__V1__STATUS__OK);
	ck_assert_ptr_nonnull(m->reply->hello->ring);
	ck_assert_int_ge(memfd, 0);
	*m_p = m;
	return memfd;
}

static void
hostile_connect(const struct daemon_proc *d, struct hostile *x)
{
	Rma__V1__DaemonMessage *m;
	int memfd = hostile_hello(d, x, 0, &m);

	ck_assert_uint_eq(m->reply->hello->ring->size, RINGREC_SIZE);
	rma__v1__daemon_message__free_unpacked(m, NULL);
	x->map = mmap(NULL, RINGREC_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
		      memfd, 0);
	ck_assert_ptr_ne(x->map, MAP_FAILED);
	/* sealed: a client cannot shrink it under the daemon (SIGBUS) */
	ck_assert_int_lt(ftruncate(memfd, 4096), 0);
	close(memfd);
	x->h = x->map;
	x->sub = (uint8_t *)x->map + x->h->sub_offset;
	x->comp = (uint8_t *)x->map + x->h->comp_offset;
}

static void
hostile_close(struct hostile *x)
{
	munmap(x->map, RINGREC_SIZE);
	close(x->fd);
}

static void hostile_wake(struct hostile *x);

/* Publishes n records from recs, then rings (whether or not the daemon
 * sleeps: a RingWake is always allowed). */
static void
hostile_submit(struct hostile *x, const uint8_t *recs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		memcpy(x->sub +
			   ((x->tail + i) % RINGREC_SUB_SLOTS) * OPREC_SIZE,
		       recs + i * OPREC_SIZE, OPREC_SIZE);
	x->tail += n;
	ringrec_store(&x->h->sub_tail, x->tail);
	hostile_wake(x);
}

/* n put records naming region (the caller's or not) and remote 1. */
static void
put_records(uint8_t *recs, uint32_t n, uint64_t region, uint64_t first_id)
{
	for (uint32_t i = 0; i < n; i++) {
		Rma__V1__Op op = RMA__V1__OP__INIT;

		op.op_id = first_id + i;
		op.kind = RMA__V1__OP_KIND__PUT;
		op.region_id = region;
		op.remote_id = 1;
		op.length = 8;
		oprec_encode(recs + i * OPREC_SIZE, &op);
	}
}

/* Reads frames until the daemon closes the connection (1, with the
 * detail of its error reply in why) or 5 s pass (0). */
static int
hostile_cut_off(struct hostile *x, char *why, size_t why_len)
{
	double deadline = harness_now() + 5;
	Rma__V1__DaemonMessage *m;
	int rc;

	why[0] = '\0';
	while (harness_now() < deadline) {
		rc = raw_frame_recv(x->fd, hostile_wait, NULL, NULL, &m);
		if (rc == 0)
			return 1;
		if (rc < 0)
			return 0;
		if (m->kind_case == RMA__V1__DAEMON_MESSAGE__KIND_REPLY &&
		    m->reply->status != RMA__V1__STATUS__OK)
			snprintf(why, why_len, "%s", m->reply->detail);
		rma__v1__daemon_message__free_unpacked(m, NULL);
	}
	return 0;
}

/* The completions taken from x's ring so far. */
struct ring_comps {
	struct hostile *x;
	uint32_t head; /* slots taken */
	uint32_t n, ok, no_region, other;
	uint32_t socket, events_seen; /* completions over the socket */
	char detail[RINGREC_DETAIL_MAX + 1];
};

static void
hostile_wake(struct hostile *x)
{
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__RingWake wake = RMA__V1__RING_WAKE__INIT;

	req.body_case = RMA__V1__REQUEST__BODY_RING_WAKE;
	req.ring_wake = &wake;
	hostile_send(x, &req);
}

/* Takes what the daemon wrote, as librma would, and rings: the daemon
 * may hold more for want of room. */
static void
ring_comps_take(struct ring_comps *k)
{
	struct hostile *x = k->x;
	uint32_t tail = ringrec_load(&x->h->comp_tail);

	if (tail == k->head)
		return;
	while (k->head != tail) {
		struct ringrec_comp rec;

		memcpy(&rec,
		       x->comp +
			   (k->head % RINGREC_COMP_SLOTS) * RINGREC_COMP_SIZE,
		       sizeof(rec));
		ck_assert_uint_le(rec.detail_len, RINGREC_DETAIL_MAX);
		ck_assert_uint_le(ringrec_comp_slots(rec.detail_len),
				  tail - k->head);
		if (rec.detail_len > 0 && k->detail[0] == '\0') {
			uint32_t len = rec.detail_len < RINGREC_COMP_SIZE
					   ? rec.detail_len
					   : RINGREC_COMP_SIZE;
			memcpy(k->detail,
			       x->comp + ((k->head + 1) % RINGREC_COMP_SLOTS) *
					     RINGREC_COMP_SIZE,
			       len);
		}
		k->head += ringrec_comp_slots(rec.detail_len);
		k->n++;
		if (rec.status == RMA__V1__STATUS__OK)
			k->ok++;
		else if (rec.status == RMA__V1__STATUS__ERR_NO_REGION)
			k->no_region++;
		else
			k->other++;
	}
	ringrec_store(&x->h->comp_head, k->head);
	hostile_wake(x);
}

static int
hostile_no_wait(int fd, void *arg)
{
	(void)arg;
	return harness_wait_fd(fd, 0);
}

/* Completions the ring had no room for come as Completions events: taken
 * (and said so), as librma would. */
static void
ring_comps_socket(struct ring_comps *k)
{
	struct hostile *x = k->x;
	Rma__V1__DaemonMessage *m;

	while (raw_frame_recv(x->fd, hostile_no_wait, NULL, NULL, &m) == 1) {
		if (m->kind_case == RMA__V1__DAEMON_MESSAGE__KIND_EVENT &&
		    m->event->body_case == RMA__V1__EVENT__BODY_COMPLETIONS) {
			const Rma__V1__Completions *cs = m->event->completions;

			for (size_t i = 0; i < cs->n_completions; i++) {
				k->n++;
				k->socket++;
				if (cs->completions[i]->status ==
				    RMA__V1__STATUS__OK)
					k->ok++;
				else if (cs->completions[i]->status ==
					 RMA__V1__STATUS__ERR_NO_REGION)
					k->no_region++;
				else
					k->other++;
			}
			k->n += cs->packed.len / COMPREC_SIZE;
			k->socket += cs->packed.len / COMPREC_SIZE;
			k->other += cs->packed.len / COMPREC_SIZE;
			ringrec_store(&x->h->socket_events_seen,
				      ++k->events_seen);
		}
		rma__v1__daemon_message__free_unpacked(m, NULL);
	}
}

struct comps_wait {
	struct ring_comps *k;
	uint32_t want;
};

static int
comps_at_least(void *arg)
{
	struct comps_wait *w = arg;

	/* the ring first: what it holds came before the socket's */
	ring_comps_take(w->k);
	ring_comps_socket(w->k);
	ring_comps_take(w->k);
	return w->k->n >= w->want;
}

/* ---- librma: a ring by default, the socket when asked or refused --------- */

START_TEST(test_ring_negotiated)
{
	static const char *const no_ring[] = {"--ring=no", NULL};
	rma_client_t *ca, *cb, *c;
	rma_region_t *ra, *rb, *r;
	rma_peer_t *pa, *p;
	rma_remote_t *rema, *rem;

	two_daemons(NULL, NULL, &ca, &ra, &cb, &rb, &pa, &rema);
	ck_assert_ptr_nonnull(cb->ring);
	put_and_check(cb, rb, rema, ra, 0, 4096, 1);
	put_and_check(cb, rb, rema, ra, 64, 8, 2);

	/* RMA_RING=0: the socket alone */
	setenv("RMA_RING", "0", 1);
	client_with_region(&db, &c, &r);
	unsetenv("RMA_RING");
	ck_assert_ptr_null(c->ring);
	import_from(c, &da, ra, &p, &rem);
	put_and_check(c, r, rem, ra, 128, 4096, 3);

	/* a daemon that offers none (as an older one): the socket alone */
	harness_daemon_start(&dc, no_ring);
	client_with_region(&dc, &c, &r);
	ck_assert_ptr_null(c->ring);
	import_from(c, &da, ra, &p, &rem);
	put_and_check(c, r, rem, ra, 256, 65536, 4);
}
END_TEST

/* A raw hello asking for asked completion slots: the slots the ring got,
 * checked against its size, its header and its memfd. */
static uint32_t
hello_comp_slots(const struct daemon_proc *d, uint32_t asked)
{
	Rma__V1__DaemonMessage *m;
	struct ringrec_header *h;
	struct hostile x;
	struct stat st;
	int memfd = hostile_hello(d, &x, asked, &m);
	uint32_t slots = m->reply->hello->ring->comp_slots;
	void *map;

	ck_assert_uint_eq(m->reply->hello->ring->size, RINGREC_SIZE_FOR(slots));
	ck_assert_int_eq(fstat(memfd, &st), 0);
	ck_assert_int_eq(st.st_size, RINGREC_SIZE_FOR(slots));
	map = mmap(NULL, RINGREC_SIZE_FOR(slots), PROT_READ, MAP_SHARED, memfd,
		   0);
	ck_assert_ptr_ne(map, MAP_FAILED);
	h = map;
	ck_assert_uint_eq(h->comp_slots, slots);
	ck_assert_uint_eq(h->size, RINGREC_SIZE_FOR(slots));
	munmap(map, RINGREC_SIZE_FOR(slots));
	rma__v1__daemon_message__free_unpacked(m, NULL);
	close(memfd);
	close(x.fd);
	return slots;
}

/* Whether d maps a ring memfd of size bytes (/proc/PID/maps). */
static bool
daemon_maps_ring(const struct daemon_proc *d, size_t size)
{
	char path[64], line[512];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)d->pid);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	while (!found && fgets(line, sizeof(line), f) != NULL) {
		unsigned long lo, hi;

		if (strstr(line, "rmad-ring") != NULL &&
		    sscanf(line, "%lx-%lx", &lo, &hi) == 2 && hi - lo == size)
			found = true;
	}
	fclose(f);
	return found;
}

/* The completion ring's size: what the client asks for when it is a
 * power of two from 512 to 4096, the default 512 for anything else or
 * nothing (an older librma); librma asks for 4096. */
START_TEST(test_ring_comp_slots)
{
	static const uint32_t wrong[] = {1,    256,   1000,	  2047,
					 8192, 65536, 0x80000000, 0xffffffff};
	rma_client_t *c;
	rma_region_t *r;

	harness_daemon_start(&da, NULL);
	ck_assert_uint_eq(hello_comp_slots(&da, 0), RINGREC_COMP_SLOTS);
	ck_assert_uint_eq(hello_comp_slots(&da, 512), 512);
	ck_assert_uint_eq(hello_comp_slots(&da, 2048), 2048);
	ck_assert_uint_eq(hello_comp_slots(&da, 4096), 4096);
	for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++)
		ck_assert_uint_eq(hello_comp_slots(&da, wrong[i]),
				  RINGREC_COMP_SLOTS);
	/* librma's: the daemon maps a ring of 4096 slots */
	client_with_region(&da, &c, &r);
	ck_assert_ptr_nonnull(c->ring);
	ck_assert_msg(daemon_maps_ring(&da, RINGREC_SIZE_FOR(4096)),
		      "no ring of 4096 completion slots in the daemon");
}
END_TEST

/* ---- a hostile client ---------------------------------------------------- */

/* Garbage and other clients' regions in the ring: each record is refused
 * as a Submit frame's would be, as a completion; the client stays. */
START_TEST(test_ring_garbage_records)
{
	uint8_t recs[RINGREC_SUB_SLOTS * OPREC_SIZE];
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb;
	rma_peer_t *pa;
	rma_remote_t *rema;
	struct hostile x;
	struct ring_comps k = {0};
	struct comps_wait w = {&k, RINGREC_SUB_SLOTS};

	two_daemons(NULL, NULL, &ca, &ra, &cb, &rb, &pa, &rema);
	hostile_connect(&db, &x);
	k.x = &x;

	harness_fill(recs, sizeof(recs), 77);
	hostile_submit(&x, recs, RINGREC_SUB_SLOTS);
	ck_assert_msg(harness_until(5, comps_at_least, &w),
		      "%u completions for %u garbage records", k.n,
		      RINGREC_SUB_SLOTS);
	assert_alive(&db, 0, "after garbage ring records");
	put_and_check(cb, rb, rema, ra, 0, 4096, 5);

	/* B's client's region, named by another client: refused */
	put_records(recs, 16, rb->region_id, 1000);
	hostile_submit(&x, recs, 16);
	w.want = RINGREC_SUB_SLOTS + 16;
	ck_assert(harness_until(5, comps_at_least, &w));
	fprintf(stderr,
		"faults: ring: %u completions for garbage records (%u over "
		"the socket: the ring was full), %u ok, %u no region, %u "
		"other; e.g. \"%s\"\n",
		k.n, k.socket, k.ok, k.no_region, k.other, k.detail);
	ck_assert_uint_eq(k.ok, 0);
	ck_assert_uint_ge(k.no_region, 16);
	ck_assert_uint_eq(k.n, RINGREC_SUB_SLOTS + 16);
	put_and_check(cb, rb, rema, ra, 8192, 65536, 6);
	hostile_close(&x);
}
END_TEST

/* A submission counter beyond the ring: a protocol error, then closed. */
START_TEST(test_ring_wild_tail)
{
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb;
	rma_peer_t *pa;
	rma_remote_t *rema;
	struct hostile x;
	size_t regions, clients;
	char why[256];

	two_daemons(NULL, NULL, &ca, &ra, &cb, &rb, &pa, &rema);
	hostile_connect(&db, &x);
	x.tail = 0x7fffff00u;
	hostile_submit(&x, NULL, 0);
	ck_assert_msg(hostile_cut_off(&x, why, sizeof(why)),
		      "the daemon kept a client with a wild ring counter");
	fprintf(stderr, "faults: ring: wild submission counter: \"%s\"\n", why);
	ck_assert_ptr_nonnull(strstr(why, "shared ring"));
	assert_alive(&db, 0, "after a wild ring counter");
	status_counts(cb, &regions, &clients);
	ck_assert_uint_eq(clients, 1);
	put_and_check(cb, rb, rema, ra, 0, 4096, 7);
	hostile_close(&x);
}
END_TEST

/* The completion counter moved where the daemon wrote nothing. */
START_TEST(test_ring_wild_comp_head)
{
	uint8_t recs[4 * OPREC_SIZE];
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb;
	rma_peer_t *pa;
	rma_remote_t *rema;
	struct hostile x;
	char why[256];

	two_daemons(NULL, NULL, &ca, &ra, &cb, &rb, &pa, &rema);
	hostile_connect(&db, &x);
	ringrec_store(&x.h->comp_head, 123456);
	put_records(recs, 4, 424242, 1);
	hostile_submit(&x, recs, 4);
	ck_assert_msg(hostile_cut_off(&x, why, sizeof(why)),
		      "the daemon kept a client with a wild completion "
		      "counter");
	fprintf(stderr, "faults: ring: wild completion counter: \"%s\"\n", why);
	ck_assert_ptr_nonnull(strstr(why, "shared ring"));
	assert_alive(&db, 0, "after a wild completion counter");
	put_and_check(cb, rb, rema, ra, 0, 4096, 8);
	hostile_close(&x);
}
END_TEST

/* Submits and never takes a completion: once the ring is full they go
 * over the socket, which it does not read either; the daemon stops taking
 * its work (as it stops reading a socket client that does not read) and
 * cuts it off after op_timeout; memory stays bounded and the others are
 * served meanwhile. */
START_TEST(test_ring_not_consuming)
{
	static const char *const flags_b[] = {"--op-timeout", "1", NULL};
	uint8_t recs[RINGREC_SUB_SLOTS * OPREC_SIZE];
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb;
	rma_peer_t *pa;
	rma_remote_t *rema;
	struct hostile x;
	double deadline, stalled = 0, closed = 0, taken_at;
	long rss0, rss_max;
	uint64_t id = 1;
	uint32_t taken = 0;

	two_daemons(NULL, flags_b, &ca, &ra, &cb, &rb, &pa, &rema);
	rss0 = rss_max = harness_rss_kib(db.pid);
	hostile_connect(&db, &x);
	deadline = harness_now() + 20;
	taken_at = harness_now();
	while (harness_now() < deadline && closed == 0) {
		uint32_t head = ringrec_load(&x.h->sub_head);
		uint32_t room = RINGREC_SUB_SLOTS - (x.tail - head);

		if (head != taken) {
			taken = head;
			taken_at = harness_now();
		}
		struct pollfd pfd = {.fd = x.fd, .events = POLLRDHUP};
		long rss = harness_rss_kib(db.pid);

		if (rss > rss_max)
			rss_max = rss;
		if (poll(&pfd, 1, 0) > 0 &&
		    (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
			closed = harness_now();
			break;
		}
		if (room > 0) {
			put_records(recs, room, 424242, id);
			id += room;
			hostile_submit(&x, recs, room);
			continue;
		}
		if (stalled == 0) {
			size_t regions, clients;
			double t = harness_now();

			stalled = t;
			status_counts(cb, &regions, &clients);
			ck_assert_uint_eq(clients, 2);
			put_and_check(cb, rb, rema, ra, 0, 4096, 9);
			fprintf(stderr,
				"faults: ring: while a client takes no "
				"completions (%llu ops submitted): status and "
				"put took %.1f ms\n",
				(unsigned long long)id - 1,
				ms(harness_now() - t));
			ck_assert_double_lt(harness_now() - t, 1.0);
		}
		harness_pause(0.01, deadline);
	}
	ck_assert_msg(stalled > 0, "the daemon never stopped taking work");
	ck_assert_msg(closed > 0, "the daemon never cut the client off");
	fprintf(stderr,
		"faults: ring: client taking no completions (%llu ops) cut "
		"off %.1f ms after the daemon stopped taking its work (op "
		"timeout 1 s); daemon RSS %ld -> max %ld KiB\n",
		(unsigned long long)id - 1, ms(closed - taken_at), rss0,
		rss_max);
	ck_assert_double_lt(closed - taken_at, 3.0);
	ck_assert_int_lt(rss_max - rss0, 32 * 1024);
	assert_alive(&db, 0, "after a client that took no completions");
	put_and_check(cb, rb, rema, ra, 0, 65536, 10);
	hostile_close(&x);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("faults-ring");

	FAULTS_ADD(s, test_ring_negotiated);
	FAULTS_ADD(s, test_ring_comp_slots);
	FAULTS_ADD(s, test_ring_garbage_records);
	FAULTS_ADD(s, test_ring_wild_tail);
	FAULTS_ADD(s, test_ring_wild_comp_head);
	FAULTS_ADD(s, test_ring_not_consuming);
	return check_main_run(s);
}
