/* SPDX-License-Identifier: BSD-2-Clause */
/* rmactl put and get: one transfer between a file and a remote region. */
#include "rma.h"
#include "rmactl.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sysexits.h>
#include <unistd.h>

#define RMACTL_TIMEOUT_DEFAULT_S 60

struct rmactl_xfer {
	const char *cmd;
	const char *peer;
	const char *descriptor_file;
	uint64_t offset;
	uint64_t length;
	int have_length;
	const char *out;
	int timeout_ms;
	const char *datafile;
	int notify; /* put: --notify VALUE given */
	uint64_t notify_value;
};

/* A --notify value: decimal or 0x hex, not negative. */
static int
rmactl_xfer_notify_value(const char *s, uint64_t *v_p)
{
	char *end;

	errno = 0;
	*v_p = strtoull(s, &end, 0);
	return errno != 0 || end == s || *end != '\0' || s[0] == '-' ? -1 : 0;
}

/* One option into *x; 0, or the exit code of a usage error (said). */
static int
rmactl_xfer_option(int which, int c, char **argv, struct rmactl_xfer *x)
{
	int is_get = which == RMACTL_GET;

	switch (c) {
	case 'p':
		x->peer = optarg;
		return 0;
	case 'd':
		x->descriptor_file = optarg;
		return 0;
	case 'o':
		if (size_parse(optarg, &x->offset) < 0)
			return rmactl_usage_error(
			    which, "%s: bad offset \"%s\"", x->cmd, optarg);
		return 0;
	case 'l':
		if (!is_get)
			break;
		if (size_parse(optarg, &x->length) < 0 || x->length == 0)
			return rmactl_usage_error(
			    which, "%s: bad length \"%s\"", x->cmd, optarg);
		x->have_length = 1;
		return 0;
	case 'O':
		if (!is_get)
			break;
		x->out = optarg;
		return 0;
	case 't':
		if (rmactl_parse_timeout(optarg, &x->timeout_ms) < 0)
			return rmactl_usage_error(
			    which, "%s: bad timeout \"%s\"", x->cmd, optarg);
		return 0;
	case 'n':
		if (is_get)
			break;
		if (rmactl_xfer_notify_value(optarg, &x->notify_value) < 0)
			return rmactl_usage_error(which,
						  "%s: bad notify value \"%s\"",
						  x->cmd, optarg);
		x->notify = 1;
		return 0;
	}
	return rmactl_usage_error(which, "%s: unknown option %s", x->cmd,
				  argv[optind - 1]);
}

/* The checks once every option is read, and put's DATAFILE. */
static int
rmactl_xfer_args_check(int which, int argc, char **argv, struct rmactl_xfer *x)
{
	if (x->peer == NULL || x->descriptor_file == NULL)
		return rmactl_usage_error(which,
					  "%s: --peer and --descriptor are "
					  "required",
					  x->cmd);
	if (rmactl_check_address(x->peer) < 0)
		return rmactl_usage_error(which,
					  "%s: bad peer address \"%s\" (want "
					  "HOST:PORT)",
					  x->cmd, x->peer);
	if (which != RMACTL_GET) {
		if (optind + 1 != argc)
			return rmactl_usage_error(
			    which, "%s: want one DATAFILE", x->cmd);
		x->datafile = argv[optind];
		return 0;
	}
	if (!x->have_length)
		return rmactl_usage_error(which, "%s: --length is required",
					  x->cmd);
	if (x->length > SIZE_MAX)
		return rmactl_usage_error(which, "%s: length too big", x->cmd);
	if (optind != argc)
		return rmactl_usage_error(which, "%s: unexpected argument %s",
					  x->cmd, argv[optind]);
	return 0;
}

static int
rmactl_xfer_args(int which, int argc, char **argv, struct rmactl_xfer *x)
{
	static const struct option opts[] = {
	    {"peer", required_argument, NULL, 'p'},
	    {"descriptor", required_argument, NULL, 'd'},
	    {"offset", required_argument, NULL, 'o'},
	    {"length", required_argument, NULL, 'l'},
	    {"out", required_argument, NULL, 'O'},
	    {"timeout", required_argument, NULL, 't'},
	    {"notify", required_argument, NULL, 'n'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c, rc;

	x->timeout_ms = RMACTL_TIMEOUT_DEFAULT_S * 1000;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		if (c == 'h') {
			fputs(rmactl_cmd_usage[which], stdout);
			return -1;
		}
		rc = rmactl_xfer_option(which, c, argv, x);
		if (rc != 0)
			return rc;
	}
	return rmactl_xfer_args_check(which, argc, argv, x);
}

static int
rmactl_xfer_open(const struct rmactl_xfer *x, const char *desc,
		 rma_client_t **client_p, rma_remote_t **remote_p)
{
	return rmactl_xfer_connect(x->cmd, x->peer, desc, client_p, remote_p);
}

int
rmactl_xfer_connect(const char *cmd, const char *peer_address, const char *desc,
		    rma_client_t **client_p, rma_remote_t **remote_p)
{
	rma_client_t *client;
	rma_peer_t *peer;
	rma_status_t st;
	int rc;

	st = rma_connect(rmactl_socket, &client);
	if (st != RMA_OK)
		return rmactl_fail(cmd, st, NULL);
	st = rma_peer_connect(client, peer_address, &peer);
	if (st == RMA_OK)
		st = rma_remote_import(client, peer, desc, remote_p);
	if (st != RMA_OK) {
		rc = rmactl_fail(cmd, st, client);
		rma_disconnect(client);
		return rc;
	}
	*client_p = client;
	return 0;
}

int
rmactl_xfer_put(int argc, char **argv)
{
	struct rmactl_xfer x = {.cmd = "put"};
	rma_client_t *client;
	rma_remote_t *remote;
	rma_region_t *region;
	rma_status_t st;
	uint8_t *data = NULL;
	struct stat sb;
	size_t len;
	char *desc;
	int rc, fd;

	rc = rmactl_xfer_args(RMACTL_PUT, argc, argv, &x);
	if (rc != 0)
		return rc < 0 ? 0 : rc;
	rc = rmactl_file_read_descriptor(x.cmd, x.descriptor_file, &desc);
	if (rc != 0)
		return rc;
	/* A regular file goes straight into the region (no second copy of
	 * a big file in memory); a pipe is read up front. */
	rc = rmactl_file_open_input(x.cmd, x.datafile, &fd);
	if (rc != 0)
		goto out_free_desc;
	if (fstat(fd, &sb) < 0) {
		rc = rmactl_errx(EX_IOERR, x.cmd, "cannot read %s: %s",
				 x.datafile, strerror(errno));
		goto out_close_fd;
	}
	if (S_ISREG(sb.st_mode)) {
		len = (size_t)sb.st_size;
	} else if (rmactl_file_read_fd(fd, &data, &len) < 0) {
		rc = rmactl_errx(EX_IOERR, x.cmd, "cannot read %s: %s",
				 x.datafile, strerror(errno));
		goto out_close_fd;
	}
	if (len == 0) {
		rc = rmactl_errx(EX_DATAERR, x.cmd,
				 "%s is empty, nothing to put", x.datafile);
		goto out_free_data;
	}

	rc = rmactl_xfer_open(&x, desc, &client, &remote);
	if (rc != 0)
		goto out_free_data;
	st = rma_region_alloc(client, len, &region);
	if (st != RMA_OK) {
		rc = rmactl_fail(x.cmd, st, client);
		goto out_release;
	}
	if (data != NULL) {
		memcpy(rma_region_ptr(region), data, len);
	} else if (rmactl_file_read_exact(fd, rma_region_ptr(region), len) <
		   0) {
		rc = rmactl_errx(EX_IOERR, x.cmd, "cannot read %s: %s",
				 x.datafile, strerror(errno));
		goto out_free_region;
	}
	/* remote completion: exit 0 means the bytes are at the target */
	if (x.notify) {
		rma_request_t *req = NULL;

		st = rma_put_notify(client, region, 0, remote, x.offset, len,
				    x.notify_value, RMA_FLAG_REMOTE_COMPLETION,
				    NULL, NULL, &req);
		if (st == RMA_OK) {
			st = rma_request_wait(client, req, x.timeout_ms);
			rma_request_release(req);
		}
	} else {
		st = rma_put_sync(client, region, 0, remote, x.offset, len,
				  RMA_FLAG_REMOTE_COMPLETION, x.timeout_ms);
	}
	if (st != RMA_OK)
		rc = rmactl_fail(x.cmd, st, client);

out_free_region:
	rma_region_free(client, region);
out_release:
	rma_remote_release(client, remote);
	rma_disconnect(client);
out_free_data:
	free(data);
out_close_fd:
	close(fd);
out_free_desc:
	free(desc);
	return rc;
}

int
rmactl_xfer_get(int argc, char **argv)
{
	struct rmactl_xfer x = {.cmd = "get"};
	rma_client_t *client;
	rma_remote_t *remote;
	rma_region_t *region;
	rma_status_t st;
	char *desc;
	int rc, fd;

	rc = rmactl_xfer_args(RMACTL_GET, argc, argv, &x);
	if (rc != 0)
		return rc < 0 ? 0 : rc;
	rc = rmactl_file_read_descriptor(x.cmd, x.descriptor_file, &desc);
	if (rc != 0)
		return rc;
	rc = rmactl_xfer_open(&x, desc, &client, &remote);
	if (rc != 0)
		goto out_free_desc;
	st = rma_region_alloc(client, (size_t)x.length, &region);
	if (st != RMA_OK) {
		rc = rmactl_fail(x.cmd, st, client);
		goto out_release;
	}
	st = rma_get_sync(client, region, 0, remote, x.offset, x.length,
			  x.timeout_ms);
	if (st != RMA_OK) {
		rc = rmactl_fail(x.cmd, st, client);
		goto out_free_region;
	}

	/* only now: a failed get leaves an existing --out file alone */
	if (x.out != NULL) {
		fd =
		    open(x.out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0 || rmactl_file_write_all(fd, rma_region_ptr(region),
						    (size_t)x.length) < 0) {
			rc = rmactl_errx(EX_CANTCREAT, x.cmd,
					 "cannot write %s: %s", x.out,
					 strerror(errno));
			if (fd >= 0)
				close(fd);
		} else if (close(fd) < 0) {
			rc = rmactl_errx(EX_CANTCREAT, x.cmd,
					 "cannot write %s: %s", x.out,
					 strerror(errno));
		}
	} else if (rmactl_file_write_all(STDOUT_FILENO, rma_region_ptr(region),
					 (size_t)x.length) < 0) {
		rc = rmactl_errx(EX_IOERR, x.cmd, "write to stdout: %s",
				 strerror(errno));
	}

out_free_region:
	rma_region_free(client, region);
out_release:
	rma_remote_release(client, remote);
	rma_disconnect(client);
out_free_desc:
	free(desc);
	return rc;
}
