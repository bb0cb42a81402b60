/* SPDX-License-Identifier: BSD-2-Clause */
/* rmactl expose: serve a region until told to stop. */
#include "rma.h"
#include "rmactl.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sysexits.h>
#include <unistd.h>

/* --notifications: one line per notification, OFFSET LENGTH VALUE in
 * decimal and the initiating daemon's id. Flushed before each wait for more
 * (rmactl_expose_wait), so a reader of a pipe sees
 * each as it arrives: a write per line cost the owner more than the
 * daemons spent on the put. */
static void
rmactl_expose_on_notify(rma_client_t *client, const rma_notification_t *n,
			void *user_data)
{
	const int *print = user_data;

	(void)client;
	if (!*print)
		return;
	printf("%" PRIu64 " %" PRIu64 " %" PRIu64 " %s\n", n->offset, n->length,
	       n->value, n->daemon_id);
}

/* Wait for SIGINT/SIGTERM while the daemon serves the region; progress
 * the client meanwhile so a vanished daemon is noticed. */
static int
rmactl_expose_wait(rma_client_t *client, int sfd)
{
	struct signalfd_siginfo si;
	struct pollfd pfd[2];
	rma_status_t st;
	ssize_t n;

	for (;;) {
		/* the lines of the last pass (or of the calls before the
		 * first), before waiting again */
		fflush(stdout);
		pfd[0].fd = sfd;
		pfd[0].events = POLLIN;
		pfd[1].fd = rma_fd(client);
		pfd[1].events = POLLIN;
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return rmactl_errx(EX_SOFTWARE, "expose", "poll: %s",
					   strerror(errno));
		}
		if (pfd[0].revents & POLLIN) {
			n = read(sfd, &si, sizeof(si));
			if (n == (ssize_t)sizeof(si))
				return 0;
		}
		if (pfd[1].revents) {
			st = rma_progress(client);
			if (st != RMA_OK)
				return rmactl_fail("expose", st, client);
		}
	}
}

/* What the command line asks for. */
struct rmactl_expose {
	const char *fill, *desc_out, *dump, *ro_out;
	uint64_t size;
	int notifications;
};

/* Fills *x from the command line. Returns 0, -1 after --help, or the exit
 * code of a usage error (said). */
static int
rmactl_expose_args(int argc, char **argv, struct rmactl_expose *x)
{
	static const struct option opts[] = {
	    {"size", required_argument, NULL, 's'},
	    {"fill", required_argument, NULL, 'f'},
	    {"descriptor-out", required_argument, NULL, 'd'},
	    {"dump-on-exit", required_argument, NULL, 'D'},
	    {"read-only-descriptor-out", required_argument, NULL, 'r'},
	    {"notifications", no_argument, NULL, 'n'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (size_parse(optarg, &x->size) < 0 || x->size == 0)
				return rmactl_usage_error(
				    RMACTL_EXPOSE, "expose: bad size \"%s\"",
				    optarg);
			break;
		case 'f':
			x->fill = optarg;
			break;
		case 'd':
			x->desc_out = optarg;
			break;
		case 'D':
			x->dump = optarg;
			break;
		case 'r':
			x->ro_out = optarg;
			break;
		case 'n':
			x->notifications = 1;
			break;
		case 'h':
			fputs(rmactl_cmd_usage[RMACTL_EXPOSE], stdout);
			return -1;
		default:
			return rmactl_usage_error(RMACTL_EXPOSE,
						  "expose: unknown option %s",
						  argv[optind - 1]);
		}
	}
	if (optind != argc)
		return rmactl_usage_error(RMACTL_EXPOSE,
					  "expose: unexpected argument %s",
					  argv[optind]);
	if (x->size == 0)
		return rmactl_usage_error(RMACTL_EXPOSE,
					  "expose: --size is required");
	if (x->size > SIZE_MAX)
		return rmactl_errx(EX_DATAERR, "expose", "size too big");
	/* the descriptor would share stdout with the notification lines */
	if (x->notifications && x->desc_out == NULL)
		return rmactl_usage_error(RMACTL_EXPOSE,
					  "expose: --notifications needs "
					  "--descriptor-out");
	return 0;
}

/* The --fill file, no bigger than the region; *buf_p is the caller's to
 * free. Nothing (NULL, 0) without --fill. */
static int
rmactl_expose_read_fill(const struct rmactl_expose *x, uint8_t **buf_p,
			size_t *len_p)
{
	uint8_t *buf;
	size_t len;
	int rc;

	if (x->fill == NULL)
		return 0;
	rc = rmactl_file_read("expose", x->fill, &buf, &len);
	if (rc != 0)
		return rc;
	if (len > x->size) {
		free(buf);
		return rmactl_errx(EX_DATAERR, "expose",
				   "%s is %zu bytes, bigger than the "
				   "region (%" PRIu64 " bytes)",
				   x->fill, len, x->size);
	}
	*buf_p = buf;
	*len_p = len;
	return 0;
}

/* SIGINT and SIGTERM blocked and readable on *sfd_p. */
static int
rmactl_expose_signals(int *sfd_p)
{
	sigset_t mask;
	int sfd;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 ||
	    (sfd = signalfd(-1, &mask, SFD_CLOEXEC)) < 0)
		return rmactl_errx(EX_SOFTWARE, "expose", "signalfd: %s",
				   strerror(errno));
	*sfd_p = sfd;
	return 0;
}

/* The read-only descriptor to --read-only-descriptor-out (if asked), then
 * the full one to --descriptor-out or stdout. */
static int
rmactl_expose_publish(const struct rmactl_expose *x, rma_region_t *region)
{
	char *line;
	int rc = 0;

	/* Before the full one: a script that waits for --descriptor-out
	 * finds this one there too. */
	if (x->ro_out != NULL) {
		if (asprintf(&line, "%s\n",
			     rma_region_read_only_descriptor(region)) < 0)
			return rmactl_errx(EX_SOFTWARE, "expose",
					   "out of memory");
		if (rmactl_file_write_atomic(x->ro_out, line, strlen(line)) < 0)
			rc = rmactl_errx(EX_CANTCREAT, "expose",
					 "cannot write %s: %s", x->ro_out,
					 strerror(errno));
		free(line);
		if (rc != 0)
			return rc;
	}
	if (asprintf(&line, "%s\n", rma_region_descriptor(region)) < 0)
		return rmactl_errx(EX_SOFTWARE, "expose", "out of memory");
	if (x->desc_out != NULL) {
		if (rmactl_file_write_atomic(x->desc_out, line, strlen(line)) <
		    0)
			rc = rmactl_errx(EX_CANTCREAT, "expose",
					 "cannot write %s: %s", x->desc_out,
					 strerror(errno));
	} else if (fputs(line, stdout) == EOF || fflush(stdout) != 0) {
		rc = rmactl_errx(EX_IOERR, "expose", "write to stdout: %s",
				 strerror(errno));
	}
	free(line);
	return rc;
}

int
rmactl_expose_run(int argc, char **argv)
{
	struct rmactl_expose x = {0};
	uint8_t *fill_buf = NULL;
	size_t fill_len = 0;
	rma_client_t *client;
	rma_region_t *region;
	rma_status_t st;
	int sfd = -1, rc;

	rc = rmactl_expose_args(argc, argv, &x);
	if (rc != 0)
		return rc < 0 ? 0 : rc;
	rc = rmactl_expose_read_fill(&x, &fill_buf, &fill_len);
	if (rc != 0)
		return rc;

	st = rma_connect(rmactl_socket, &client);
	if (st != RMA_OK) {
		rc = rmactl_fail("expose", st, NULL);
		goto out_free_fill;
	}
	st = rma_region_alloc(client, (size_t)x.size, &region);
	if (st != RMA_OK) {
		rc = rmactl_fail("expose", st, client);
		goto out_disconnect;
	}
	if (fill_len > 0)
		memcpy(rma_region_ptr(region), fill_buf, fill_len);
	/* Taken either way: notifying puts to a region served here never
	 * fail for want of a reader. */
	rma_notify_callback(client, rmactl_expose_on_notify, &x.notifications);
	free(fill_buf);
	fill_buf = NULL;

	/* Blocked before the descriptor is out, as a script may signal us as
	 * soon as it reads it; not earlier, so that ^C still interrupts a
	 * connect to a stuck daemon. */
	rc = rmactl_expose_signals(&sfd);
	if (rc != 0)
		goto out_free_region;
	rc = rmactl_expose_publish(&x, region);
	if (rc != 0)
		goto out_close_sfd;

	rc = rmactl_expose_wait(client, sfd);
	if (rc == 0 && x.dump != NULL &&
	    rmactl_file_write_atomic(x.dump, rma_region_ptr(region),
				     rma_region_length(region)) < 0)
		rc = rmactl_errx(EX_CANTCREAT, "expose", "cannot write %s: %s",
				 x.dump, strerror(errno));

out_close_sfd:
	close(sfd);
out_free_region:
	/* a gone daemon already freed it: nothing to report twice */
	rma_region_free(client, region);
out_disconnect:
	rma_disconnect(client);
out_free_fill:
	free(fill_buf);
	return rc;
}
