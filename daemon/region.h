/* SPDX-License-Identifier: BSD-2-Clause */
/* Regions: memory a client shares with the daemon, made here
 * (region.c: a sealed memfd) or registered from the client's own file
 * (region_fd.c); freed once its owner let go and no operation holds it,
 * its pages quarantined until UCX lets go of them. Below the client
 * connection and the peers: what a region's life means to the fd store
 * and to other daemons goes up through struct region_hooks, which
 * daemon.c fills. */
#ifndef RMAD_REGION_H
#define RMAD_REGION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include <ucp/api/ucp.h>

#include "descriptor.h"
#include "handover_wire.h"
#include "rma.pb-c.h"

typedef Rma__V1__Status wire_status_t;

struct daemon;
struct conn;
struct event;

struct region {
	struct daemon *d;
	uint64_t id;
	uint64_t generation;
	/* The read-only secret: a descriptor that carries it is served
	 * gets only (target.c). Never 0, never the generation. */
	uint64_t ro_generation;
	size_t length;
	void *addr;
	ucp_mem_h memh;
	void *rkey;
	size_t rkey_len;
	struct conn *owner; /* NULL once freed, or while an orphan */
	bool orphan; /* handed over from an earlier process, owner away */
	/* while an orphan: who owned it, the only user allowed it back */
	uid_t orphan_uid;
	pid_t orphan_pid;
	/* while an orphan: when it is freed, CLOCK_REALTIME ms; it goes on
	 * with the region to the next process (handover.c, fdstore.c), so
	 * that a crash loop cannot keep it */
	uint64_t orphan_until_ms;
	int memfd; /* kept for a hand-over to the next process */
	/* the client's own file (region_fd.c): not handed over, not in the
	 * fd store, so it ends with this process */
	bool registered;
	int store_slot; /* fdstore.c: its record in the state, or -1 */
	int refs;	/* the owner's table entry, plus one per operation */
	uint64_t in_flight;
	char descriptor[DESCRIPTOR_TEXT_SIZE];
	char ro_descriptor[DESCRIPTOR_TEXT_SIZE];
};

struct quarantine {
	void *addr;
	size_t length;
	struct event *timer;
	struct daemon *d;
	TAILQ_ENTRY(quarantine) link;
};

TAILQ_HEAD(quarantine_list, quarantine);

/* What region.c tells the layers above it, through a table daemon.c
 * fills: the fd store (fdstore.c) keeps a region's memfd for the next
 * start, peers (resolve.c) hear that a region is gone. */
struct region_hooks {
	/* region_create: a slot for a region, before anything is made;
	 * then, before the client hears of it, the region stored. */
	wire_status_t (*reserve)(struct daemon *d, int *slot_p, char *detail,
				 size_t detail_len);
	wire_status_t (*commit)(struct daemon *d, struct region *r,
				char *detail, size_t detail_len);
	/* a slot reserved and never committed, or a region freed */
	void (*release)(struct daemon *d, struct region *r);
	/* r became an orphan or was claimed back */
	void (*orphan_update)(struct daemon *d, const struct region *r);
	/* a region freed, unless the regions are kept (regions_kept) */
	void (*freed)(struct daemon *d, const struct region *r);
};

/* Creates the region and its memfd; *memfd_p goes to the client. */
wire_status_t region_create(struct daemon *d, struct conn *owner,
			    uint64_t length, struct region **region_p,
			    int *memfd_p, char *detail, size_t detail_len);
/* [offset, offset + length) of the client's memory file @fd as a region
 * of @owner (region_fd.c checks and maps it); @fd stays the caller's,
 * the region keeps a dup. Not handed over to a successor. */
wire_status_t region_register(struct daemon *d, struct conn *owner, int fd,
			      uint64_t offset, uint64_t length,
			      struct region **region_p, char *detail,
			      size_t detail_len);
struct region *region_lookup(struct daemon *d, uint64_t id);
/* Drops the owner's claim; memory goes once in-flight operations are done. */
void region_free(struct region *r);
/* Atomic: a target answer on worker 0 may hold another worker's region.
 * The last reference releases it on the calling worker, self. */
void region_ref(struct region *r);
void region_unref(struct daemon *self, struct region *r);
void region_quarantine_drain_all(struct daemon *d);
/* Copies region bytes (an application's data) to or from anywhere. */
void region_copy(void *dst, const void *src, size_t n);
/* A region an earlier process made (its memfd, id and generation, so its
 * descriptors stay valid), mapped and registered again; an orphan until
 * its owner comes back. Takes memfd on success. */
int region_memfd_map(const char *name, size_t length, void **addr, char *detail,
		     size_t detail_len);
int region_adopt(struct daemon *d, int memfd, uint64_t id, uint64_t generation,
		 uint64_t ro_generation, uint64_t length,
		 struct region **region_p);
/* The orphans among ids whose deadline passed (every one, for now_ms 0)
 * are freed like any region, on self; ids keeps the others, *next_p gets
 * the first of their deadlines (UINT64_MAX: none). Returns how many went. */
size_t region_expire_orphans(struct daemon *self, uint64_t *ids, size_t *n_p,
			     uint64_t now_ms, uint64_t *next_p);
/* Its owner frees it before coming back (RegionFree with the
 * generation, after a take-over or restart cut its free): OK, or
 * ERR_NO_REGION when it is no orphan of c's user with that secret. */
wire_status_t region_free_orphan_of(struct conn *c, uint64_t id,
				    uint64_t generation, char *detail,
				    size_t detail_len);
/* Its owner came back on a new connection (RegionReattach): the orphan
 * joins c's table if generation proves it and c's limits allow. */
wire_status_t region_reattach(struct conn *c, uint64_t id, uint64_t generation,
			      char *detail, size_t detail_len);
struct handover_region;
/* The record of r (handover.c, fdstore.c); a region from rec and its
 * memfd (taken). */
void region_record_make(const struct region *r, struct handover_record *rec);
void region_record_take(const struct handover_record *rec, int memfd,
			struct handover_region *hr);

#endif
