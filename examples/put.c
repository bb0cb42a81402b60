/* SPDX-License-Identifier: BSD-2-Clause */
/* Write a string into a region another process exposed, then read it back:
 * from and into the program's own memory (librma moves it through a
 * staging area; a region of rma_region_alloc() would save that copy). */
#include <rma.h>
#include <stdio.h>
#include <string.h>

static void done(rma_request_t *req, rma_status_t st, void *msg)
{
	printf("%s: %s\n", (const char *)msg, rma_strerror(st));
}

int main(int argc, char **argv) /* usage: put HOST:PORT DESCRIPTOR */
{
	char text[] = "hello, remote memory", back[sizeof(text)] = "";
	rma_client_t *c;
	rma_peer_t *peer;
	rma_remote_t *remote;
	rma_request_t *req;
	rma_status_t st;

	if (argc != 3 || (st = rma_connect(NULL, &c)) != RMA_OK)
		return fprintf(stderr, "usage: put HOST:PORT DESCRIPTOR\n"), 64;
	if ((st = rma_peer_connect(c, argv[1], &peer)) != RMA_OK ||
	    (st = rma_remote_import(c, peer, argv[2], &remote)) != RMA_OK)
		return fprintf(stderr, "%s: %s\n", rma_strerror(st), rma_last_error(c)), 1;

	/* up to 64 KiB is copied before it returns: text is free again */
	st = rma_put_buf(c, text, sizeof(text), remote, 0, RMA_FLAG_REMOTE_COMPLETION, done, "put", &req);
	if (st == RMA_OK) {
		st = rma_request_wait(c, req, 5000); /* callback runs in here */
		rma_request_release(req);
	}
	if (st == RMA_OK)
		st = rma_get_buf_sync(c, back, sizeof(back), remote, 0, 5000);
	printf("read back: %s\n", back);
	rma_disconnect(c);
	return st == RMA_OK ? 0 : 1;
}
