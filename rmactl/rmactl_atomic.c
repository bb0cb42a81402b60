/* SPDX-License-Identifier: BSD-2-Clause */
/* rmactl atomic: one atomic operation on a word of a remote region. */
#include "rma.h"
#include "rmactl.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#define RMACTL_ATOMIC_TIMEOUT_DEFAULT_S 60

static const struct {
	const char *name;
	rma_atomic_op_t op;
} rmactl_atomic_ops[] = {
    {"add", RMA_ATOMIC_ADD},	       {"fetch-add", RMA_ATOMIC_FETCH_ADD},
    {"swap", RMA_ATOMIC_SWAP},	       {"cswap", RMA_ATOMIC_CSWAP},
    {"and", RMA_ATOMIC_AND},	       {"or", RMA_ATOMIC_OR},
    {"xor", RMA_ATOMIC_XOR},	       {"fetch-and", RMA_ATOMIC_FETCH_AND},
    {"fetch-or", RMA_ATOMIC_FETCH_OR}, {"fetch-xor", RMA_ATOMIC_FETCH_XOR},
};

int
rmactl_atomic_op_parse(const char *s)
{
	for (size_t i = 0;
	     i < sizeof(rmactl_atomic_ops) / sizeof(rmactl_atomic_ops[0]); i++)
		if (strcmp(s, rmactl_atomic_ops[i].name) == 0)
			return (int)rmactl_atomic_ops[i].op;
	return -1;
}

/* Decimal or 0x hex; a negative decimal is its two's complement (add -1
 * subtracts one). Width 32 takes values that fit 32 bits, either way. */
static int
rmactl_atomic_value(const char *s, unsigned width, uint64_t *v_p)
{
	char *end;
	uint64_t v;

	errno = 0;
	if (s[0] == '-') {
		long long n = strtoll(s, &end, 10);
		if (errno != 0 || end == s || *end != '\0')
			return -1;
		if (width == 4 && n < INT32_MIN)
			return -1;
		v = (uint64_t)n;
		if (width == 4)
			v &= UINT32_MAX;
	} else {
		v = strtoull(s, &end, 0);
		if (errno != 0 || end == s || *end != '\0')
			return -1;
		if (width == 4 && v > UINT32_MAX)
			return -1;
	}
	*v_p = v;
	return 0;
}

/* What the command line asks for. */
struct rmactl_atomic {
	const char *peer, *descriptor_file;
	const char *value_text, *compare_text;
	int timeout_ms;
	uint64_t offset, value, compare;
	int op, have_offset;
	unsigned width; /* bytes: 8 or 4 */
};

/* One option into *a; 0, or the exit code of a usage error (said). */
static int
rmactl_atomic_option(int c, char **argv, struct rmactl_atomic *a)
{
	switch (c) {
	case 'p':
		a->peer = optarg;
		break;
	case 'd':
		a->descriptor_file = optarg;
		break;
	case 'o':
		if (size_parse(optarg, &a->offset) < 0)
			return rmactl_usage_error(
			    RMACTL_ATOMIC, "atomic: bad offset \"%s\"", optarg);
		a->have_offset = 1;
		break;
	case 'x':
		a->op = rmactl_atomic_op_parse(optarg);
		if (a->op < 0)
			return rmactl_usage_error(
			    RMACTL_ATOMIC, "atomic: unknown op \"%s\"", optarg);
		break;
	case 'v':
		a->value_text = optarg;
		break;
	case 'c':
		a->compare_text = optarg;
		break;
	case 'w':
		if (strcmp(optarg, "64") == 0)
			a->width = 8;
		else if (strcmp(optarg, "32") == 0)
			a->width = 4;
		else
			return rmactl_usage_error(
			    RMACTL_ATOMIC,
			    "atomic: width is 64 or 32, not \"%s\"", optarg);
		break;
	case 't':
		if (rmactl_parse_timeout(optarg, &a->timeout_ms) < 0)
			return rmactl_usage_error(RMACTL_ATOMIC,
						  "atomic: bad timeout \"%s\"",
						  optarg);
		break;
	default:
		return rmactl_usage_error(RMACTL_ATOMIC,
					  "atomic: unknown option %s",
					  argv[optind - 1]);
	}
	return 0;
}

/* Fills *a from the command line. Returns 0, -1 after --help, or the exit
 * code of a usage error (said). */
static int
rmactl_atomic_args(int argc, char **argv, struct rmactl_atomic *a)
{
	static const struct option opts[] = {
	    {"peer", required_argument, NULL, 'p'},
	    {"descriptor", required_argument, NULL, 'd'},
	    {"offset", required_argument, NULL, 'o'},
	    {"op", required_argument, NULL, 'x'},
	    {"value", required_argument, NULL, 'v'},
	    {"compare", required_argument, NULL, 'c'},
	    {"width", required_argument, NULL, 'w'},
	    {"timeout", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c, rc;

	*a = (struct rmactl_atomic){
	    .timeout_ms = RMACTL_ATOMIC_TIMEOUT_DEFAULT_S * 1000,
	    .op = -1,
	    .width = 8,
	};
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		if (c == 'h') {
			fputs(rmactl_cmd_usage[RMACTL_ATOMIC], stdout);
			return -1;
		}
		rc = rmactl_atomic_option(c, argv, a);
		if (rc != 0)
			return rc;
	}
	if (a->peer == NULL || a->descriptor_file == NULL || !a->have_offset ||
	    a->op < 0 || a->value_text == NULL)
		return rmactl_usage_error(RMACTL_ATOMIC,
					  "atomic: --peer, --descriptor, "
					  "--offset, --op and --value are "
					  "required");
	if (optind != argc)
		return rmactl_usage_error(RMACTL_ATOMIC,
					  "atomic: unexpected argument %s",
					  argv[optind]);
	if (rmactl_check_address(a->peer) < 0)
		return rmactl_usage_error(RMACTL_ATOMIC,
					  "atomic: bad peer address \"%s\" "
					  "(want HOST:PORT)",
					  a->peer);
	if (a->offset % a->width != 0)
		return rmactl_usage_error(RMACTL_ATOMIC,
					  "atomic: offset %" PRIu64
					  " is not aligned to the word's %u "
					  "bytes",
					  a->offset, a->width);
	if ((a->op == RMA_ATOMIC_CSWAP) != (a->compare_text != NULL))
		return rmactl_usage_error(RMACTL_ATOMIC,
					  "atomic: --compare goes with cswap, "
					  "and only with it");
	if (rmactl_atomic_value(a->value_text, a->width, &a->value) < 0 ||
	    (a->compare_text != NULL &&
	     rmactl_atomic_value(a->compare_text, a->width, &a->compare) < 0))
		return rmactl_usage_error(RMACTL_ATOMIC,
					  "atomic: bad value for a %u-bit word",
					  a->width * 8);
	return 0;
}

int
rmactl_atomic_run(int argc, char **argv)
{
	const char *cmd = "atomic";
	struct rmactl_atomic a;
	uint64_t old = 0;
	rma_client_t *client;
	rma_remote_t *remote;
	rma_status_t st;
	char *desc;
	int rc;

	rc = rmactl_atomic_args(argc, argv, &a);
	if (rc != 0)
		return rc < 0 ? 0 : rc;
	rc = rmactl_file_read_descriptor(cmd, a.descriptor_file, &desc);
	if (rc != 0)
		return rc;
	rc = rmactl_xfer_connect(cmd, a.peer, desc, &client, &remote);
	if (rc != 0)
		goto out_free_desc;
	st = rma_atomic_sync(client, remote, a.offset, (rma_atomic_op_t)a.op,
			     a.width, a.value, a.compare, &old, a.timeout_ms);
	if (st != RMA_OK)
		rc = rmactl_fail(cmd, st, client);
	else if (printf("%" PRIu64 "\n", old) < 0 || fflush(stdout) != 0)
		rc = rmactl_errx(EX_IOERR, cmd, "write to stdout: %s",
				 strerror(errno));
	rma_remote_release(client, remote);
	rma_disconnect(client);
out_free_desc:
	free(desc);
	return rc;
}
