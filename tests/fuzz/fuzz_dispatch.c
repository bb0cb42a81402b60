/* SPDX-License-Identifier: BSD-2-Clause */
/* Fuzz target: the daemon's whole client path in process, as
 * tests/test_protocol.c drives it: conn.c's reader, request.c's dispatch
 * table and every handler behind it, over a socketpair, with a real UCX
 * worker.
 *
 * Input: [flags][chunk][stream...] (see fuzz.h). flags & 1 puts a valid
 * Hello frame before the stream, so that the fuzzer gets past the
 * handshake. flags & 2 (with 1) asks for the shared ring in that Hello,
 * and the stream is then a list of steps on the ring and the socket
 * (fuzz_ring_step): records into the submission ring, wild counters,
 * completions taken, frames. The ring's records go through the very
 * validation a Submit frame's do (daemon/ring.c: op_submit_packed).
 * flags & 4 (without the ring) sends a sealed memfd of 64 KiB as
 * SCM_RIGHTS with every chunk, wherever the chunk starts: the fds a
 * RegionRegister takes (daemon/conn_fds.c), and those it must refuse. One
 * daemon per process, started on the first input. Per input: a new client; the
 * stream written in chunks, the daemon's loop pumped and its output drained
 * between chunks; then end of file, and the loop pumped until the daemon
 * dropped the client. Aborts when the daemon sends something that is not a
 * frame of DaemonMessage, an error reply without a detail, keeps a client that
 * closed, keeps its regions, file descriptors or operations in flight after it
 * left.
 *
 * So that an input means the same whatever ran before it, the daemon has a
 * fixed identity (FUZZ_DAEMON_ID: descriptors in the corpus name its
 * regions), region ids and generations (see getrandom below) restart for
 * each input, and the peer table is rebuilt after an input that made
 * peers. Host names never resolve (no DNS in a fuzzer). The operation
 * timeout is 0.1 s, so freed ranges leave quarantine (twice that) while
 * the fuzzer runs instead of piling up. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon.h"
#include "fdpass.h"
#include "fuzz.h"
#include "oprec.h"
#include "raw_frame.h"
#include "ringrec.h"

/* Seconds the daemon gets for anything it must do on its own. */
#define FUZZ_PATIENCE 10.0

static struct daemon d;
static bool started;
static uint8_t *hello_frame, *ring_hello_frame;
static size_t hello_len, ring_hello_len;
static bool verbose;
static int fd_baseline = -1; /* sockets and memfds between inputs */
static int pass_fd = -1;     /* flags & 4: a sealed memfd sent with chunks */

struct fuzz_client {
	int fd;
	struct frame_reader out; /* what the daemon sent */
	bool want_ring;		 /* keep the first fd: the ring's memfd */
	int ring_fd;
};

static void
fuzz_fail(const char *what)
{
	fprintf(stderr, "fuzz_dispatch: %s\n", what);
	abort();
}

/* No DNS: a name in a PeerConnect would make the input wait on the
 * network. Numeric addresses resolve as usual. */
int
getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
	    struct addrinfo **res)
{
	static int (*real)(const char *, const char *, const struct addrinfo *,
			   struct addrinfo **);
	struct addrinfo h = {0};

	if (real == NULL) {
		*(void **)&real = dlsym(RTLD_NEXT, "getaddrinfo");
		if (real == NULL)
			fuzz_fail("no getaddrinfo to call");
	}
	if (hints != NULL)
		h = *hints;
	h.ai_flags |= AI_NUMERICHOST;
	return real(node, service, &h, res);
}

/* Region generations come from getrandom(): counted instead (1, 2, ...
 * from each input's start), so that descriptors in the corpus can name
 * the regions an input makes. */
static uint64_t random_count;

ssize_t
getrandom(void *buf, size_t len, unsigned int flags)
{
	for (size_t i = 0; i < len; i += sizeof(random_count)) {
		size_t n = len - i;

		if (n > sizeof(random_count))
			n = sizeof(random_count);
		random_count++;
		memcpy((uint8_t *)buf + i, &random_count, n);
	}
	return (ssize_t)len;
}

static void
fuzz_stop(void)
{
	if (!started)
		return;
	daemon_stop(&d);
	free(hello_frame);
	free(ring_hello_frame);
	started = false;
}

static void
fuzz_start(void)
{
	struct config cfg;

	config_defaults(&cfg);
	cfg.listen_port = 0; /* any free port */
	cfg.log_level = LOG_LEVEL_ERROR;
	cfg.op_timeout = 0.1;
	verbose = getenv("FUZZ_VERBOSE") != NULL;
	log_init(cfg.log_level);
	if (daemon_start(&d, &cfg) < 0)
		fuzz_fail("daemon_start failed");
	memcpy(d.id, FUZZ_DAEMON_ID, DAEMON_ID_SIZE);
	descriptor_hex(d.id, DAEMON_ID_SIZE, d.id_hex);
	pass_fd =
	    memfd_create("fuzz-register", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (pass_fd < 0 || ftruncate(pass_fd, 65536) < 0 ||
	    fcntl(pass_fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0)
		fuzz_fail("cannot make the memfd to pass");
	hello_frame = raw_frame_hello(1, "fuzz", &hello_len);
	if (hello_frame == NULL)
		fuzz_fail("out of memory");
	{
		Rma__V1__Request req = RMA__V1__REQUEST__INIT;
		Rma__V1__Hello hello = RMA__V1__HELLO__INIT;

		hello.protocol_version = RMA_PROTOCOL_VERSION;
		hello.client_name = "fuzz-ring";
		hello.ring = 1;
		req.id = 1;
		req.body_case = RMA__V1__REQUEST__BODY_HELLO;
		req.hello = &hello;
		ring_hello_frame = raw_frame_pack(&req.base, &ring_hello_len);
		if (ring_hello_frame == NULL)
			fuzz_fail("out of memory");
	}
	started = true;
	/* Torn down at exit, so that LeakSanitizer sees what the daemon's
	 * own shutdown leaves behind. */
	atexit(fuzz_stop);
}

/* FUZZ_VERBOSE=1: what the daemon answers, to check a corpus. */
static void
fuzz_print(const Rma__V1__DaemonMessage *m)
{
	if (m->kind_case == RMA__V1__DAEMON_MESSAGE__KIND_REPLY) {
		fprintf(stderr, "  reply %llu: %s %s\n",
			(unsigned long long)m->reply->id,
			protobuf_c_enum_descriptor_get_value(
			    &rma__v1__status__descriptor, m->reply->status)
			    ->name,
			m->reply->detail);
		return;
	}
	if (m->kind_case == RMA__V1__DAEMON_MESSAGE__KIND_EVENT &&
	    m->event->body_case == RMA__V1__EVENT__BODY_COMPLETIONS) {
		const Rma__V1__Completions *cs = m->event->completions;
		for (size_t i = 0; i < cs->n_completions; i++)
			fprintf(stderr, "  op %llu: %s %llu bytes %s\n",
				(unsigned long long)cs->completions[i]->op_id,
				protobuf_c_enum_descriptor_get_value(
				    &rma__v1__status__descriptor,
				    cs->completions[i]->status)
				    ->name,
				(unsigned long long)cs->completions[i]->bytes,
				cs->completions[i]->detail);
		return;
	}
	fprintf(stderr, "  event %d\n", (int)m->event->body_case);
}

static void
check_message(const uint8_t *payload, size_t len)
{
	Rma__V1__DaemonMessage *m;

	m = rma__v1__daemon_message__unpack(NULL, len, payload);
	if (m == NULL)
		fuzz_fail(
		    "the daemon sent a frame that is not a DaemonMessage");
	if (verbose)
		fuzz_print(m);
	if (m->kind_case == RMA__V1__DAEMON_MESSAGE__KIND_REPLY &&
	    m->reply->status != RMA__V1__STATUS__OK &&
	    (m->reply->detail == NULL || m->reply->detail[0] == '\0'))
		fuzz_fail("the daemon sent an error reply without a detail");
	rma__v1__daemon_message__free_unpacked(m, NULL);
}

/* Reads what the daemon sent; passed fds (region memfds) are closed. */
static void
client_drain(struct fuzz_client *fc)
{
	for (;;) {
		union {
			char buf[CMSG_SPACE(16 * sizeof(int))];
			struct cmsghdr align;
		} cbuf;
		struct iovec iov;
		struct msghdr mh = {0};
		const uint8_t *payload;
		uint8_t *p;
		size_t avail, len;
		ssize_t n;
		int rc;

		if (frame_reader_space(&fc->out, &p, &avail) < 0)
			fuzz_fail("the daemon sent an oversize frame");
		iov.iov_base = p;
		iov.iov_len = avail;
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cbuf.buf;
		mh.msg_controllen = sizeof(cbuf.buf);
		n = recvmsg(fc->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm != NULL;
		     cm = CMSG_NXTHDR(&mh, cm)) {
			size_t nfds =
			    (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			if (cm->cmsg_level != SOL_SOCKET ||
			    cm->cmsg_type != SCM_RIGHTS)
				continue;
			for (size_t i = 0; i < nfds; i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int),
				       sizeof(int));
				if (fc->want_ring && fc->ring_fd < 0)
					fc->ring_fd = fd; /* the HelloReply's */
				else
					close(fd);
			}
		}
		if (mh.msg_flags & MSG_CTRUNC)
			fuzz_fail(
			    "the daemon passed more fds than a frame names");
		frame_reader_commit(&fc->out, (size_t)n);
		while ((rc = frame_reader_next(&fc->out, &payload, &len)) ==
		       FRAME_READY)
			check_message(payload, len);
		if (rc < 0)
			fuzz_fail("the daemon sent an oversize frame");
	}
}

static void
pump(struct fuzz_client *fc, int spins)
{
	event_base_loop(d.base, EVLOOP_NONBLOCK);
	client_drain(fc);
	/* Waiting on the daemon (a timer, UCX): do not spin hot. */
	if (spins > 100)
		poll(NULL, 0, 1);
}

/* Writes p to the client socket, pumping the daemon while the socket is
 * full. Returns false once the daemon closed its end. */
/* One send; fd (if >= 0) rides on its first byte. */
static ssize_t
client_send(struct fuzz_client *fc, const uint8_t *p, size_t n, int fd)
{
	return fdpass_send(fc->fd, p, n, &fd, fd >= 0 ? 1 : 0, MSG_DONTWAIT);
}

static bool
client_write_fd(struct fuzz_client *fc, const uint8_t *p, size_t n, int fd)
{
	double deadline = daemon_now() + FUZZ_PATIENCE;
	int spins = 0;

	while (n > 0) {
		ssize_t k = client_send(fc, p, n, fd);
		if (k > 0) {
			fd = -1;
			p += k;
			n -= (size_t)k;
			spins = 0;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			pump(fc, ++spins);
			if (daemon_now() > deadline)
				fuzz_fail("the daemon stopped reading a client "
					  "that reads its replies");
			continue;
		}
		return false; /* EPIPE, ECONNRESET: the daemon closed */
	}
	pump(fc, 0);
	return true;
}

static bool
client_write(struct fuzz_client *fc, const uint8_t *p, size_t n)
{
	return client_write_fd(fc, p, n, -1);
}

/* ---- the shared ring (flags & 2) ---- */

struct fuzz_ring {
	struct ringrec_header *h;
	uint8_t *sub;
	uint32_t tail;
};

static bool
fuzz_ring_wake(struct fuzz_client *fc)
{
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__RingWake wake = RMA__V1__RING_WAKE__INIT;
	uint8_t *buf;
	size_t len;
	bool open;

	req.body_case = RMA__V1__REQUEST__BODY_RING_WAKE;
	req.ring_wake = &wake;
	buf = raw_frame_pack(&req.base, &len);
	if (buf == NULL)
		fuzz_fail("out of memory");
	open = client_write(fc, buf, len);
	free(buf);
	return open;
}

static uint32_t
fuzz_u32(const uint8_t *p, size_t n)
{
	uint32_t v = 0;

	memcpy(&v, p, n < sizeof(v) ? n : sizeof(v));
	return v;
}

/* One step: a control byte, then its bytes; returns the bytes used, or 0
 * once the daemon closed the client. Control & 3: 0 one submission record
 * (up to 64 bytes, zero padded); 1 the submission counter set to a u32;
 * 2 the completion counter set to a u32; 3 the completions taken, then
 * control >> 2 bytes written to the socket as they are. A step that
 * wrote no socket bytes rings (RingWake), as the daemon may sleep. */
static size_t
fuzz_ring_step(struct fuzz_client *fc, struct fuzz_ring *r, const uint8_t *p,
	       size_t n)
{
	uint8_t ctl = p[0];
	size_t k;

	p++;
	n--;
	switch (ctl & 3) {
	case 0:
		k = n < OPREC_SIZE ? n : OPREC_SIZE;
		memset(r->sub + (r->tail % RINGREC_SUB_SLOTS) * OPREC_SIZE, 0,
		       OPREC_SIZE);
		memcpy(r->sub + (r->tail % RINGREC_SUB_SLOTS) * OPREC_SIZE, p,
		       k);
		r->tail++;
		ringrec_store(&r->h->sub_tail, r->tail);
		break;
	case 1:
		k = n < 4 ? n : 4;
		r->tail = fuzz_u32(p, k);
		ringrec_store(&r->h->sub_tail, r->tail);
		break;
	case 2:
		k = n < 4 ? n : 4;
		ringrec_store(&r->h->comp_head, fuzz_u32(p, k));
		break;
	default:
		ringrec_store(&r->h->comp_head, ringrec_load(&r->h->comp_tail));
		k = (size_t)(ctl >> 2) < n ? (size_t)(ctl >> 2) : n;
		/* bytes of the socket's stream: a RingWake would cut a
		 * frame written in pieces */
		if (k > 0)
			return client_write(fc, p, k) ? 1 + k : 0;
		break;
	}
	if (!fuzz_ring_wake(fc))
		return 0;
	return 1 + k;
}

/* Sockets and memfds open: what a client could make the daemon keep.
 * (Not pipes: the sanitizers' symbolizer comes and goes through them.) */
static int
count_fds(void)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (dir == NULL)
		return -1;
	while ((e = readdir(dir)) != NULL) {
		char target[64];
		ssize_t len = readlinkat(dirfd(dir), e->d_name, target,
					 sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = '\0';
		n += strncmp(target, "socket:", 7) == 0 ||
		     strncmp(target, "/memfd:", 7) == 0;
	}
	closedir(dir);
	return n;
}

/* Rebuilds the peer table and its listener, as at start (on any free
 * port: the configuration's 0). */
static void
fuzz_reset_peers(void)
{
	peer_system_stop(&d);
	d.world->next_peer_id = 1;
	if (peer_system_start(&d) < 0)
		fuzz_fail("cannot restart the peer system");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_client fc = {.ring_fd = -1};
	struct fuzz_chunker ch;
	struct fuzz_ring ring = {0};
	void *ring_map = MAP_FAILED;
	double deadline;
	bool open = true;
	int sv[2], spins = 0;

	if (size < 2)
		return 0;
	if (!started)
		fuzz_start();
	if (!TAILQ_EMPTY(&d.conns))
		fuzz_fail("a client of an earlier input is still there");
	if (d.world->regions.count != 0)
		fuzz_fail("regions of a gone client are still in the table");
	d.world->next_region_id = 1;
	random_count = 0;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		fuzz_fail("socketpair failed");
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	conn_create(&d, sv[0]); /* sv[0] is the daemon's now */
	if (TAILQ_EMPTY(&d.conns))
		fuzz_fail("conn_create did not take the client");
	fc.fd = sv[1];
	frame_reader_init(&fc.out, 64u << 20);

	fc.want_ring = (data[0] & 3) == 3;
	if (fc.want_ring)
		open = client_write(&fc, ring_hello_frame, ring_hello_len);
	else if (data[0] & 1)
		open = client_write(&fc, hello_frame, hello_len);
	if (fc.want_ring && open) {
		/* the HelloReply, with the ring's memfd */
		deadline = daemon_now() + FUZZ_PATIENCE;
		while (fc.ring_fd < 0 && daemon_now() < deadline)
			pump(&fc, ++spins);
		if (fc.ring_fd < 0)
			fuzz_fail("no ring for a Hello that asked for one");
		ring_map = mmap(NULL, RINGREC_SIZE, PROT_READ | PROT_WRITE,
				MAP_SHARED, fc.ring_fd, 0);
		close(fc.ring_fd);
		if (ring_map == MAP_FAILED)
			fuzz_fail("cannot map the daemon's ring");
		ring.h = ring_map;
		ring.sub = (uint8_t *)ring_map + ring.h->sub_offset;
		for (size_t off = 2, k; open && off < size; off += k) {
			k = fuzz_ring_step(&fc, &ring, data + off, size - off);
			open = k > 0;
		}
	}
	fuzz_chunker_init(&ch, data[1]);
	for (size_t off = 2, k; !fc.want_ring && open && off < size; off += k) {
		k = fuzz_chunker_next(&ch, size - off);
		open = client_write_fd(&fc, data + off, k,
				       (data[0] & 4) ? pass_fd : -1);
	}

	shutdown(fc.fd, SHUT_WR);
	deadline = daemon_now() + FUZZ_PATIENCE;
	while (!TAILQ_EMPTY(&d.conns)) {
		pump(&fc, ++spins);
		if (daemon_now() > deadline)
			fuzz_fail("the daemon did not drop a client that "
				  "closed its socket");
	}
	client_drain(&fc);
	close(fc.fd);
	frame_reader_cleanup(&fc.out);
	if (ring_map != MAP_FAILED)
		munmap(ring_map, RINGREC_SIZE);

	/* What the client left in flight must finish on its own. */
	deadline = daemon_now() + FUZZ_PATIENCE;
	while (d.ops_in_flight > 0) {
		event_base_loop(d.base, EVLOOP_NONBLOCK);
		poll(NULL, 0, 1);
		if (daemon_now() > deadline)
			fuzz_fail("operations of a gone client stay in flight");
	}
	/* Between inputs the daemon holds no more sockets and memfds than
	 * before, unless peers were made (UCX's sockets, closed in UCX's own
	 * time): then measure anew. */
	if (!TAILQ_EMPTY(&d.peers)) {
		fuzz_reset_peers();
		fd_baseline = -1;
	} else {
		int fds = count_fds();
		if (fd_baseline >= 0 && fds > fd_baseline)
			fuzz_fail("the daemon kept a socket or memfd of a gone "
				  "client");
		fd_baseline = fds;
	}
	return 0;
}
