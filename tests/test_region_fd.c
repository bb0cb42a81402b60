/* SPDX-License-Identifier: BSD-2-Clause */
/* Protocol: RegionRegister and the fds a client sends (daemon/conn_fds.c,
 * daemon/region_fd.c), driven over a socketpair in process with a real
 * UCX worker, as a client speaking the protocol wrongly on purpose would:
 * no fd, two, an fd with another request or in the middle of a frame,
 * fds that are not sealed memory files, ranges outside the file. Every
 * refused fd is closed, and the daemon goes on serving. */
#include <check.h>

#include "check_main.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "daemon.h"
#include "fdpass.h"
#include "raw_frame.h"

static struct daemon d;
static unsigned max_regions;

static void
setup(void)
{
	struct config cfg;

	config_defaults(&cfg);
	cfg.listen_port = 0; /* any free port: no peers in these tests */
	cfg.log_level = LOG_LEVEL_ERROR;
	if (max_regions != 0)
		cfg.max_regions = max_regions;
	log_init(cfg.log_level);
	ck_assert_int_eq(daemon_start(&d, &cfg), 0);
}

/* For the limits case: two regions per client. */
static void
setup_limits(void)
{
	max_regions = 2;
	setup();
	max_regions = 0;
}

static void
teardown(void)
{
	daemon_stop(&d);
}

static int
client_new(void)
{
	int sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
			 0);
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	conn_create(&d, sv[0]);
	return sv[1];
}

/* n bytes in one sendmsg, fds (n_fds of them) on its first byte. */
static void
send_with_fds(int fd, const void *buf, size_t n, const int *fds, size_t n_fds)
{
	ck_assert_uint_le(n_fds, FDPASS_MAX);
	ck_assert_int_eq(fdpass_send(fd, buf, n, fds, n_fds, 0), (ssize_t)n);
}

static uint8_t *
register_frame(uint64_t id, uint64_t offset, uint64_t length, size_t *n_p)
{
	Rma__V1__RegionRegister rr = RMA__V1__REGION_REGISTER__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	uint8_t *buf;

	rr.offset = offset;
	rr.length = length;
	req.id = id;
	req.body_case = RMA__V1__REQUEST__BODY_REGION_REGISTER;
	req.region_register = &rr;
	buf = raw_frame_pack(&req.base, n_p);
	ck_assert_ptr_nonnull(buf);
	return buf;
}

static uint8_t *
status_frame(uint64_t id, size_t *n_p)
{
	Rma__V1__StatusRequest s = RMA__V1__STATUS_REQUEST__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	uint8_t *buf;

	req.id = id;
	req.body_case = RMA__V1__REQUEST__BODY_STATUS;
	req.status = &s;
	buf = raw_frame_pack(&req.base, n_p);
	ck_assert_ptr_nonnull(buf);
	return buf;
}

/* Runs the daemon's loop until fd has data or EOF, for at most 5 s. */
static int
pump(int fd, void *arg)
{
	double deadline = daemon_now() + 5;

	(void)arg;
	while (daemon_now() < deadline) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		event_base_loop(d.base, EVLOOP_NONBLOCK);
		if (poll(&pfd, 1, 1) > 0)
			return 1;
	}
	return 0;
}

/* The next reply, which must be to id with status; no fd comes with it.
 * Free with rma__v1__daemon_message__free_unpacked. */
static Rma__V1__DaemonMessage *
expect_reply(int fd, uint64_t id, Rma__V1__Status status)
{
	Rma__V1__DaemonMessage *m = NULL;
	int passed = -1;

	ck_assert_int_eq(raw_frame_recv(fd, pump, NULL, &passed, &m), 1);
	ck_assert_int_eq(passed, -1);
	ck_assert_int_eq(m->kind_case, RMA__V1__DAEMON_MESSAGE__KIND_REPLY);
	ck_assert_uint_eq(m->reply->id, id);
	ck_assert_msg(m->reply->status == status, "status %d, want %d: %s",
		      m->reply->status, status, m->reply->detail);
	if (status != RMA__V1__STATUS__OK)
		ck_assert_uint_gt(strlen(m->reply->detail), 0);
	return m;
}

static void
expect_reply_free(int fd, uint64_t id, Rma__V1__Status status)
{
	rma__v1__daemon_message__free_unpacked(expect_reply(fd, id, status),
					       NULL);
}

/* Runs the daemon's loop until the last client's stream has reached
 * byte at (5 s at most). */
static void
pump_until_received(uint64_t at)
{
	double deadline = daemon_now() + 5;
	struct conn *c = TAILQ_LAST(&d.conns, conn_list);

	while (c->fds_in.received < at && daemon_now() < deadline)
		event_base_loop(d.base, EVLOOP_NONBLOCK);
	ck_assert_uint_ge(c->fds_in.received, at);
}

static void
expect_closed(int fd)
{
	char c;

	ck_assert(pump(fd, NULL));
	ck_assert_int_eq(read(fd, &c, 1), 0);
}

static int
client_hello(void)
{
	Rma__V1__Hello h = RMA__V1__HELLO__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	int fd = client_new();
	uint8_t *buf;
	size_t n;

	h.protocol_version = RMA_PROTOCOL_VERSION;
	h.client_name = "test";
	req.id = 1;
	req.body_case = RMA__V1__REQUEST__BODY_HELLO;
	req.hello = &h;
	buf = raw_frame_pack(&req.base, &n);
	send_with_fds(fd, buf, n, NULL, 0);
	free(buf);
	expect_reply_free(fd, 1, RMA__V1__STATUS__OK);
	return fd;
}

static void
status_ok(int fd)
{
	size_t n;
	uint8_t *buf = status_frame(77, &n);

	send_with_fds(fd, buf, n, NULL, 0);
	free(buf);
	expect_reply_free(fd, 77, RMA__V1__STATUS__OK);
}

/* A memfd of size bytes, sealed with seals (0: none). */
static int
memfd_new(size_t size, int seals)
{
	int fd = memfd_create("test-regfd", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	if (seals != 0)
		ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, seals), 0);
	return fd;
}

/* Open descriptors of this process, which is the daemon too. */
static int
fd_count(void)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(dir);
	while ((e = readdir(dir)) != NULL)
		n += e->d_name[0] != '.';
	closedir(dir);
	return n - 1; /* the directory's own */
}

/* Registers [offset, offset + length) of file; the reply's status, and
 * the region's id when OK. */
static uint64_t
try_register(int fd, int file, uint64_t offset, uint64_t length,
	     Rma__V1__Status want)
{
	Rma__V1__DaemonMessage *m;
	uint64_t id = 0;
	size_t n;
	uint8_t *buf = register_frame(40, offset, length, &n);

	send_with_fds(fd, buf, n, &file, file >= 0);
	free(buf);
	m = expect_reply(fd, 40, want);
	if (want == RMA__V1__STATUS__OK) {
		const Rma__V1__RegionAllocReply *ra = m->reply->region_register;

		ck_assert_int_eq(m->reply->body_case,
				 RMA__V1__REPLY__BODY_REGION_REGISTER);
		ck_assert_uint_eq(ra->length, length);
		ck_assert_uint_ne(ra->generation, 0);
		ck_assert_str_eq(ra->descriptor,
				 region_lookup(&d, ra->region_id)->descriptor);
		ck_assert_uint_gt(strlen(ra->read_only_descriptor), 0);
		ck_assert_str_ne(ra->descriptor, ra->read_only_descriptor);
		id = ra->region_id;
	}
	rma__v1__daemon_message__free_unpacked(m, NULL);
	return id;
}

/* What the file's owner does while the daemon looks at the file, at a
 * point in region_fd_map fixed by the code rather than by timing: its
 * one fstatfs (this test is linked with --wrap=fstatfs64) runs the hook
 * first, between the daemon's first look at the file and its mapping. */
static void (*fstatfs_hook)(int fd);

int __real_fstatfs64(int fd, struct statfs *buf);
int __wrap_fstatfs64(int fd, struct statfs *buf);

int
__wrap_fstatfs64(int fd, struct statfs *buf)
{
	void (*hook)(int) = fstatfs_hook;

	fstatfs_hook = NULL;
	if (hook != NULL)
		hook(fd);
	return __real_fstatfs64(fd, buf);
}

/* The same at the daemon's F_ADD_SEALS (--wrap=fcntl64): the hook runs
 * just before the seal goes on. Every other fcntl passes through. */
static void (*add_seals_hook)(int fd);

int __real_fcntl64(int fd, int cmd, ...);
int __wrap_fcntl64(int fd, int cmd, ...);

int
__wrap_fcntl64(int fd, int cmd, ...)
{
	void (*hook)(int) = add_seals_hook;
	unsigned long arg;
	va_list ap;

	va_start(ap, cmd);
	arg = va_arg(ap, unsigned long);
	va_end(ap);
	if (cmd == F_ADD_SEALS && hook != NULL) {
		add_seals_hook = NULL;
		hook(fd);
	}
	return __real_fcntl64(fd, cmd, arg);
}

START_TEST(test_sealed_memfd_is_a_region)
{
	size_t page = (size_t)getpagesize();
	int fd = client_hello(), file = memfd_new(4 * page, F_SEAL_SHRINK);
	char *mine =
	    mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_SHARED, file, 0);
	struct region *r;
	uint64_t id;

	ck_assert_ptr_ne(mine, MAP_FAILED);
	id = try_register(fd, file, page, 2 * page, RMA__V1__STATUS__OK);
	r = region_lookup(&d, id);
	ck_assert_ptr_nonnull(r);
	ck_assert(r->registered);
	ck_assert_uint_eq(r->length, 2 * page);
	/* the same pages, from the offset on */
	memcpy(mine + page, "owner wrote", 12);
	ck_assert_str_eq((char *)r->addr, "owner wrote");
	memcpy((char *)r->addr + page, "daemon wrote", 13);
	ck_assert_str_eq(mine + 2 * page, "daemon wrote");
	/* the seal holds: nobody shrinks it, the daemon's pages stay */
	ck_assert_int_eq(ftruncate(file, (off_t)page), -1);
	ck_assert_int_eq(errno, EPERM);
	ck_assert_int_eq(ftruncate(file, (off_t)(8 * page)), 0);
	/* a hole punched into a memfd refills with zeroes, no SIGBUS */
	ck_assert_int_eq(fallocate(file,
				   FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				   page, page),
			 0);
	ck_assert_int_eq(((char *)r->addr)[0], 0);
	memcpy(r->addr, "again", 6);
	ck_assert_str_eq(mine + page, "again");
	status_ok(fd);
	munmap(mine, 4 * page);
	close(file);
	close(fd);
}
END_TEST

/* The owner shrinks its unsealed file to nothing and only then seals it,
 * while the daemon checks it: the seal is there when the daemon reads
 * the seals, but the size it measured before is gone. Mapped with that
 * size, the region would be pages past the end of the file, SIGBUS at
 * the first put into it. The daemon must measure the file once it is
 * sealed, and refuse. */
static void
hook_shrink_then_seal(int fd)
{
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
}

START_TEST(test_shrunk_before_sealed)
{
	size_t page = (size_t)getpagesize();
	int fd = client_hello(), file = memfd_new(4 * page, 0);
	int before = fd_count();

	fstatfs_hook = hook_shrink_then_seal;
	try_register(fd, file, 0, 4 * page, RMA__V1__STATUS__ERR_OUT_OF_BOUNDS);
	ck_assert_ptr_null(fstatfs_hook); /* the owner did act in between */
	ck_assert_int_eq(fd_count(), before);
	status_ok(fd);
	close(file);
	close(fd);
}
END_TEST

/* The daemon keeps one fd per registered region, and lets it go with
 * the region; the fd the client sent is closed at once. */
START_TEST(test_fds_released)
{
	int fd = client_hello(), file = memfd_new(65536, F_SEAL_SHRINK);
	int before = fd_count();
	Rma__V1__RegionFree rf = RMA__V1__REGION_FREE__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	uint64_t id;
	uint8_t *buf;
	size_t n;

	id = try_register(fd, file, 0, 65536, RMA__V1__STATUS__OK);
	ck_assert_int_eq(fd_count(), before + 1); /* the region's own */
	rf.region_id = id;
	req.id = 41;
	req.body_case = RMA__V1__REQUEST__BODY_REGION_FREE;
	req.region_free = &rf;
	buf = raw_frame_pack(&req.base, &n);
	send_with_fds(fd, buf, n, NULL, 0);
	free(buf);
	expect_reply_free(fd, 41, RMA__V1__STATUS__OK);
	ck_assert_ptr_null(region_lookup(&d, id));
	ck_assert_int_eq(fd_count(), before);
	close(file);
	close(fd);
}
END_TEST

START_TEST(test_no_fd_or_two)
{
	int fd = client_hello(), a = memfd_new(4096, F_SEAL_SHRINK);
	int b = memfd_new(4096, F_SEAL_SHRINK), two[2] = {a, b};
	int before = fd_count();
	uint8_t *buf;
	size_t n;

	try_register(fd, -1, 0, 4096, RMA__V1__STATUS__ERR_INVALID);
	buf = register_frame(42, 0, 4096, &n);
	send_with_fds(fd, buf, n, two, 2);
	free(buf);
	expect_reply_free(fd, 42, RMA__V1__STATUS__ERR_INVALID);
	ck_assert_int_eq(fd_count(), before); /* both copies closed */
	ck_assert_uint_eq(d.world->regions.count, 0);
	status_ok(fd);
	close(a);
	close(b);
	close(fd);
}
END_TEST

/* Everything that is not a sealed memory file open read-write. */
START_TEST(test_hostile_files)
{
	int fd = client_hello(), before, sv[2], p[2], f;
	char path[64];

	before = fd_count();
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	try_register(fd, sv[0], 0, 4096, RMA__V1__STATUS__ERR_INVALID);
	close(sv[0]);
	close(sv[1]);
	ck_assert_int_eq(pipe(p), 0);
	try_register(fd, p[0], 0, 4096, RMA__V1__STATUS__ERR_INVALID);
	try_register(fd, p[1], 0, 4096, RMA__V1__STATUS__ERR_INVALID);
	close(p[0]);
	close(p[1]);
	f = open("/tmp", O_RDONLY | O_DIRECTORY);
	try_register(fd, f, 0, 4096, RMA__V1__STATUS__ERR_INVALID);
	close(f);
	f = open("/dev/zero", O_RDWR);
	try_register(fd, f, 0, 4096, RMA__V1__STATUS__ERR_INVALID);
	close(f);
	f = open("/proc/self/status", O_RDONLY);
	try_register(fd, f, 0, 1, RMA__V1__STATUS__ERR_INVALID);
	close(f);
	f = open("/proc/sys/vm/overcommit_memory", O_RDWR);
	if (f >= 0) { /* root: a writable /proc file */
		try_register(fd, f, 0, 1, RMA__V1__STATUS__ERR_INVALID);
		close(f);
	}
	/* an ordinary file on this build's disk */
	f = open(".", O_RDWR | O_TMPFILE, 0600);
	if (f >= 0) {
		ck_assert_int_eq(ftruncate(f, 4096), 0);
		try_register(fd, f, 0, 4096, RMA__V1__STATUS__ERR_INVALID);
		close(f);
	}
	/* a memfd without the seal, one with others but not SHRINK */
	f = memfd_new(4096, 0);
	try_register(fd, f, 0, 4096, RMA__V1__STATUS__ERR_INVALID);
	close(f);
	f = memfd_new(4096, F_SEAL_GROW);
	try_register(fd, f, 0, 4096, RMA__V1__STATUS__ERR_INVALID);
	close(f);
	/* sealed against writes: no writable mapping for the daemon */
	f = memfd_new(4096, F_SEAL_SHRINK | F_SEAL_WRITE);
	try_register(fd, f, 0, 4096, RMA__V1__STATUS__ERR_PERMISSION);
	/* the same memfd, opened again read-only */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", f);
	close(f);
	f = memfd_new(4096, F_SEAL_SHRINK);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", f);
	{
		int ro = open(path, O_RDONLY);

		ck_assert_int_ge(ro, 0);
		try_register(fd, ro, 0, 4096, RMA__V1__STATUS__ERR_PERMISSION);
		close(ro);
	}
	close(f);
	/* a POSIX shm object: tmpfs, but born unsealable */
	snprintf(path, sizeof(path), "/dev/shm/rma-test-regfd-%d", getpid());
	f = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (f >= 0) {
		unlink(path);
		ck_assert_int_eq(ftruncate(f, 4096), 0);
		ck_assert_int_eq(fcntl(f, F_ADD_SEALS, F_SEAL_SHRINK), -1);
		try_register(fd, f, 0, 4096, RMA__V1__STATUS__ERR_INVALID);
		close(f);
	}
	ck_assert_uint_eq(d.world->regions.count, 0);
	ck_assert_int_eq(fd_count(), before); /* every copy closed */
	status_ok(fd);
	close(fd);
}
END_TEST

START_TEST(test_ranges)
{
	size_t page = (size_t)getpagesize();
	int fd = client_hello(), f = memfd_new(4 * page, F_SEAL_SHRINK);
	int before = fd_count();

	try_register(fd, f, 0, 0, RMA__V1__STATUS__ERR_INVALID);
	try_register(fd, f, 1, page, RMA__V1__STATUS__ERR_INVALID);
	try_register(fd, f, page / 2, page, RMA__V1__STATUS__ERR_INVALID);
	try_register(fd, f, 0, 4 * page + 1,
		     RMA__V1__STATUS__ERR_OUT_OF_BOUNDS);
	try_register(fd, f, 4 * page, 1, RMA__V1__STATUS__ERR_OUT_OF_BOUNDS);
	try_register(fd, f, 8 * page, page, RMA__V1__STATUS__ERR_OUT_OF_BOUNDS);
	/* lengths past any region's (1 TiB) are refused before the file */
	try_register(fd, f, 3 * page, UINT64_MAX - page,
		     RMA__V1__STATUS__ERR_INVALID);
	try_register(fd, f, UINT64_MAX - (UINT64_MAX % page), page,
		     RMA__V1__STATUS__ERR_OUT_OF_BOUNDS);
	try_register(fd, f, 0, UINT64_MAX, RMA__V1__STATUS__ERR_INVALID);
	try_register(fd, f, 0, (uint64_t)1 << 35,
		     RMA__V1__STATUS__ERR_OUT_OF_BOUNDS);
	ck_assert_uint_eq(d.world->regions.count, 0);
	ck_assert_int_eq(fd_count(), before);
	/* the last byte exactly */
	try_register(fd, f, 3 * page, page, RMA__V1__STATUS__OK);
	close(f);
	close(fd);
}
END_TEST

/* An fd with a request that takes none: that request is served, then
 * the connection ends with a protocol error; the fd is closed. */
START_TEST(test_fd_with_other_request)
{
	int fd = client_hello(), f = memfd_new(4096, F_SEAL_SHRINK);
	int before = fd_count();
	Rma__V1__DaemonMessage *m;
	size_t n;
	uint8_t *buf = status_frame(43, &n);

	send_with_fds(fd, buf, n, &f, 1);
	free(buf);
	expect_reply_free(fd, 43, RMA__V1__STATUS__OK);
	m = expect_reply(fd, 0, RMA__V1__STATUS__ERR_PROTOCOL);
	ck_assert_ptr_nonnull(strstr(m->reply->detail, "takes none"));
	rma__v1__daemon_message__free_unpacked(m, NULL);
	expect_closed(fd);
	ck_assert_int_eq(fd_count(), before - 1); /* and the connection's */
	close(f);
	close(fd);
}
END_TEST

/* The fd belongs to the frame its sendmsg starts: a register frame
 * sent in two pieces with the fd on the first works; an fd on the
 * second piece (the middle of a frame) is refused and closes. A status
 * frame and a register frame in one sendmsg: the register takes it. */
START_TEST(test_fd_position)
{
	int fd = client_hello(), f = memfd_new(8192, F_SEAL_SHRINK);
	struct conn *conn = TAILQ_LAST(&d.conns, conn_list);
	Rma__V1__DaemonMessage *m;
	uint8_t *buf, *st, both[256];
	size_t n, n_st;

	buf = register_frame(44, 0, 4096, &n);
	send_with_fds(fd, buf, 3, &f, 1);
	send_with_fds(fd, buf + 3, n - 3, NULL, 0);
	expect_reply_free(fd, 44, RMA__V1__STATUS__OK);
	st = status_frame(45, &n_st);
	ck_assert_uint_le(n + n_st, sizeof(both));
	memcpy(both, st, n_st);
	memcpy(both + n_st, buf, n);
	send_with_fds(fd, both, n + n_st, &f, 1);
	expect_reply_free(fd, 45, RMA__V1__STATUS__OK);
	expect_reply_free(fd, 44, RMA__V1__STATUS__OK);
	ck_assert_uint_eq(d.world->regions.count, 2);
	/* the first piece read alone, so that the fd comes after the
	 * frame's first byte */
	send_with_fds(fd, buf, 3, NULL, 0);
	pump_until_received(conn->fds_in.received + 3);
	send_with_fds(fd, buf + 3, n - 3, &f, 1);
	m = expect_reply(fd, 44, RMA__V1__STATUS__ERR_INVALID);
	rma__v1__daemon_message__free_unpacked(m, NULL);
	expect_reply_free(fd, 0, RMA__V1__STATUS__ERR_PROTOCOL);
	expect_closed(fd);
	free(buf);
	free(st);
	close(f);
	close(fd);
}
END_TEST

/* More fds than a read takes: the rest are cut (MSG_CTRUNC), the client
 * is closed, nothing is kept. */
START_TEST(test_too_many_fds)
{
	int fd = client_hello(), f[12], before;
	size_t n;
	uint8_t *buf = register_frame(46, 0, 4096, &n);

	for (int i = 0; i < 12; i++)
		f[i] = memfd_new(4096, F_SEAL_SHRINK);
	before = fd_count();
	send_with_fds(fd, buf, n, f, 12);
	free(buf);
	expect_reply_free(fd, 0, RMA__V1__STATUS__ERR_PROTOCOL);
	expect_closed(fd);
	ck_assert_uint_eq(d.world->regions.count, 0);
	ck_assert_int_eq(fd_count(), before - 1); /* and the connection's */
	for (int i = 0; i < 12; i++)
		close(f[i]);
	close(fd);
}
END_TEST

/* A registered region counts as one of the client's regions and its
 * bytes, as an allocated one does. */
START_TEST(test_limits)
{
	int fd = client_hello(), f = memfd_new(1 << 20, F_SEAL_SHRINK);
	Rma__V1__RegionAlloc ra = RMA__V1__REGION_ALLOC__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__DaemonMessage *m = NULL;
	int memfd = -1;
	size_t n;
	uint8_t *buf;

	ra.length = 4096;
	req.id = 47;
	req.body_case = RMA__V1__REQUEST__BODY_REGION_ALLOC;
	req.region_alloc = &ra;
	buf = raw_frame_pack(&req.base, &n);
	send_with_fds(fd, buf, n, NULL, 0);
	free(buf);
	ck_assert_int_eq(raw_frame_recv(fd, pump, NULL, &memfd, &m), 1);
	ck_assert_int_eq(m->reply->status, RMA__V1__STATUS__OK);
	rma__v1__daemon_message__free_unpacked(m, NULL);
	close(memfd);
	try_register(fd, f, 0, 4096, RMA__V1__STATUS__OK);
	/* max_regions is 2 in this test case */
	try_register(fd, f, 4096, 4096, RMA__V1__STATUS__ERR_LIMIT);
	ck_assert_uint_eq(d.world->regions.count, 2);
	close(f);
	close(fd);
}
END_TEST

/* A HugePages_ count of /proc/meminfo (@what: "Free", "Rsvd"). */
static long
hugepages_count(const char *what)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[128], key[32];
	long n = 0;

	snprintf(key, sizeof(key), "HugePages_%s: %%ld", what);
	while (f != NULL && fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, key, &n) == 1)
			break;
	if (f != NULL)
		fclose(f);
	return n;
}

static long
hugepages_free(void)
{
	return hugepages_count("Free");
}

static long
hugepages_rsvd(void)
{
	return hugepages_count("Rsvd");
}

/* A hugetlbfs memfd: whole huge pages, and the daemon seals it against
 * a punched hole the pool might not refill. */
START_TEST(test_hugetlbfs)
{
	size_t huge = 2u << 20;
	int fd, f, seals;
	void *mine;

	if (hugepages_free() < 2) {
		fprintf(stderr, "test_hugetlbfs: skipped: fewer than 2 free "
				"huge pages (/proc/sys/vm/nr_hugepages)\n");
		return;
	}
	fd = client_hello();
	f = memfd_create("test-regfd-huge",
			 MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB);
	ck_assert_int_ge(f, 0);
	ck_assert_int_eq(ftruncate(f, (off_t)(2 * huge)), 0);
	ck_assert_int_eq(fcntl(f, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	mine = mmap(NULL, 2 * huge, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
	ck_assert_ptr_ne(mine, MAP_FAILED);
	try_register(fd, f, 0, huge / 2, RMA__V1__STATUS__ERR_INVALID);
	try_register(fd, f, huge, 2 * huge, RMA__V1__STATUS__ERR_OUT_OF_BOUNDS);
	try_register(fd, f, huge, huge, RMA__V1__STATUS__OK);
	seals = fcntl(f, F_GET_SEALS);
	ck_assert(seals & F_SEAL_FUTURE_WRITE);
	ck_assert_int_eq(fallocate(f,
				   FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				   (off_t)huge, (off_t)huge),
			 -1);
	memcpy((char *)mine + huge, "still writable", 15);
	status_ok(fd);
	munmap(mine, 2 * huge);
	close(f);
	close(fd);
}
END_TEST

/* Between the daemon's mmap of a hugetlbfs file and its
 * F_SEAL_FUTURE_WRITE, the owner punches the page out (allowed: no seal
 * yet) and takes every free huge page for another file. The punch drops
 * the page's reservation; the daemon's first touch of the range would
 * need a page from an empty pool: SIGBUS. The daemon must find that out
 * once the seal holds, and refuse. */
static int pool_eater = -1;
static void *pool_eaten = MAP_FAILED;
static size_t pool_eaten_len;

static void
hook_punch_and_drain(int fd)
{
	size_t huge = 2u << 20;
	long free_pages;

	ck_assert_int_eq(fallocate(fd,
				   FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				   0, (off_t)huge),
			 0);
	free_pages = hugepages_free();
	ck_assert_int_ge(free_pages, 1);
	pool_eaten_len = (size_t)free_pages * huge;
	pool_eater =
	    memfd_create("test-regfd-eater", MFD_CLOEXEC | MFD_HUGETLB);
	ck_assert_int_ge(pool_eater, 0);
	ck_assert_int_eq(ftruncate(pool_eater, (off_t)pool_eaten_len), 0);
	/* a shared mapping reserves every page of it */
	pool_eaten = mmap(NULL, pool_eaten_len, PROT_READ | PROT_WRITE,
			  MAP_SHARED, pool_eater, 0);
	ck_assert_ptr_ne(pool_eaten, MAP_FAILED);
	ck_assert_int_eq(hugepages_free() - hugepages_rsvd(), 0);
}

START_TEST(test_hugetlbfs_punched_before_sealed)
{
	size_t huge = 2u << 20;
	int fd, f, before;
	void *mine;

	if (hugepages_free() < 1) {
		fprintf(stderr,
			"test_hugetlbfs_punched_before_sealed: skipped: "
			"no free huge page (/proc/sys/vm/nr_hugepages)\n");
		return;
	}
	fd = client_hello();
	f = memfd_create("test-regfd-huge",
			 MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB);
	ck_assert_int_ge(f, 0);
	ck_assert_int_eq(ftruncate(f, (off_t)huge), 0);
	ck_assert_int_eq(fcntl(f, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	mine = mmap(NULL, huge, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
	ck_assert_ptr_ne(mine, MAP_FAILED);
	memcpy(mine, "owner's page", 13);
	before = fd_count();
	add_seals_hook = hook_punch_and_drain;
	try_register(fd, f, 0, huge, RMA__V1__STATUS__ERR_NO_MEMORY);
	ck_assert_ptr_null(add_seals_hook); /* the owner did act in between */
	ck_assert_uint_eq(d.world->regions.count, 0);
	ck_assert_int_eq(fd_count(), before + 1); /* the eater */
	status_ok(fd);
	munmap(pool_eaten, pool_eaten_len);
	close(pool_eater);
	munmap(mine, huge);
	close(f);
	close(fd);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("region_fd");
	TCase *tc = tcase_create("region_fd");
	TCase *lim = tcase_create("limits");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_sealed_memfd_is_a_region);
	tcase_add_test(tc, test_shrunk_before_sealed);
	tcase_add_test(tc, test_fds_released);
	tcase_add_test(tc, test_no_fd_or_two);
	tcase_add_test(tc, test_hostile_files);
	tcase_add_test(tc, test_ranges);
	tcase_add_test(tc, test_fd_with_other_request);
	tcase_add_test(tc, test_fd_position);
	tcase_add_test(tc, test_too_many_fds);
	tcase_add_test(tc, test_hugetlbfs);
	tcase_add_test(tc, test_hugetlbfs_punched_before_sealed);
	suite_add_tcase(s, tc);
	tcase_add_checked_fixture(lim, setup_limits, teardown);
	tcase_add_test(lim, test_limits);
	suite_add_tcase(s, lim);
	return check_main_run(s);
}
