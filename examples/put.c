/* SPDX-License-Identifier: BSD-2-Clause */
/* Write a string into a region another process exposed, then read it back. */
#include <rma.h>
#include <stdio.h>
#include <string.h>

static void done(rma_request_t *req, rma_status_t st, void *msg)
{
	printf("%s: %s\n", (const char *)msg, rma_strerror(st));
}

int main(int argc, char **argv) /* usage: put HOST:PORT DESCRIPTOR */
{
	rma_client_t *c;
	rma_region_t *r;
	rma_peer_t *peer;
	rma_remote_t *remote;
	rma_request_t *req;
	rma_status_t st;

	if (argc != 3 || (st = rma_connect(NULL, &c)) != RMA_OK)
		return fprintf(stderr, "usage: put HOST:PORT DESCRIPTOR\n"), 64;
	if ((st = rma_region_alloc(c, 4096, &r)) != RMA_OK ||
	    (st = rma_peer_connect(c, argv[1], &peer)) != RMA_OK ||
	    (st = rma_remote_import(c, peer, argv[2], &remote)) != RMA_OK)
		return fprintf(stderr, "%s: %s\n", rma_strerror(st), rma_last_error(c)), 1;

	strcpy(rma_region_ptr(r), "hello, remote memory");
	rma_put(c, r, 0, remote, 0, 21, RMA_FLAG_REMOTE_COMPLETION, done, "put", &req);
	st = rma_request_wait(c, req, 5000); /* callback runs in here */
	rma_request_release(req);
	if (st == RMA_OK)
		st = rma_get_sync(c, r, 100, remote, 0, 21, 5000);
	printf("read back: %s\n", (char *)rma_region_ptr(r) + 100);
	rma_disconnect(c);
	return st == RMA_OK ? 0 : 1;
}
