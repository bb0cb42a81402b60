/* SPDX-License-Identifier: BSD-2-Clause */
/* Regions: sealed memfds mapped here and in the owning client, registered
 * with UCX. A freed region leaves its address range in quarantine: a
 * private anonymous mapping absorbs any late remote write (over tcp UCX
 * writes to the raw address) until twice the operation deadline passed. */
#include "daemon.h"
#include "region_fd.h"
#include "snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__x86_64__)
#endif

/* A failed system call: out of memory is the client's to hear, the rest
 * is ours. */
static wire_status_t
region_status_from_errno(int err)
{
	return err == ENOMEM ? RMA__V1__STATUS__ERR_NO_MEMORY
			     : RMA__V1__STATUS__ERR_INTERNAL;
}

/* The seals of every memfd rmad makes, and asks of every one it adopts:
 * nobody may shrink it under a write (SIGBUS here or in UCX), nor change
 * the seals. */
#define REGION_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

/* A memory file of @length bytes, mapped shared at *@addr, sealed
 * (REGION_SEALS). Regions and clients' rings are made so. The fd, or -1
 * with errno and @detail set. */
int
region_memfd_map(const char *name, size_t length, void **addr, char *detail,
		 size_t detail_len)
{
	const char *step = "memfd_create";
	int fd, err;

	fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		goto err;
	step = "ftruncate";
	if (ftruncate(fd, (off_t)length) < 0)
		goto err_close;
	step = "seal";
	if (fcntl(fd, F_ADD_SEALS, REGION_SEALS) < 0)
		goto err_close;
	step = "mmap";
	*addr = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (*addr == MAP_FAILED)
		goto err_close;
	return fd;

err_close:
	err = errno;
	close(fd);
	errno = err;
err:
	snprintf(detail, detail_len, "%s of %zu bytes: %s", step, length,
		 strerror(errno));
	return -1;
}

static wire_status_t
region_status_from_ucs(ucs_status_t st)
{
	return st == UCS_ERR_NO_MEMORY ? RMA__V1__STATUS__ERR_NO_MEMORY
				       : RMA__V1__STATUS__ERR_INTERNAL;
}

/* One more region of @length bytes for @owner's user, if its clients
 * together stay within max_regions_per_uid and max_region_bytes_per_uid:
 * the per-client limits alone let one user open connections until rmad
 * runs out of fds or memory. Undone by uidlimit_region_put when the
 * region leaves its owner (region_free), or when making it fails. */
static wire_status_t
region_charge_uid(struct daemon *d, struct conn *owner, uint64_t length,
		  char *detail, size_t detail_len)
{
	struct uidlimit_entry held;

	switch (uidlimit_region_get(&d->world->uids, owner->uid, length,
				    d->cfg->max_regions_per_uid,
				    d->cfg->max_region_bytes_per_uid, &held)) {
	case UIDLIMIT_OK:
		return RMA__V1__STATUS__OK;
	case UIDLIMIT_REGIONS:
		snprintf(detail, detail_len,
			 "uid %u already holds %llu regions "
			 "(max_regions_per_uid %u)",
			 (unsigned)owner->uid, (unsigned long long)held.regions,
			 d->cfg->max_regions_per_uid);
		return RMA__V1__STATUS__ERR_LIMIT;
	case UIDLIMIT_BYTES:
		snprintf(
		    detail, detail_len,
		    "%llu more bytes would exceed max_region_bytes_per_uid "
		    "%llu (uid %u holds %llu)",
		    (unsigned long long)length,
		    (unsigned long long)d->cfg->max_region_bytes_per_uid,
		    (unsigned)owner->uid, (unsigned long long)held.bytes);
		return RMA__V1__STATUS__ERR_LIMIT;
	default:
		snprintf(detail, detail_len, "out of memory");
		return RMA__V1__STATUS__ERR_NO_MEMORY;
	}
}

/* A new, empty region in *region_p, if @owner may hold one more of
 * @length bytes: the same limits for a region rmad makes and one a
 * client registers. */
static wire_status_t
region_admit(struct daemon *d, struct conn *owner, uint64_t length,
	     struct region **region_p, char *detail, size_t detail_len)
{
	wire_status_t status;

	if (length == 0 || length > ((uint64_t)1 << 40)) {
		snprintf(detail, detail_len,
			 "region length %llu must be in [1, 1 TiB]",
			 (unsigned long long)length);
		return RMA__V1__STATUS__ERR_INVALID;
	}
	if (__atomic_load_n(&d->world->handed_over, __ATOMIC_ACQUIRE)) {
		snprintf(detail, detail_len,
			 "rmad is handing over to its successor");
		return RMA__V1__STATUS__ERR_SHUTDOWN;
	}
	if (owner->regions.count >= d->cfg->max_regions) {
		snprintf(detail, detail_len,
			 "client already holds %zu regions (max_regions %u)",
			 owner->regions.count, d->cfg->max_regions);
		return RMA__V1__STATUS__ERR_LIMIT;
	}
	if (length > d->cfg->max_region_bytes - owner->region_bytes) {
		snprintf(detail, detail_len,
			 "%llu more bytes would exceed max_region_bytes %llu "
			 "(client holds %llu)",
			 (unsigned long long)length,
			 (unsigned long long)d->cfg->max_region_bytes,
			 (unsigned long long)owner->region_bytes);
		return RMA__V1__STATUS__ERR_LIMIT;
	}
	status = region_charge_uid(d, owner, length, detail, detail_len);
	if (status != RMA__V1__STATUS__OK)
		return status;
	*region_p = calloc(1, sizeof(**region_p));
	if (*region_p == NULL) {
		uidlimit_region_put(&d->world->uids, owner->uid, length);
		snprintf(detail, detail_len, "out of memory");
		return RMA__V1__STATUS__ERR_NO_MEMORY;
	}
	return RMA__V1__STATUS__OK;
}

/* An unguessable secret, never 0. */
static int
region_secret(uint64_t *secret)
{
	if (getrandom(secret, sizeof(*secret), 0) != sizeof(*secret))
		return -1;
	*secret |= 1;
	return 0;
}

/* r->addr holds r->length bytes of @fd, mapped shared: registered with
 * UCX, given its secrets, an id and its descriptors, and entered in the
 * tables as @owner's. On failure it undoes only what it did (the caller
 * unmaps and frees). */
static wire_status_t
region_install(struct daemon *d, struct conn *owner, struct region *r, int fd,
	       char *detail, size_t detail_len)
{
	struct world *w = d->world;
	ucp_mem_map_params_t params;
	struct descriptor desc = {0};
	wire_status_t status;
	ucs_status_t st;

	params.field_mask =
	    UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
	params.address = r->addr;
	params.length = r->length;
	st = ucp_mem_map(d->ucp, &params, &r->memh);
	if (st != UCS_OK) {
		snprintf(detail, detail_len, "ucp_mem_map: %s",
			 ucs_status_string(st));
		return region_status_from_ucs(st);
	}
	st = ucp_rkey_pack(d->ucp, r->memh, &r->rkey, &r->rkey_len);
	if (st != UCS_OK) {
		status = region_status_from_ucs(st);
		snprintf(detail, detail_len, "ucp_rkey_pack: %s",
			 ucs_status_string(st));
		goto err_memh;
	}
	r->d = d;
	/* Unguessable: with the id it is what a peer must know to reach the
	 * region, so a descriptor is the only way in. The read-only secret
	 * as unguessable, and never the other. */
	if (region_secret(&r->generation) < 0 ||
	    region_secret(&r->ro_generation) < 0) {
		status = region_status_from_errno(errno);
		snprintf(detail, detail_len, "getrandom: %s", strerror(errno));
		goto err_rkey;
	}
	if (r->ro_generation == r->generation)
		r->ro_generation ^= 2;
	r->owner = owner;
	r->refs = 1;
	/* The daemon keeps its own fd: a successor process gets it. */
	r->memfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (r->memfd < 0) {
		status = region_status_from_errno(errno);
		snprintf(detail, detail_len, "dup: %s", strerror(errno));
		goto err_rkey;
	}
	world_stop(d);
	r->id = w->next_region_id++;
	if (idmap_put(&w->regions, r->id, r) < 0) {
		world_resume(d);
		goto err_nomem;
	}
	world_resume(d);
	if (idmap_put(&owner->regions, r->id, r) < 0) {
		world_stop(d);
		idmap_remove(&w->regions, r->id);
		world_resume(d);
		goto err_nomem;
	}
	/* Stored before the client hears of it (fdstore.c says why). */
	status = d->region_hooks->commit(d, r, detail, detail_len);
	if (status != RMA__V1__STATUS__OK)
		goto err_tables;
	memcpy(desc.daemon_id, d->id, DAEMON_ID_SIZE);
	desc.region_id = r->id;
	desc.generation = r->generation;
	desc.length = r->length;
	descriptor_format(&desc, r->descriptor);
	desc.generation = r->ro_generation;
	desc.read_only = 1;
	descriptor_format(&desc, r->ro_descriptor);
	owner->region_bytes += r->length;
	d->counters.regions_created++;
	log_debug("region_install: region %llu, %zu bytes, client %u%s",
		  (unsigned long long)r->id, r->length, owner->id,
		  r->registered ? ", registered" : "");
	return RMA__V1__STATUS__OK;

err_tables:
	idmap_remove(&owner->regions, r->id);
	world_stop(d);
	idmap_remove(&w->regions, r->id);
	world_resume(d);
	goto err_memfd;
err_nomem:
	status = RMA__V1__STATUS__ERR_NO_MEMORY;
	snprintf(detail, detail_len, "out of memory");
err_memfd:
	close(r->memfd);
err_rkey:
	ucp_rkey_buffer_release(r->rkey);
err_memh:
	ucp_mem_unmap(d->ucp, r->memh);
	return status;
}

wire_status_t
region_create(struct daemon *d, struct conn *owner, uint64_t length,
	      struct region **region_p, int *memfd_p, char *detail,
	      size_t detail_len)
{
	struct region *r;
	wire_status_t status;
	int fd;

	status = region_admit(d, owner, length, &r, detail, detail_len);
	if (status != RMA__V1__STATUS__OK)
		return status;
	/* A region that would not survive a restart is refused up front. */
	status =
	    d->region_hooks->reserve(d, &r->store_slot, detail, detail_len);
	if (status != RMA__V1__STATUS__OK)
		goto err_free;
	fd = region_memfd_map("rmad-region", length, &r->addr, detail,
			      detail_len);
	if (fd < 0) {
		status = region_status_from_errno(errno);
		goto err_slot;
	}
	r->length = length;
	status = region_install(d, owner, r, fd, detail, detail_len);
	if (status != RMA__V1__STATUS__OK)
		goto err_unmap;
	*region_p = r;
	*memfd_p = fd;
	return RMA__V1__STATUS__OK;

err_unmap:
	munmap(r->addr, length);
	close(fd);
err_slot:
	d->region_hooks->release(d, r);
err_free:
	uidlimit_region_put(&d->world->uids, owner->uid, length);
	free(r);
	return status;
}

wire_status_t
region_register(struct daemon *d, struct conn *owner, int fd, uint64_t offset,
		uint64_t length, struct region **region_p, char *detail,
		size_t detail_len)
{
	struct region *r;
	wire_status_t status;

	status = region_admit(d, owner, length, &r, detail, detail_len);
	if (status != RMA__V1__STATUS__OK)
		return status;
	status =
	    region_fd_map(fd, offset, length, &r->addr, detail, detail_len);
	if (status != RMA__V1__STATUS__OK)
		goto err_free;
	r->length = length;
	r->registered = true;
	r->store_slot = -1; /* not in systemd's fd store: it ends with us */
	status = region_install(d, owner, r, fd, detail, detail_len);
	if (status != RMA__V1__STATUS__OK)
		goto err_unmap;
	*region_p = r;
	return RMA__V1__STATUS__OK;

err_unmap:
	munmap(r->addr, length);
err_free:
	uidlimit_region_put(&d->world->uids, owner->uid, length);
	free(r);
	return status;
}

/* No lock: the table changes only while every other worker is parked. */
struct region *
region_lookup(struct daemon *d, uint64_t id)
{
	return idmap_get(&d->world->regions, id);
}

void
region_ref(struct region *r)
{
	__atomic_add_fetch(&r->refs, 1, __ATOMIC_RELAXED);
}

static void
region_on_quarantine_end(evutil_socket_t fd, short what, void *arg)
{
	struct quarantine *q = arg;

	munmap(q->addr, q->length);
	TAILQ_REMOVE(&q->d->quarantine, q, link);
	event_free(q->timer);
	free(q);
}

/* The last reference: no operation uses the memory any more. d is the
 * calling worker, which keeps the quarantine. */
static void
region_release(struct daemon *d, struct region *r)
{
	struct quarantine *q;
	struct timeval tv = worker_timeval(2 * d->cfg->op_timeout);
	void *p;

	ucp_rkey_buffer_release(r->rkey);
	ucp_mem_unmap(d->ucp, r->memh);
	close(r->memfd);
	p = mmap(r->addr, r->length, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1,
		 0);
	q = calloc(1, sizeof(*q));
	if (p == MAP_FAILED || q == NULL) {
		/* Cannot quarantine: leaking the range beats reusing it. */
		log_warn("region_release: region %llu: cannot quarantine, "
			 "keeping its mapping",
			 (unsigned long long)r->id);
		free(q);
		free(r);
		return;
	}
	q->d = d;
	q->addr = r->addr;
	q->length = r->length;
	q->timer = evtimer_new(d->base, region_on_quarantine_end, q);
	if (q->timer == NULL) {
		free(q);
		free(r);
		return;
	}
	TAILQ_INSERT_TAIL(&d->quarantine, q, link);
	evtimer_add(q->timer, &tv);
	log_debug("region_release: region %llu released",
		  (unsigned long long)r->id);
	free(r);
}

void
region_unref(struct daemon *self, struct region *r)
{
	if (__atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) == 0)
		region_release(self, r);
}

/* r left the region table: out of the fd store, and peers hear it unless
 * the regions live on elsewhere. */
static void
region_gone(struct daemon *d, struct region *r)
{
	d->region_hooks->release(d, r);
	if (!d->regions_kept)
		d->region_hooks->freed(d, r);
}

void
region_free(struct region *r)
{
	struct daemon *d = r->d;
	struct conn *owner = r->owner;

	if (r->owner == NULL)
		return;
	world_stop(d);
	idmap_remove(&d->world->regions, r->id);
	r->owner = NULL;
	world_resume(d);
	idmap_remove(&owner->regions, r->id);
	owner->region_bytes -= r->length;
	uidlimit_region_put(&d->world->uids, owner->uid, r->length);
	region_gone(d, r);
	region_unref(d, r);
}

int
region_adopt(struct daemon *d, int memfd, uint64_t id, uint64_t generation,
	     uint64_t ro_generation, uint64_t length, struct region **region_p)
{
	struct world *w = d->world;
	ucp_mem_map_params_t params;
	struct descriptor desc;
	struct stat st;
	struct region *r;
	ucs_status_t ust;
	int seals;

	/* The memfd comes from another process (a predecessor, systemd's fd
	 * store): one its holder can still shrink would kill us with SIGBUS
	 * at the next write into it. Sealed, its size is fixed for good, so
	 * the check below cannot go stale. */
	seals = fcntl(memfd, F_GET_SEALS);
	if (seals < 0 || (seals & REGION_SEALS) != REGION_SEALS) {
		log_error("region_adopt: region %llu: %s (seals 0x%x, rmad's "
			  "are 0x%x): whoever holds it could shrink it under a "
			  "write; not adopted",
			  (unsigned long long)id,
			  seals < 0 ? "not a sealable memory file"
				    : "memfd not sealed as rmad seals its own",
			  seals < 0 ? 0u : (unsigned)seals,
			  (unsigned)REGION_SEALS);
		return -1;
	}
	/* What the old process said must be what the memfd is. */
	if (fstat(memfd, &st) < 0 || (uint64_t)st.st_size != length ||
	    length == 0 || generation == 0 || ro_generation == 0 || id == 0) {
		log_error("region_adopt: region %llu: memfd does not match "
			  "its record",
			  (unsigned long long)id);
		return -1;
	}
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return -1;
	r->addr =
	    mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (r->addr == MAP_FAILED) {
		log_error("region_adopt: mmap: %s", strerror(errno));
		goto err_free;
	}
	params.field_mask =
	    UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
	params.address = r->addr;
	params.length = length;
	ust = ucp_mem_map(d->ucp, &params, &r->memh);
	if (ust != UCS_OK) {
		log_error("region_adopt: ucp_mem_map: %s",
			  ucs_status_string(ust));
		goto err_unmap;
	}
	ust = ucp_rkey_pack(d->ucp, r->memh, &r->rkey, &r->rkey_len);
	if (ust != UCS_OK) {
		log_error("region_adopt: ucp_rkey_pack: %s",
			  ucs_status_string(ust));
		goto err_memh;
	}
	r->d = d;
	r->id = id;
	r->generation = generation;
	r->ro_generation = ro_generation;
	r->length = length;
	r->orphan = true;
	r->memfd = memfd;
	r->store_slot = -1; /* fdstore_attach() finds its record */
	r->refs = 1; /* the orphan's claim, dropped by its owner's free */
	world_stop(d);
	if (idmap_get(&w->regions, id) != NULL ||
	    idmap_put(&w->regions, id, r) < 0) {
		world_resume(d);
		log_error("region_adopt: region %llu: duplicate or out of "
			  "memory",
			  (unsigned long long)id);
		goto err_rkey;
	}
	if (id >= w->next_region_id)
		w->next_region_id = id + 1;
	world_resume(d);
	memcpy(desc.daemon_id, d->id, DAEMON_ID_SIZE);
	desc.region_id = id;
	desc.generation = generation;
	desc.length = length;
	descriptor_format(&desc, r->descriptor);
	desc.generation = ro_generation;
	desc.read_only = 1;
	descriptor_format(&desc, r->ro_descriptor);
	*region_p = r;
	return 0;

err_rkey:
	ucp_rkey_buffer_release(r->rkey);
err_memh:
	ucp_mem_unmap(d->ucp, r->memh);
err_unmap:
	munmap(r->addr, length);
err_free:
	free(r);
	return -1;
}

size_t
region_expire_orphans(struct daemon *self, uint64_t *ids, size_t *n_p,
		      uint64_t now_ms, uint64_t *next_p)
{
	struct region **gone = calloc(*n_p ? *n_p : 1, sizeof(*gone));
	size_t kept = 0, n_gone = 0;
	struct region *r;

	*next_p = UINT64_MAX;
	if (gone == NULL)
		return 0;
	/* Under the stop: another worker may claim (region_reattach) or
	 * free (region_free_orphan_of) any of them, and then the region
	 * may be gone by the time we look. */
	world_stop(self);
	for (size_t i = 0; i < *n_p; i++) {
		r = region_lookup(self, ids[i]);
		if (r == NULL || !r->orphan)
			continue; /* claimed back, or freed by its owner */
		if (now_ms != 0 && r->orphan_until_ms > now_ms) {
			if (r->orphan_until_ms < *next_p)
				*next_p = r->orphan_until_ms;
			ids[kept++] = ids[i];
			continue;
		}
		idmap_remove(&self->world->regions, r->id);
		r->orphan = false;
		gone[n_gone++] = r;
	}
	world_resume(self);
	*n_p = kept;
	for (size_t i = 0; i < n_gone; i++) {
		region_gone(self, gone[i]);
		region_unref(self, gone[i]);
	}
	free(gone);
	return n_gone;
}

wire_status_t
region_free_orphan_of(struct conn *c, uint64_t id, uint64_t generation,
		      char *detail, size_t detail_len)
{
	struct daemon *d = c->d;
	struct region *r;

	/* As region_reattach: whole under the stop, one answer for every
	 * refusal. */
	world_stop(d);
	r = region_lookup(d, id);
	if (r == NULL || !r->orphan || generation == 0 ||
	    r->generation != generation || r->orphan_uid != c->uid) {
		world_resume(d);
		snprintf(detail, detail_len,
			 "region %llu is not a region of this client",
			 (unsigned long long)id);
		return RMA__V1__STATUS__ERR_NO_REGION;
	}
	idmap_remove(&d->world->regions, r->id);
	r->orphan = false;
	world_resume(d);
	/* This worker's now, as a re-attach would make it: its memory goes
	 * to this worker's quarantine. */
	region_gone(d, r);
	region_unref(d, r);
	log_info("region_free_orphan_of: region %llu freed by its owner "
		 "before its re-attach",
		 (unsigned long long)id);
	return RMA__V1__STATUS__OK;
}

wire_status_t
region_reattach(struct conn *c, uint64_t id, uint64_t generation, char *detail,
		size_t detail_len)
{
	struct daemon *d = c->d;
	wire_status_t status;
	struct region *r;

	/* Under the stop: the orphan deadline (worker 0) and another
	 * connection claiming the same region must see it change whole. */
	world_stop(d);
	r = region_lookup(d, id);
	/* One answer for "no such region", "not an orphan" and "wrong
	 * secret": which of them it is would tell a guesser too much. */
	if (r == NULL || !r->orphan || r->generation != generation ||
	    r->orphan_uid != c->uid) {
		world_resume(d);
		snprintf(detail, detail_len,
			 "region %llu is no region this client left behind",
			 (unsigned long long)id);
		return RMA__V1__STATUS__ERR_NO_REGION;
	}
	if (c->regions.count >= d->cfg->max_regions ||
	    r->length > d->cfg->max_region_bytes - c->region_bytes) {
		world_resume(d);
		snprintf(detail, detail_len,
			 "region %llu (%zu bytes) would exceed this client's "
			 "max_regions %u or max_region_bytes %llu",
			 (unsigned long long)id, r->length, d->cfg->max_regions,
			 (unsigned long long)d->cfg->max_region_bytes);
		return RMA__V1__STATUS__ERR_LIMIT;
	}
	/* An orphan counts for nobody; back with its owner, for its user. */
	status = region_charge_uid(d, c, r->length, detail, detail_len);
	if (status != RMA__V1__STATUS__OK) {
		world_resume(d);
		return status;
	}
	if (idmap_put(&c->regions, id, r) < 0) {
		uidlimit_region_put(&d->world->uids, c->uid, r->length);
		world_resume(d);
		snprintf(detail, detail_len, "out of memory");
		return RMA__V1__STATUS__ERR_NO_MEMORY;
	}
	/* The orphan's claim becomes the owner's table entry; the region is
	 * this worker's from now on, as if c had created it. */
	r->orphan = false;
	r->owner = c;
	r->d = d;
	d->world->regions_reattached++;
	/* a crash from here on brings it back with a new deadline */
	d->region_hooks->orphan_update(d, r);
	world_resume(d);
	c->region_bytes += r->length;
	log_info("region_reattach: region %llu back with client %u (%s)",
		 (unsigned long long)id, c->id, c->name);
	return RMA__V1__STATUS__OK;
}

void
region_quarantine_drain_all(struct daemon *d)
{
	struct quarantine *q;

	while ((q = TAILQ_FIRST(&d->quarantine)) != NULL)
		region_on_quarantine_end(-1, 0, q);
}

/* The bytes of a region are the applications': two clients on two
 * workers may write the same bytes at once, as two processes may through
 * their mappings, and ordering that is theirs. One function for every
 * such copy, so that ThreadSanitizer can be told (scripts/tsan.supp)
 * without hiding races on anything else. Plain memmove: a copy of our
 * own storing past the caches from 32 KiB on was slower at every size
 * measured (puts of 64 KiB 5-8%, 1 MiB 8%, 16 MiB 7%, gets of 64 KiB
 * 3%; back-to-back pairs on the 2-core VM), glibc's copy already
 * streams where that pays. */
__attribute__((noinline)) void
region_copy(void *dst, const void *src, size_t n)
{
	memmove(dst, src, n);
}

/* For snapshot.c, with the world stopped. */
void
region_info_fill(const struct region *r, struct region_info *ri)
{
	ri->id = r->id;
	ri->length = r->length;
	ri->client_id = r->owner != NULL ? r->owner->id : 0;
	ri->in_flight = r->in_flight;
	ri->orphan = r->orphan;
	ri->registered = r->registered;
}

void
region_record_make(const struct region *r, struct handover_record *rec)
{
	memset(rec, 0, sizeof(*rec));
	rec->id = r->id;
	rec->generation = r->generation;
	rec->ro_generation = r->ro_generation;
	rec->length = r->length;
	if (r->owner != NULL) {
		rec->owner_pid = r->owner->pid;
		rec->owner_uid = r->owner->uid;
		snprintf(rec->owner_name, sizeof(rec->owner_name), "%s",
			 r->owner->name);
	} else if (r->orphan) {
		/* still away: its owner may come back to the next */
		rec->owner_pid = r->orphan_pid;
		rec->owner_uid = r->orphan_uid;
	}
}

void
region_record_take(const struct handover_record *rec, int memfd,
		   struct handover_region *hr)
{
	hr->id = rec->id;
	hr->generation = rec->generation;
	hr->ro_generation = rec->ro_generation;
	hr->length = rec->length;
	hr->owner_pid = rec->owner_pid;
	hr->owner_uid = rec->owner_uid;
	memcpy(hr->owner_name, rec->owner_name, sizeof(hr->owner_name));
	hr->owner_name[sizeof(hr->owner_name) - 1] = '\0';
	hr->orphan_until_ms = 0; /* the caller's, if it knows it */
	hr->memfd = memfd;	 /* ownership moves to hr */
}
