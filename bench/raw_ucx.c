/* SPDX-License-Identifier: BSD-2-Clause */
/* raw_ucx: the baseline for `rmactl bench`: the same put/get loop on raw
 * UCX between two processes, set up the way rmad sets up UCX between two
 * daemons: memfd memory mapped MAP_SHARED and registered with
 * ucp_mem_map, endpoints through ucp_listener / sockaddr with
 * UCP_ERR_HANDLING_MODE_PEER, UCX_TLS=tcp unless the environment says
 * otherwise, and rmad's UCX settings (common/ucx_defaults.c: copies only,
 * the tcp transport's fragment size) unless the environment sets them.
 * The server sends its region's address, length and packed rkey as an
 * active message on every new endpoint.
 *
 *   raw_ucx server [--listen HOST:PORT] [--size BYTES] [--progress MODE]
 *   raw_ucx client --connect HOST:PORT --op put|get --size BYTES
 *                  [--count N] [--window N] [--warmup N]
 *                  [--remote-completion] [--timeout SECONDS]
 *                  [--progress MODE] [--json]
 *   raw_ucx settings   (the UCX settings in force, one NAME=VALUE a line)
 *
 * The client loop and its output are those of rmactl/rmactl_bench.c:
 * keep the two alike. MODE is "poll" (spin on ucp_worker_progress, the
 * default, as ucx_perftest does) or "wait" (sleep on the worker's event
 * fd, as rmad does). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#include "bench_params.h"
#include "bench_report.h"
#include "monotime.h"
#include "size.h"
#include "ucx_defaults.h"

#define RAW_AM_INFO 7
#define RAW_LOCAL_MAX (64ull << 20)
#define RAW_RKEY_MAX 4096
#define RAW_SERVER_EPS_MAX 256

/* The server's answer on a new endpoint. */
struct raw_info {
	uint64_t addr;
	uint64_t length;
	uint32_t rkey_len;
	uint8_t rkey[];
};

#define RAW_INFO_HEAD offsetof(struct raw_info, rkey)

struct raw_region {
	void *addr;
	size_t length;
	ucp_mem_h memh;
};

struct raw {
	ucp_context_h ucp;
	ucp_worker_h worker;
	int efd;
	int wait_mode;
};

static volatile sig_atomic_t raw_stop;

static void
raw_on_signal(int sig)
{
	raw_stop = 1;
}

static int raw_errx(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
raw_errx(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("raw_ucx: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

/* "host:port" (host may be [v6]) into a sockaddr. */
static int
raw_parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len_p)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *ai;
	const char *colon = strrchr(s, ':');
	char host[256];
	size_t hl;

	if (colon == NULL || colon == s)
		return -1;
	hl = (size_t)(colon - s);
	if (s[0] == '[' && hl >= 2 && s[hl - 1] == ']') {
		s++;
		hl -= 2;
	}
	if (hl >= sizeof(host))
		return -1;
	memcpy(host, s, hl);
	host[hl] = '\0';
	if (getaddrinfo(host, colon + 1, &hints, &ai) != 0)
		return -1;
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*len_p = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

/* ---- context, worker, progress ---- */

static int
raw_init(struct raw *r, int wait_mode)
{
	ucp_params_t params = {
	    .field_mask = UCP_PARAM_FIELD_FEATURES,
	    .features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP |
			UCP_FEATURE_AMO64,
	};
	ucp_worker_params_t wparams = {
	    .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
	    .thread_mode = UCS_THREAD_MODE_SINGLE,
	};
	ucp_config_t *config;
	ucs_status_t st;

	r->wait_mode = wait_mode;
	st = ucp_config_read(NULL, NULL, &config);
	if (st != UCS_OK)
		return raw_errx(EX_SOFTWARE, "ucp_config_read: %s",
				ucs_status_string(st));
	/* as rmad: tcp and rmad's settings unless the environment says
	 * otherwise */
	if (getenv("UCX_TLS") == NULL)
		ucp_config_modify(config, "TLS", "tcp");
	for (const struct ucx_default *u = ucx_defaults; u->name; u++) {
		int from_env;
		const char *v = ucx_defaults_effective(u, &from_env);
		if (!from_env)
			ucp_config_modify(config, u->name, v);
	}
	st = ucp_init(&params, config, &r->ucp);
	ucp_config_release(config);
	if (st != UCS_OK)
		return raw_errx(EX_SOFTWARE, "ucp_init: %s",
				ucs_status_string(st));
	st = ucp_worker_create(r->ucp, &wparams, &r->worker);
	if (st != UCS_OK) {
		ucp_cleanup(r->ucp);
		return raw_errx(EX_SOFTWARE, "ucp_worker_create: %s",
				ucs_status_string(st));
	}
	st = ucp_worker_get_efd(r->worker, &r->efd);
	if (st != UCS_OK) {
		ucp_worker_destroy(r->worker);
		ucp_cleanup(r->ucp);
		return raw_errx(EX_SOFTWARE, "ucp_worker_get_efd: %s",
				ucs_status_string(st));
	}
	return 0;
}

static void
raw_fini(struct raw *r)
{
	ucp_worker_destroy(r->worker);
	ucp_cleanup(r->ucp);
}

/* In wait mode: sleep on the event fd (at most timeout_ms) unless the
 * worker has events already, then progress. */
static unsigned
raw_sleep(struct raw *r, int timeout_ms)
{
	struct pollfd pfd = {.fd = r->efd, .events = POLLIN};
	ucs_status_t st;

	st = ucp_worker_arm(r->worker);
	if (st == UCS_ERR_BUSY)
		return ucp_worker_progress(r->worker);
	if (st == UCS_OK)
		poll(&pfd, 1, timeout_ms);
	return ucp_worker_progress(r->worker);
}

/* Progress once; in wait mode, when there was nothing to do, sleep first
 * (at most timeout_ms). Returns the progress count. */
static unsigned
raw_progress(struct raw *r, int timeout_ms)
{
	unsigned n = ucp_worker_progress(r->worker);

	if (n != 0 || !r->wait_mode)
		return n;
	return raw_sleep(r, timeout_ms);
}

/* Wait for a request of a blocking step (connect, flush, close). */
static ucs_status_t
raw_wait(struct raw *r, ucs_status_ptr_t sp, int timeout_ms)
{
	uint64_t deadline = monotime_ns() + (uint64_t)timeout_ms * 1000000u;
	ucs_status_t st;

	if (sp == NULL)
		return UCS_OK;
	if (UCS_PTR_IS_ERR(sp))
		return UCS_PTR_STATUS(sp);
	while ((st = ucp_request_check_status(sp)) == UCS_INPROGRESS) {
		if (monotime_ns() > deadline) {
			ucp_request_free(sp);
			return UCS_ERR_TIMED_OUT;
		}
		raw_progress(r, 100);
	}
	ucp_request_free(sp);
	return st;
}

static int
raw_region_create(struct raw *r, size_t length, struct raw_region *reg)
{
	ucp_mem_map_params_t params;
	ucs_status_t st;
	int fd;

	fd = memfd_create("raw_ucx", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return raw_errx(EX_OSERR, "memfd_create: %s", strerror(errno));
	if (ftruncate(fd, (off_t)length) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) <
		0) {
		close(fd);
		return raw_errx(EX_OSERR, "memfd of %zu bytes: %s", length,
				strerror(errno));
	}
	reg->addr =
	    mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (reg->addr == MAP_FAILED)
		return raw_errx(EX_OSERR, "mmap %zu bytes: %s", length,
				strerror(errno));
	reg->length = length;
	/* touch it: page faults are not what we measure */
	memset(reg->addr, 0xa5, length);
	params.field_mask =
	    UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
	params.address = reg->addr;
	params.length = length;
	st = ucp_mem_map(r->ucp, &params, &reg->memh);
	if (st != UCS_OK) {
		munmap(reg->addr, length);
		return raw_errx(EX_SOFTWARE, "ucp_mem_map: %s",
				ucs_status_string(st));
	}
	return 0;
}

static void
raw_region_destroy(struct raw *r, struct raw_region *reg)
{
	ucp_mem_unmap(r->ucp, reg->memh);
	munmap(reg->addr, reg->length);
}

/* ---- server ---- */

struct raw_server {
	struct raw raw;
	struct raw_region region;
	struct raw_info *info;
	size_t info_len;
	ucp_listener_h listener;
	/* accepted endpoints; failed ones are closed from the loop */
	struct raw_server_ep {
		ucp_ep_h ep;
		int failed;
	} eps[RAW_SERVER_EPS_MAX];
	ucp_conn_request_h pending[RAW_SERVER_EPS_MAX];
	size_t npending;
};

static void
raw_server_on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
	struct raw_server_ep *e = arg;

	e->failed = 1;
}

static void
raw_server_on_conn(ucp_conn_request_h req, void *arg)
{
	struct raw_server *s = arg;

	if (s->npending == RAW_SERVER_EPS_MAX) {
		ucp_listener_reject(s->listener, req);
		return;
	}
	s->pending[s->npending++] = req;
}

static void
raw_server_on_sent(void *request, ucs_status_t status, void *user_data)
{
	ucp_request_free(request);
}

static void
raw_server_accept(struct raw_server *s, ucp_conn_request_h req)
{
	ucp_request_param_t param = {
	    .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK,
	    .cb.send = raw_server_on_sent,
	};
	ucp_ep_params_t params = {
	    .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST |
			  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
			  UCP_EP_PARAM_FIELD_ERR_HANDLER,
	    .conn_request = req,
	    .err_mode = UCP_ERR_HANDLING_MODE_PEER,
	    .err_handler.cb = raw_server_on_ep_error,
	};
	struct raw_server_ep *e = NULL;
	ucs_status_ptr_t sp;
	ucs_status_t st;

	for (size_t i = 0; i < RAW_SERVER_EPS_MAX; i++) {
		if (s->eps[i].ep == NULL) {
			e = &s->eps[i];
			break;
		}
	}
	if (e == NULL) {
		ucp_listener_reject(s->listener, req);
		return;
	}
	params.err_handler.arg = e;
	st = ucp_ep_create(s->raw.worker, &params, &e->ep);
	if (st != UCS_OK) {
		raw_errx(0, "server: ucp_ep_create: %s", ucs_status_string(st));
		e->ep = NULL;
		return;
	}
	e->failed = 0;
	/* the info buffer lives as long as the server */
	sp = ucp_am_send_nbx(e->ep, RAW_AM_INFO, NULL, 0, s->info, s->info_len,
			     &param);
	if (UCS_PTR_IS_ERR(sp))
		e->failed = 1;
}

static void
raw_server_close_failed(struct raw_server *s)
{
	ucp_request_param_t param = {
	    .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
	    .flags = UCP_EP_CLOSE_FLAG_FORCE,
	};

	for (size_t i = 0; i < RAW_SERVER_EPS_MAX; i++) {
		struct raw_server_ep *e = &s->eps[i];

		if (e->ep == NULL || !e->failed)
			continue;
		raw_wait(&s->raw, ucp_ep_close_nbx(e->ep, &param), 1000);
		e->ep = NULL;
	}
}

/* s->info: the region's address, length and packed rkey, as a client
 * gets it on connecting. */
static int
raw_server_info(struct raw_server *s, uint64_t size)
{
	void *rkey;
	size_t rkey_len;
	ucs_status_t st;

	st = ucp_rkey_pack(s->raw.ucp, s->region.memh, &rkey, &rkey_len);
	if (st != UCS_OK || rkey_len > RAW_RKEY_MAX)
		return raw_errx(EX_SOFTWARE, "ucp_rkey_pack: %s",
				ucs_status_string(st));
	s->info_len = sizeof(*s->info) + rkey_len;
	s->info = calloc(1, s->info_len);
	if (s->info == NULL) {
		ucp_rkey_buffer_release(rkey);
		return raw_errx(EX_OSERR, "out of memory");
	}
	s->info->addr = (uint64_t)(uintptr_t)s->region.addr;
	s->info->length = size;
	s->info->rkey_len = (uint32_t)rkey_len;
	memcpy(s->info->rkey, rkey, rkey_len);
	ucp_rkey_buffer_release(rkey);
	return 0;
}

/* s->listener on ss, and the line scripts wait for: "listening
 * HOST:PORT". */
static int
raw_server_listen(struct raw_server *s, const char *listen_addr,
		  struct sockaddr_storage *ss, socklen_t sslen)
{
	ucp_listener_params_t lparams;
	ucp_listener_attr_t lattr = {.field_mask =
					 UCP_LISTENER_ATTR_FIELD_SOCKADDR};
	char host[NI_MAXHOST], port[NI_MAXSERV];
	ucs_status_t st;

	memset(&lparams, 0, sizeof(lparams));
	lparams.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
			     UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
	lparams.sockaddr.addr = (struct sockaddr *)ss;
	lparams.sockaddr.addrlen = sslen;
	lparams.conn_handler.cb = raw_server_on_conn;
	lparams.conn_handler.arg = s;
	st = ucp_listener_create(s->raw.worker, &lparams, &s->listener);
	if (st != UCS_OK)
		return raw_errx(EX_UNAVAILABLE, "listen on %s: %s", listen_addr,
				ucs_status_string(st));
	st = ucp_listener_query(s->listener, &lattr);
	if (st != UCS_OK ||
	    getnameinfo((struct sockaddr *)&lattr.sockaddr, sizeof(*ss), host,
			sizeof(host), port, sizeof(port),
			NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		ucp_listener_destroy(s->listener);
		return raw_errx(EX_SOFTWARE, "cannot tell the listening port");
	}
	printf("listening %s:%s\n", host, port);
	fflush(stdout);
	return 0;
}

/* Serves until SIGINT or SIGTERM, then closes every endpoint. */
static void
raw_server_loop(struct raw_server *s)
{
	while (!raw_stop) {
		raw_progress(&s->raw, 1000);
		while (s->npending > 0)
			raw_server_accept(s, s->pending[--s->npending]);
		raw_server_close_failed(s);
	}
	for (size_t i = 0; i < RAW_SERVER_EPS_MAX; i++)
		if (s->eps[i].ep != NULL)
			s->eps[i].failed = 1;
	raw_server_close_failed(s);
}

static int
raw_server_run(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"listen", required_argument, NULL, 'l'},
	    {"size", required_argument, NULL, 's'},
	    {"progress", required_argument, NULL, 'P'},
	    {NULL, 0, NULL, 0},
	};
	const char *listen_addr = "127.0.0.1:0";
	uint64_t size = 64ull << 20;
	struct raw_server *s;
	struct sockaddr_storage ss;
	socklen_t sslen;
	struct sigaction sa = {.sa_handler = raw_on_signal};
	int c, wait_mode = 0, rc = 0;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			listen_addr = optarg;
			break;
		case 's':
			if (size_parse(optarg, &size) < 0 || size == 0 ||
			    size > SIZE_MAX)
				return raw_errx(EX_USAGE, "bad size \"%s\"",
						optarg);
			break;
		case 'P':
			if (strcmp(optarg, "wait") != 0 &&
			    strcmp(optarg, "poll") != 0)
				return raw_errx(EX_USAGE,
						"bad progress \"%s\" (poll or "
						"wait)",
						optarg);
			wait_mode = strcmp(optarg, "wait") == 0;
			break;
		default:
			return raw_errx(EX_USAGE, "server: bad option %s",
					argv[optind - 1]);
		}
	}
	if (raw_parse_addr(listen_addr, &ss, &sslen) < 0)
		return raw_errx(EX_USAGE, "bad address \"%s\"", listen_addr);
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return raw_errx(EX_OSERR, "out of memory");
	rc = raw_init(&s->raw, wait_mode);
	if (rc != 0)
		goto err_free;
	rc = raw_region_create(&s->raw, (size_t)size, &s->region);
	if (rc != 0)
		goto err_fini;
	rc = raw_server_info(s, size);
	if (rc != 0)
		goto err_region;
	/* before the line that tells a script it may signal us */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	rc = raw_server_listen(s, listen_addr, &ss, sslen);
	if (rc != 0)
		goto err_info;
	raw_server_loop(s);

	ucp_listener_destroy(s->listener);
err_info:
	free(s->info);
err_region:
	raw_region_destroy(&s->raw, &s->region);
err_fini:
	raw_fini(&s->raw);
err_free:
	free(s);
	return rc;
}

/* ---- client ---- */

struct raw_client;

/* One op in flight; a free list of them, as many as the window. */
struct raw_slot {
	struct raw_client *b;
	uint64_t op;
	int pending; /* UCX requests outstanding + 1 while submitting */
	ucs_status_t status;
	struct raw_slot *next;
};

struct raw_client {
	struct raw raw;
	/* arguments */
	const char *connect;
	int get;
	int fetch_add; /* --op fetch-add: ucp_atomic_op_nbx on 8-byte words */
	uint64_t operand, *results;
	struct bench_params p; /* size, count, window, warm-up */
	int remote_completion;
	int json;
	int timeout_ms;

	ucp_ep_h ep;
	ucs_status_t ep_status;
	struct raw_region local;
	uint64_t slots, span;
	uint64_t remote_addr, remote_len;
	ucp_rkey_h rkey;
	int have_info;

	uint64_t next_op;
	uint64_t *stamp, *done;
	uint64_t ndone, in_flight;
	int recording;
	struct raw_slot *slot_mem, *slot_free;
	ucs_status_t error;
};

static void
raw_client_on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
	struct raw_client *b = arg;

	if (b->ep_status == UCS_OK)
		b->ep_status = status;
}

static ucs_status_t
raw_client_on_info(void *arg, const void *header, size_t header_length,
		   void *data, size_t length, const ucp_am_recv_param_t *param)
{
	struct raw_client *b = arg;
	struct raw_info info_copy, *info = &info_copy;
	ucs_status_t st;

	/* AM data may be unaligned: copy the fixed part out first. */
	if (b->have_info || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
	    length < RAW_INFO_HEAD) {
		b->ep_status = UCS_ERR_INVALID_PARAM;
		return UCS_OK;
	}
	memcpy(info, data, RAW_INFO_HEAD);
	if (length - RAW_INFO_HEAD < info->rkey_len) {
		b->ep_status = UCS_ERR_INVALID_PARAM;
		return UCS_OK;
	}
	st = ucp_ep_rkey_unpack(b->ep, (const char *)data + RAW_INFO_HEAD,
				&b->rkey);
	if (st != UCS_OK) {
		b->ep_status = st;
		return UCS_OK;
	}
	b->remote_addr = info->addr;
	b->remote_len = info->length;
	b->have_info = 1;
	return UCS_OK;
}

static int
raw_client_connect(struct raw_client *b)
{
	ucp_am_handler_param_t am = {
	    .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
			  UCP_AM_HANDLER_PARAM_FIELD_CB |
			  UCP_AM_HANDLER_PARAM_FIELD_ARG,
	    .id = RAW_AM_INFO,
	    .cb = raw_client_on_info,
	    .arg = b,
	};
	ucp_ep_params_t params = {
	    .field_mask = UCP_EP_PARAM_FIELD_FLAGS |
			  UCP_EP_PARAM_FIELD_SOCK_ADDR |
			  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
			  UCP_EP_PARAM_FIELD_ERR_HANDLER,
	    .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
	    .err_mode = UCP_ERR_HANDLING_MODE_PEER,
	    .err_handler = {.cb = raw_client_on_ep_error, .arg = b},
	};
	struct sockaddr_storage ss;
	socklen_t sslen;
	uint64_t deadline;
	ucs_status_t st;

	if (raw_parse_addr(b->connect, &ss, &sslen) < 0)
		return raw_errx(EX_USAGE, "bad address \"%s\"", b->connect);
	st = ucp_worker_set_am_recv_handler(b->raw.worker, &am);
	if (st != UCS_OK)
		return raw_errx(EX_SOFTWARE,
				"ucp_worker_set_am_recv_handler: "
				"%s",
				ucs_status_string(st));
	params.sockaddr.addr = (struct sockaddr *)&ss;
	params.sockaddr.addrlen = sslen;
	st = ucp_ep_create(b->raw.worker, &params, &b->ep);
	if (st != UCS_OK)
		return raw_errx(EX_NOHOST, "connect to %s: %s", b->connect,
				ucs_status_string(st));
	deadline = monotime_ns() + (uint64_t)b->timeout_ms * 1000000u;
	while (!b->have_info && b->ep_status == UCS_OK) {
		if (monotime_ns() > deadline)
			return raw_errx(EX_TEMPFAIL,
					"no answer from %s within %.1f s",
					b->connect, b->timeout_ms / 1000.0);
		raw_progress(&b->raw, 100);
	}
	if (b->ep_status != UCS_OK)
		return raw_errx(EX_NOHOST, "connect to %s: %s", b->connect,
				ucs_status_string(b->ep_status));
	if (b->p.size > b->remote_len)
		return raw_errx(EX_DATAERR,
				"size %" PRIu64 " is bigger than the remote "
				"region (%" PRIu64 " bytes)",
				b->p.size, b->remote_len);
	b->span = b->remote_len - b->p.size + 1;
	return 0;
}

static void
raw_client_op_done(struct raw_slot *slot)
{
	struct raw_client *b = slot->b;

	if (slot->status != UCS_OK && b->error == UCS_OK)
		b->error = slot->status;
	if (b->recording)
		b->done[b->ndone++] = slot->op;
	b->in_flight--;
	slot->next = b->slot_free;
	b->slot_free = slot;
}

static void
raw_client_on_ucx_done(void *request, ucs_status_t status, void *user_data)
{
	struct raw_slot *slot = user_data;

	if (status != UCS_OK && slot->status == UCS_OK)
		slot->status = status;
	ucp_request_free(request);
	if (--slot->pending == 0)
		raw_client_op_done(slot);
}

/* As rmad's op_track: done now, failed now, or pending. */
static void
raw_client_track(struct raw_slot *slot, ucs_status_ptr_t sp)
{
	if (UCS_PTR_IS_ERR(sp)) {
		if (slot->status == UCS_OK)
			slot->status = UCS_PTR_STATUS(sp);
	} else if (sp != NULL) {
		slot->pending++;
	}
}

static uint64_t
raw_client_remote_offset(const struct raw_client *b, uint64_t i)
{
	unsigned __int128 off = (unsigned __int128)i * b->p.size % b->span;

	return (uint64_t)off / b->p.size * b->p.size;
}

static void
raw_client_submit(struct raw_client *b, uint64_t op, uint64_t now)
{
	ucp_request_param_t param = {
	    .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
			    UCP_OP_ATTR_FIELD_USER_DATA |
			    UCP_OP_ATTR_FIELD_MEMH,
	    .cb.send = raw_client_on_ucx_done,
	    .memh = b->local.memh,
	};
	struct raw_slot *slot = b->slot_free;
	uint64_t i = b->next_op;
	char *buf = (char *)b->local.addr + i % b->slots * b->p.size;
	uint64_t raddr = b->remote_addr + raw_client_remote_offset(b, i);

	b->slot_free = slot->next;
	slot->op = op;
	slot->pending = 1;
	slot->status = UCS_OK;
	param.user_data = slot;
	if (b->recording)
		b->stamp[op] = now;
	b->in_flight++;
	b->next_op++;
	if (b->fetch_add) {
		/* rmactl bench's fetch-add: the old value comes back */
		param.op_attr_mask =
		    UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
		    UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER;
		param.datatype = ucp_dt_make_contig(8);
		param.reply_buffer = &b->results[i % b->slots];
		raw_client_track(slot,
				 ucp_atomic_op_nbx(b->ep, UCP_ATOMIC_OP_ADD,
						   &b->operand, 1, raddr,
						   b->rkey, &param));
	} else if (b->get)
		raw_client_track(slot, ucp_get_nbx(b->ep, buf, b->p.size, raddr,
						   b->rkey, &param));
	else
		raw_client_track(slot, ucp_put_nbx(b->ep, buf, b->p.size, raddr,
						   b->rkey, &param));
	if (!b->get && b->remote_completion && slot->status == UCS_OK) {
		param.op_attr_mask &= ~UCP_OP_ATTR_FIELD_MEMH;
		raw_client_track(slot, ucp_ep_flush_nbx(b->ep, &param));
	}
	if (--slot->pending == 0)
		raw_client_op_done(slot);
}

static int
raw_client_fail(struct raw_client *b, ucs_status_t st)
{
	return raw_errx(st == UCS_ERR_CONNECTION_RESET ||
				st == UCS_ERR_ENDPOINT_TIMEOUT ||
				st == UCS_ERR_UNREACHABLE
			    ? EX_NOHOST
			    : EX_SOFTWARE,
			"operation failed: %s", ucs_status_string(st));
}

/* As bench_loop in rmactl_bench.c. */
static int
raw_client_loop(struct raw_client *b, uint64_t n)
{
	uint64_t submitted = 0, completed = 0, now, last = monotime_ns();
	uint64_t timeout_ns = (uint64_t)b->timeout_ms * 1000000u;

	b->ndone = 0;
	while (completed < n) {
		now = monotime_ns();
		while (b->error == UCS_OK && b->ep_status == UCS_OK &&
		       submitted < n && b->in_flight + b->ndone < b->p.window) {
			raw_client_submit(b, submitted, now);
			submitted++;
		}
		/* always progress (puts done at once still need it to
		 * leave); sleep only when nothing at all happened */
		if (ucp_worker_progress(b->raw.worker) == 0 &&
		    submitted - b->in_flight == completed && b->raw.wait_mode)
			raw_sleep(&b->raw, 100);
		if (b->error != UCS_OK)
			return raw_client_fail(b, b->error);
		if (b->ep_status != UCS_OK)
			return raw_client_fail(b, b->ep_status);
		if (submitted - b->in_flight > completed) {
			now = monotime_ns();
			for (uint64_t k = 0; k < b->ndone; k++)
				b->stamp[b->done[k]] =
				    now - b->stamp[b->done[k]];
			b->ndone = 0;
			completed = submitted - b->in_flight;
			last = now;
			continue;
		}
		if (monotime_ns() - last >= timeout_ns)
			return raw_errx(EX_TEMPFAIL,
					"timeout: no completion within %.1f s "
					"(%" PRIu64 " of %" PRIu64 " done)",
					b->timeout_ms / 1000.0, completed, n);
	}
	return 0;
}

static void
raw_client_report(struct raw_client *b, double seconds)
{
	struct bench_result r = {
	    .tool = "raw_ucx",
	    .get = b->get,
	    .op = b->fetch_add ? "fetch-add" : NULL,
	    .size = b->p.size,
	    .count = b->p.count,
	    .window = b->p.window,
	    .remote_completion = b->remote_completion,
	    .seconds = seconds,
	    .latency_ns = b->stamp,
	};

	bench_report_print(&r, b->json);
}

static const char *
raw_param_name(int param)
{
	switch (param) {
	case BENCH_PARAM_SIZE:
		return "size";
	case BENCH_PARAM_COUNT:
		return "count";
	case BENCH_PARAM_WINDOW:
		return "window";
	default:
		return "warmup";
	}
}

static int
raw_client_args(int argc, char **argv, struct raw_client *b)
{
	static const struct option opts[] = {
	    {"connect", required_argument, NULL, 'c'},
	    {"op", required_argument, NULL, 'o'},
	    BENCH_PARAM_OPTIONS,
	    {"remote-completion", no_argument, NULL, 'r'},
	    {"timeout", required_argument, NULL, 't'},
	    {"progress", required_argument, NULL, 'P'},
	    {"json", no_argument, NULL, 'j'},
	    {NULL, 0, NULL, 0},
	};
	const char *op = NULL;
	char *end;
	double secs;
	int c;

	bench_params_init(&b->p);
	b->timeout_ms = 60000;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			b->connect = optarg;
			break;
		case 'o':
			op = optarg;
			break;
		case BENCH_PARAM_SIZE:
		case BENCH_PARAM_COUNT:
		case BENCH_PARAM_WINDOW:
		case BENCH_PARAM_WARMUP:
			if (bench_params_set(&b->p, c, optarg) < 0)
				return raw_errx(EX_USAGE, "bad %s \"%s\"",
						raw_param_name(c), optarg);
			break;
		case 'r':
			b->remote_completion = 1;
			break;
		case 't':
			errno = 0;
			secs = strtod(optarg, &end);
			if (errno != 0 || end == optarg || *end != '\0' ||
			    !(secs > 0) || secs > 1e6)
				return raw_errx(EX_USAGE, "bad timeout \"%s\"",
						optarg);
			b->timeout_ms = (int)(secs * 1000) + 1;
			break;
		case 'P':
			if (strcmp(optarg, "wait") != 0 &&
			    strcmp(optarg, "poll") != 0)
				return raw_errx(EX_USAGE,
						"bad progress \"%s\" (poll or "
						"wait)",
						optarg);
			b->raw.wait_mode = strcmp(optarg, "wait") == 0;
			break;
		case 'j':
			b->json = 1;
			break;
		default:
			return raw_errx(EX_USAGE, "client: bad option %s",
					argv[optind - 1]);
		}
	}
	if (optind != argc)
		return raw_errx(EX_USAGE, "client: unexpected argument %s",
				argv[optind]);
	b->fetch_add = op != NULL && strcmp(op, "fetch-add") == 0;
	if (b->fetch_add && b->p.size == 0)
		b->p.size = 8;
	if (b->connect == NULL || op == NULL || b->p.size == 0)
		return raw_errx(EX_USAGE,
				"client: --connect, --op and --size are "
				"required");
	if (b->fetch_add) {
		if (b->p.size != 8 || b->remote_completion)
			return raw_errx(EX_USAGE, "fetch-add: --size 8, no "
						  "--remote-completion");
		b->operand = 1;
	} else if (strcmp(op, "put") == 0)
		b->get = 0;
	else if (strcmp(op, "get") == 0)
		b->get = 1;
	else
		return raw_errx(EX_USAGE, "bad op \"%s\" (put or get)", op);
	if (b->get && b->remote_completion)
		return raw_errx(EX_USAGE, "--remote-completion is for puts");
	bench_params_default(&b->p); /* the defaults of rmactl bench */
	return 0;
}

static int
raw_client_run(int argc, char **argv)
{
	ucp_request_param_t param = {0};
	struct raw_client *b;
	uint64_t t0, t1;
	ucs_status_t st;
	int rc;

	b = calloc(1, sizeof(*b));
	if (b == NULL)
		return raw_errx(EX_OSERR, "out of memory");
	rc = raw_client_args(argc, argv, b);
	if (rc != 0)
		goto out_free;
	rc = raw_init(&b->raw, b->raw.wait_mode);
	if (rc != 0)
		goto out_free;
	b->slots = RAW_LOCAL_MAX / b->p.size;
	if (b->slots > b->p.window)
		b->slots = b->p.window;
	if (b->slots == 0)
		b->slots = 1;
	rc = raw_region_create(&b->raw, (size_t)(b->slots * b->p.size),
			       &b->local);
	if (rc != 0)
		goto out_fini;
	b->stamp = calloc(b->p.count, sizeof(*b->stamp));
	b->results = calloc(b->slots, sizeof(*b->results));
	b->done = calloc(b->p.window, sizeof(*b->done));
	b->slot_mem = calloc(b->p.window, sizeof(*b->slot_mem));
	if (b->stamp == NULL || b->results == NULL || b->done == NULL ||
	    b->slot_mem == NULL) {
		rc = raw_errx(EX_OSERR, "out of memory");
		goto out_region;
	}
	for (uint64_t i = 0; i < b->p.window; i++) {
		b->slot_mem[i].b = b;
		b->slot_mem[i].next = b->slot_free;
		b->slot_free = &b->slot_mem[i];
	}
	rc = raw_client_connect(b);
	if (rc != 0)
		goto out_close;

	if (b->p.warmup > 0) {
		rc = raw_client_loop(b, b->p.warmup);
		if (rc != 0)
			goto out_close;
	}
	b->recording = 1;
	t0 = monotime_ns();
	rc = raw_client_loop(b, b->p.count);
	if (rc != 0)
		goto out_close;
	if (!b->get) {
		st = raw_wait(&b->raw, ucp_ep_flush_nbx(b->ep, &param),
			      b->timeout_ms);
		if (st != UCS_OK) {
			rc = raw_client_fail(b, st);
			goto out_close;
		}
	}
	t1 = monotime_ns();
	raw_client_report(b, (double)(t1 - t0) / 1e9);

out_close:
	if (b->rkey != NULL)
		ucp_rkey_destroy(b->rkey);
	if (b->ep != NULL) {
		/* flush and close; a failed one is forced */
		if (rc != 0 || b->ep_status != UCS_OK) {
			param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
			param.flags = UCP_EP_CLOSE_FLAG_FORCE;
		}
		raw_wait(&b->raw, ucp_ep_close_nbx(b->ep, &param), 2000);
	}
out_region:
	free(b->stamp);
	free(b->results);
	free(b->done);
	free(b->slot_mem);
	raw_region_destroy(&b->raw, &b->local);
out_fini:
	raw_fini(&b->raw);
out_free:
	free(b);
	return rc;
}

/* What bench/compare records beside its rows. */
static int
raw_settings(void)
{
	for (const struct ucx_default *u = ucx_defaults; u->name; u++) {
		int from_env;
		const char *v = ucx_defaults_effective(u, &from_env);
		printf("%s=%s%s\n", u->env, v,
		       from_env ? " (environment)" : "");
	}
	return fflush(stdout) == 0 ? 0 : EX_IOERR;
}

int
main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "settings") == 0)
		return raw_settings();
	if (argc >= 2 && strcmp(argv[1], "server") == 0)
		return raw_server_run(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "client") == 0)
		return raw_client_run(argc - 1, argv + 1);
	fputs("usage: raw_ucx server [--listen HOST:PORT] [--size BYTES]\n"
	      "                      [--progress poll|wait]\n"
	      "       raw_ucx client --connect HOST:PORT --op put|get "
	      "--size BYTES\n"
	      "                      [--count N] [--window N] [--warmup N]\n"
	      "                      [--remote-completion] [--timeout "
	      "SECONDS]\n"
	      "                      [--progress poll|wait] [--json]\n"
	      "       raw_ucx settings\n",
	      stderr);
	return EX_USAGE;
}
