/* SPDX-License-Identifier: BSD-2-Clause */
/* A client after fork(): the child's copy shares the parent's socket and
 * ring, so anything it sent, read or reaped would be taken from the
 * parent's connection (and both then failed with messages about a
 * take-over). The child is told by a generation that a pthread_atfork()
 * child handler bumps, compared with the one the client was made in: one
 * load and compare per call, where getpid() would be a system call since
 * glibc 2.25.
 *
 * Every public call on a client checks it (fork_inherited) before it
 * touches the connection; rma_disconnect() in the child then releases
 * only the child's copy (fork_release): fds closed, mappings unmapped,
 * nothing sent, nothing read, no shutdown(2), which would end the
 * parent's connection too. */
#include "rma_internal.h"

#include <pthread.h>
#include <unistd.h>

/* Written only by the child handler, while the child runs one thread. */
unsigned fork_generation;

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void
fork_child(void)
{
	fork_generation++;
}

static void
fork_register(void)
{
	/* Without the handler a child would not be told; a client is still
	 * fine in the process that made it. */
	(void)pthread_atfork(NULL, NULL, fork_child);
}

unsigned
fork_watch(void)
{
	pthread_once(&fork_once, fork_register);
	return fork_generation;
}

rma_status_t
fork_error(rma_client_t *c)
{
	return client_error(c, RMA_ERR_INVALID,
			    "this client belongs to the parent process: "
			    "it was connected before fork(); connect again "
			    "in this process");
}

void
fork_release(rma_client_t *c)
{
	/* The parent's requests: none was sent from here; a caller holding
	 * one sees it end. */
	request_complete_all(c, RMA_ERR_INVALID,
			     "this client belongs to the parent process");
	/* Only local: munmap and free (rma_region.c, rma_peer.c,
	 * rma_request.c). */
	region_cleanup(c);
	peer_cleanup(c);
	request_cleanup(c);
	client_free(c);
}
