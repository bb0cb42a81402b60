/* SPDX-License-Identifier: BSD-2-Clause */
/* Regions: memory the daemon creates (a sealed memfd) and this process maps
 * too, so puts and gets move its bytes without a copy through the socket;
 * or a memory file of the application's that both map (register_fd). */
#include "rma_internal.h"

#include <stdio.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Ask the daemon to free a region; keeps the handle's last error as it
 * was when this is a cleanup. The generation (0: none) lets the daemon
 * free it as an orphan too, before its re-attach. */
static rma_status_t
region_free_daemon(rma_client_t *c, uint64_t region_id, uint64_t generation,
		   int keep_error)
{
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__RegionFree body = RMA__V1__REGION_FREE__INIT;
	Rma__V1__Reply *reply;
	char saved[sizeof(c->last_error)];
	rma_status_t st;

	if (keep_error)
		memcpy(saved, c->last_error, sizeof(saved));
	body.region_id = region_id;
	body.generation = generation;
	req.body_case = RMA__V1__REQUEST__BODY_REGION_FREE;
	req.region_free = &body;
	st = client_call(c, &req, CLIENT_CALL_TIMEOUT_MS, &reply, NULL);
	if (st == RMA_OK)
		rma__v1__reply__free_unpacked(reply, NULL);
	if (keep_error)
		memcpy(c->last_error, saved, sizeof(saved));
	return st;
}

RMA_API rma_status_t
rma_region_alloc(rma_client_t *client, size_t length, rma_region_t **region_p)
{
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__RegionAlloc body = RMA__V1__REGION_ALLOC__INIT;
	Rma__V1__RegionAllocReply *ra;
	Rma__V1__Reply *reply;
	struct rma_region *region;
	rma_status_t st;
	int fd = -1;

	if (client == NULL)
		return RMA_ERR_INVALID;
	if (fork_inherited(client))
		return fork_error(client);
	if (region_p == NULL || length == 0)
		return client_error(client, RMA_ERR_INVALID,
				    "region length 0 or no region_p");
	region = calloc(1, sizeof(*region));
	if (region == NULL)
		return client_error(client, RMA_ERR_NO_MEMORY,
				    "no memory for a region");

	body.length = length;
	req.body_case = RMA__V1__REQUEST__BODY_REGION_ALLOC;
	req.region_alloc = &body;
	st = client_call(client, &req, CLIENT_CALL_TIMEOUT_MS, &reply, &fd);
	if (st != RMA_OK)
		goto err_free_region;
	if (reply->body_case != RMA__V1__REPLY__BODY_REGION_ALLOC || fd < 0) {
		st = client_error(client, RMA_ERR_PROTOCOL,
				  "region allocation answered "
				  "without a region");
		goto err_free_reply;
	}
	ra = reply->region_alloc;
	if (ra->length < length || ra->length > SIZE_MAX) {
		st = client_error(client, RMA_ERR_PROTOCOL,
				  "asked for a region of %zu "
				  "bytes, got %llu",
				  length, (unsigned long long)ra->length);
		goto err_free_daemon;
	}
	region->map_length = (size_t)ra->length;
	region->base = mmap(NULL, region->map_length, PROT_READ | PROT_WRITE,
			    MAP_SHARED, fd, 0);
	if (region->base == MAP_FAILED) {
		st = client_error(client, RMA_ERR_NO_MEMORY,
				  "mmap of a %zu-byte region: %s",
				  region->map_length, strerror(errno));
		goto err_free_daemon;
	}
	region->descriptor = strdup(ra->descriptor ? ra->descriptor : "");
	region->ro_descriptor =
	    strdup(ra->read_only_descriptor ? ra->read_only_descriptor : "");
	if (region->descriptor == NULL || region->ro_descriptor == NULL) {
		free(region->descriptor);
		free(region->ro_descriptor);
		st = client_error(client, RMA_ERR_NO_MEMORY,
				  "no memory for a descriptor");
		goto err_unmap;
	}
	/* the mapping keeps the memory; the fd is no longer needed */
	close(fd);
	region->client = client;
	region->region_id = ra->region_id;
	region->generation = ra->generation;
	region->length = length;
	region->next = client->regions;
	if (client->regions != NULL)
		client->regions->prev = region;
	client->regions = region;
	rma__v1__reply__free_unpacked(reply, NULL);
	*region_p = region;
	return RMA_OK;

err_unmap:
	munmap(region->base, region->map_length);
err_free_daemon:
	region_free_daemon(client, ra->region_id, ra->generation, 1);
err_free_reply:
	if (fd >= 0)
		close(fd);
	rma__v1__reply__free_unpacked(reply, NULL);
err_free_region:
	free(region);
	return st;
}

/* The daemon's answer to a RegionRegister: the region's id, secrets and
 * descriptors on @region, which maps the file already. */
static rma_status_t
region_register_reply(rma_client_t *c, struct rma_region *region,
		      const Rma__V1__Reply *reply)
{
	const Rma__V1__RegionAllocReply *ra = reply->region_register;

	if (reply->body_case != RMA__V1__REPLY__BODY_REGION_REGISTER ||
	    ra->length != region->length)
		return client_error(c, RMA_ERR_PROTOCOL,
				    "region registration answered without "
				    "the region");
	region->descriptor = strdup(ra->descriptor ? ra->descriptor : "");
	region->ro_descriptor =
	    strdup(ra->read_only_descriptor ? ra->read_only_descriptor : "");
	if (region->descriptor == NULL || region->ro_descriptor == NULL) {
		free(region->descriptor);
		free(region->ro_descriptor);
		return client_error(c, RMA_ERR_NO_MEMORY,
				    "no memory for a descriptor");
	}
	region->region_id = ra->region_id;
	region->generation = ra->generation;
	return RMA_OK;
}

/* Asks the daemon to register [offset, offset + length) of @fd. */
static rma_status_t
region_register_call(rma_client_t *c, int fd, uint64_t offset, size_t length,
		     Rma__V1__Reply **reply_p)
{
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__RegionRegister body = RMA__V1__REGION_REGISTER__INIT;

	body.offset = offset;
	body.length = length;
	req.body_case = RMA__V1__REQUEST__BODY_REGION_REGISTER;
	req.region_register = &body;
	return client_call_fd(c, &req, fd, CLIENT_CALL_TIMEOUT_MS, reply_p,
			      NULL);
}

RMA_API rma_status_t
rma_region_register_fd(rma_client_t *client, int fd, uint64_t offset,
		       size_t length, rma_region_t **region_p)
{
	struct rma_region *region;
	Rma__V1__Reply *reply;
	rma_status_t st;
	int map_errno;

	if (client == NULL)
		return RMA_ERR_INVALID;
	if (fork_inherited(client))
		return fork_error(client);
	if (region_p == NULL || length == 0 || fd < 0 || offset > INT64_MAX)
		return client_error(client, RMA_ERR_INVALID,
				    "no fd, length 0, offset past 2^63 or "
				    "no region_p");
	region = calloc(1, sizeof(*region));
	if (region == NULL)
		return client_error(client, RMA_ERR_NO_MEMORY,
				    "no memory for a region");
	/* Mapped before the daemon sees it: on hugetlbfs the daemon seals
	 * it against new writable mappings (daemon/region_fd.c). */
	region->base = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED,
			    fd, (off_t)offset);
	map_errno = region->base == MAP_FAILED ? errno : 0;
	st = region_register_call(client, fd, offset, length, &reply);
	if (st != RMA_OK)
		goto err_unmap; /* the daemon's reason, the clearest */
	region->length = region->map_length = length;
	if (map_errno != 0) {
		st = client_error(client,
				  map_errno == ENOMEM	? RMA_ERR_NO_MEMORY
				  : map_errno == EACCES ? RMA_ERR_PERMISSION
							: RMA_ERR_INVALID,
				  "mmap of %zu bytes at offset %llu: %s",
				  length, (unsigned long long)offset,
				  strerror(map_errno));
		goto err_free_daemon;
	}
	st = region_register_reply(client, region, reply);
	if (st != RMA_OK)
		goto err_free_daemon;
	rma__v1__reply__free_unpacked(reply, NULL);
	region->client = client;
	region->next = client->regions;
	if (client->regions != NULL)
		client->regions->prev = region;
	client->regions = region;
	*region_p = region;
	return RMA_OK;

err_free_daemon:
	if (reply->body_case == RMA__V1__REPLY__BODY_REGION_REGISTER)
		region_free_daemon(client, reply->region_register->region_id,
				   reply->region_register->generation, 1);
	rma__v1__reply__free_unpacked(reply, NULL);
err_unmap:
	if (region->base != MAP_FAILED)
		munmap(region->base, length);
	free(region);
	return st;
}

static void
region_destroy(rma_client_t *c, struct rma_region *region)
{
	if (region->prev != NULL)
		region->prev->next = region->next;
	else
		c->regions = region->next;
	if (region->next != NULL)
		region->next->prev = region->prev;
	if (!region->freed)
		munmap(region->base, region->map_length);
	free(region->descriptor);
	free(region->ro_descriptor);
	free(region);
}

/* What rma_region_free leaves: the struct alone, on the client's list
 * until rma_disconnect, so that a stale handle reads as a freed region
 * (NO_REGION) instead of freed memory. Handles are never reused, so a
 * stale one cannot name a newer region. */
static void
region_retire(struct rma_region *region)
{
	munmap(region->base, region->map_length);
	free(region->descriptor);
	free(region->ro_descriptor);
	region->descriptor = NULL;
	region->ro_descriptor = NULL;
	region->base = NULL;
	region->length = 0;
	region->map_length = 0;
	region->freed = 1;
}

struct region_wait {
	const rma_client_t *c;
	uint32_t reattaches; /* as the wait began */
};

static int
region_reattached(const void *arg)
{
	const struct region_wait *w = arg;

	return w->c->reattaches != w->reattaches;
}

/* A free cut by a take-over or a restart (reattaches: the client's count
 * before it was sent): the old process may have freed the region or not
 * (it answers RESTARTED once it has handed its regions on), and the
 * re-attach left it out, so in the new process it is an orphan. Free it
 * there with its secret, once the client is back; no such region there
 * means the old process had freed it. */
static rma_status_t
region_free_again(rma_client_t *c, struct rma_region *region,
		  uint32_t reattaches)
{
	int64_t deadline = client_deadline(c->reattach_ms);
	struct region_wait w = {c, reattaches};
	rma_status_t st = RMA_ERR_RESTARTED;

	while (st == RMA_ERR_RESTARTED && client_remaining(deadline) != 0) {
		/* the old process answered before it closed: wait for the
		 * close and the re-attach (client_reconnect) */
		if (c->reattaches == w.reattaches &&
		    (st = client_wait(c, deadline, region_reattached, &w)) !=
			RMA_OK)
			return client_error(
			    c, st,
			    "region %llu: the daemon was taken over while it "
			    "was freed, and the client did not get back: %s",
			    (unsigned long long)region->region_id,
			    c->gone ? c->gone_detail : "timed out");
		w.reattaches = c->reattaches;
		st = region_free_daemon(c, region->region_id,
					region->generation, 0);
	}
	if (st == RMA_ERR_NO_REGION)
		st = RMA_OK; /* the old process freed it before it left */
	return st;
}

RMA_API rma_status_t
rma_region_free(rma_client_t *client, rma_region_t *region)
{
	uint32_t reattaches;
	rma_status_t st;

	if (client != NULL && fork_inherited(client))
		return fork_error(client);
	if (client == NULL || region == NULL)
		return client_error(client, RMA_ERR_INVALID,
				    "rma_region_free: no region");
	if (region->client != client)
		return client_error(client, RMA_ERR_INVALID,
				    "region of another client");
	if (region->freed)
		return client_error(client, RMA_ERR_NO_REGION,
				    "region %llu was already freed",
				    (unsigned long long)region->region_id);
	/* The mapping goes whatever the daemon says: the handle is done. */
	if (region->lost != RMA_OK) {
		/* no daemon has it any more: nothing to ask */
		region_retire(region);
		return RMA_OK;
	}
	/* A re-attach while it is asked leaves it out: it is freed, not
	 * claimed back. */
	region->freeing = 1;
	reattaches = client->reattaches;
	st = region_free_daemon(client, region->region_id, region->generation,
				0);
	if (st == RMA_ERR_RESTARTED)
		st = region_free_again(client, region, reattaches);
	region_retire(region);
	return st;
}

void
region_cleanup(rma_client_t *c)
{
	/* the daemon frees the regions of a closed connection itself */
	while (c->regions != NULL)
		region_destroy(c, c->regions);
}

RMA_API void *
rma_region_ptr(const rma_region_t *region)
{
	return region != NULL ? region->base : NULL;
}

RMA_API size_t
rma_region_length(const rma_region_t *region)
{
	return region != NULL ? region->length : 0;
}

RMA_API const char *
rma_region_descriptor(const rma_region_t *region)
{
	return region != NULL && region->descriptor != NULL ? region->descriptor
							    : "";
}

RMA_API const char *
rma_region_read_only_descriptor(const rma_region_t *region)
{
	return region != NULL && region->ro_descriptor != NULL
		   ? region->ro_descriptor
		   : "";
}

/* ---- after a take-over (client.c: client_reconnect) ---- */

rma_status_t
region_reattach_all(rma_client_t *c, int64_t deadline)
{
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__RegionReattach body = RMA__V1__REGION_REATTACH__INIT;
	char why[sizeof(c->last_error)];
	struct rma_region *region;
	Rma__V1__Reply *reply;
	rma_status_t st;

	/* The mapping stays: it is the region's memfd, which the new process
	 * holds too. Only the daemon's table has to learn the owner again,
	 * and the generation, which only this client was told, proves it. */
	for (region = c->regions; region != NULL; region = region->next) {
		if (region->freed || region->freeing || region->lost != RMA_OK)
			continue;
		body.region_id = region->region_id;
		body.generation = region->generation;
		req.body_case = RMA__V1__REQUEST__BODY_REGION_REATTACH;
		req.region_reattach = &body;
		st = client_call(c, &req, client_remaining(deadline), &reply,
				 NULL);
		if (st == RMA_OK) {
			rma__v1__reply__free_unpacked(reply, NULL);
			continue;
		}
		snprintf(why, sizeof(why), "%s", c->last_error);
		/* No answer: the connection failed, not this region. */
		if (c->gone || st == RMA_ERR_TIMEOUT || st == RMA_ERR_RESTARTED)
			return client_error(
			    c, st, "region %llu: %s",
			    (unsigned long long)region->region_id, why);
		/* The daemon refused this one (freed meanwhile, its orphan
		 * deadline passed, over a limit): the others are still
		 * ours. Its mapping stays the application's memory. */
		region->lost = st;
		client_error(c, st, "region %llu was not given back: %s",
			     (unsigned long long)region->region_id, why);
	}
	return RMA_OK;
}
