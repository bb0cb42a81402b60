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

int
rmactl_atomic_run(int argc, char **argv)
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
	const char *cmd = "atomic", *peer = NULL, *descriptor_file = NULL;
	const char *value_text = NULL, *compare_text = NULL;
	int timeout_ms = RMACTL_ATOMIC_TIMEOUT_DEFAULT_S * 1000;
	uint64_t offset = 0, value = 0, compare = 0, old = 0;
	int c, op = -1, have_offset = 0, rc;
	unsigned width = 8;
	rma_client_t *client;
	rma_remote_t *remote;
	rma_status_t st;
	char *desc;

	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			peer = optarg;
			break;
		case 'd':
			descriptor_file = optarg;
			break;
		case 'o':
			if (size_parse(optarg, &offset) < 0)
				return rmactl_usage_error(
				    RMACTL_ATOMIC, "atomic: bad offset \"%s\"",
				    optarg);
			have_offset = 1;
			break;
		case 'x':
			op = rmactl_atomic_op_parse(optarg);
			if (op < 0)
				return rmactl_usage_error(
				    RMACTL_ATOMIC, "atomic: unknown op \"%s\"",
				    optarg);
			break;
		case 'v':
			value_text = optarg;
			break;
		case 'c':
			compare_text = optarg;
			break;
		case 'w':
			if (strcmp(optarg, "64") == 0)
				width = 8;
			else if (strcmp(optarg, "32") == 0)
				width = 4;
			else
				return rmactl_usage_error(
				    RMACTL_ATOMIC,
				    "atomic: width is 64 or 32, not \"%s\"",
				    optarg);
			break;
		case 't':
			if (rmactl_parse_timeout(optarg, &timeout_ms) < 0)
				return rmactl_usage_error(
				    RMACTL_ATOMIC, "atomic: bad timeout \"%s\"",
				    optarg);
			break;
		case 'h':
			fputs(rmactl_cmd_usage[RMACTL_ATOMIC], stdout);
			return 0;
		default:
			return rmactl_usage_error(RMACTL_ATOMIC,
						  "atomic: unknown option %s",
						  argv[optind - 1]);
		}
	}
	if (peer == NULL || descriptor_file == NULL || !have_offset || op < 0 ||
	    value_text == NULL)
		return rmactl_usage_error(RMACTL_ATOMIC,
					  "atomic: --peer, --descriptor, "
					  "--offset, --op and --value are "
					  "required");
	if (optind != argc)
		return rmactl_usage_error(RMACTL_ATOMIC,
					  "atomic: unexpected argument %s",
					  argv[optind]);
	if (rmactl_check_address(peer) < 0)
		return rmactl_usage_error(RMACTL_ATOMIC,
					  "atomic: bad peer address \"%s\" "
					  "(want HOST:PORT)",
					  peer);
	if (offset % width != 0)
		return rmactl_usage_error(RMACTL_ATOMIC,
					  "atomic: offset %" PRIu64
					  " is not aligned to the word's %u "
					  "bytes",
					  offset, width);
	if ((op == RMA_ATOMIC_CSWAP) != (compare_text != NULL))
		return rmactl_usage_error(RMACTL_ATOMIC,
					  "atomic: --compare goes with cswap, "
					  "and only with it");
	if (rmactl_atomic_value(value_text, width, &value) < 0 ||
	    (compare_text != NULL &&
	     rmactl_atomic_value(compare_text, width, &compare) < 0))
		return rmactl_usage_error(RMACTL_ATOMIC,
					  "atomic: bad value for a %u-bit word",
					  width * 8);
	rc = rmactl_file_read_descriptor(cmd, descriptor_file, &desc);
	if (rc != 0)
		return rc;
	rc = rmactl_xfer_connect(cmd, peer, desc, &client, &remote);
	if (rc != 0)
		goto out_free_desc;
	st = rma_atomic_sync(client, remote, offset, (rma_atomic_op_t)op, width,
			     value, compare, &old, timeout_ms);
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
