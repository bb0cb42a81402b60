/* SPDX-License-Identifier: BSD-2-Clause */
/* The fd store: regions survive a crash of rmad under systemd.
 *
 * Each region's memfd goes to systemd's file descriptor store
 * (FDSTORE=1, FDNAME=store-region-<id>) before its client hears of it,
 * and leaves it (FDSTOREREMOVE=1) when freed. A state record, itself a
 * memfd in the store (store-state), mapped shared and written in place,
 * says which of those fds are regions and what they are: the identity
 * (daemon id, next region id, next epoch, restarts), one slot per
 * region holding handover.c's record, then one orphan deadline per slot
 * (so that a crash loop does not keep an orphan). Beside them: the client
 * socket (store-listen, unless rmad.socket holds it) and the last
 * configuration that worked (config_saved.c, store-config-<n>). A killed
 * process loses nothing written to a shared mapping, so no fsync and no
 * file: the next process gets every stored fd back (LISTEN_FDS, named by
 * LISTEN_FDNAMES), rebuilds the table from the live slots, and hands it
 * to handover_restore() as a take-over would.
 *
 * Why every crash point is consistent: a slot goes live (its id written,
 * last) only after its fd is in systemd's hands; it goes dead (0, first)
 * before the fd is removed. So the store may hold an fd without a live
 * slot (a crash between the two steps): it is closed and removed at the
 * next start, and that region was never reported to its client (create)
 * or was reported freed (free). A live slot whose fd is missing should
 * not happen; if it does (the store was full, see fd_store_max), the
 * region is dropped with an error in the log: its descriptors go stale,
 * as after a stop. Region ids and epochs are written to the header
 * before a region is live, so none is reused.
 *
 * What systemd v252 (Debian 12) does, read in systemd-stable v252.31,
 * src/core/{service,unit,job,manager}.c:
 * - service_enter_dead() holds the store (n_keep_fd_store++) while the
 *   service passes through failed/dead into auto-restart: Restart=
 *   restarting it after a crash, SIGKILL or watchdog keeps the store.
 * - The store is released (service_release_resources) only from
 *   unit_may_gc(): the unit inactive or failed *and no job queued*.
 *   systemctl restart is one job across the stop (job.c turns the
 *   finished JOB_RESTART into JOB_START in place), so the store is kept;
 *   systemctl stop, a failure not restarted, or the start limit end with
 *   no job: released. FileDescriptorStorePreserve= only exists from v254.
 * - service_add_fd_store(): past FileDescriptorStoreMax the fd is
 *   closed (-EXFULL, a warning in systemd's log; the sender is not
 *   told); an fd already stored (same_fd) is not stored twice;
 *   FDSTOREREMOVE=1 needs FDNAME= and drops every fd of that name.
 *   Hence the count kept here, and fd_store_max that must not exceed
 *   the unit's. On start, service_collect_fds() passes the sockets
 *   first, then the store, with their names.
 * - manager.c reads the notify socket at priority NORMAL-8, before the
 *   SIGCHLD source (NORMAL-7), "so that we can still identify to which
 *   service an exit message belongs": a message queued before the
 *   process died is read before its death is handled, while it still
 *   is the main PID (NotifyAccess=main,
 *   service_notify_message_authorized). sd_pid_notify_with_fds()
 *   returns once the datagram is queued on systemd's socket, so "sent"
 *   is "stored" for a crash right after it.
 *
 * Threads: slots are reserved under the lock; each slot is then written
 * by the worker of the region's owner only. */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#define FDSTORE_MAGIC 0x524d4153u /* "RMAS" */
#define FDSTORE_VERSION 1u
#define FDSTORE_STATE SDNOTIFY_STORE_PREFIX "state"
#define FDSTORE_LISTEN SDNOTIFY_STORE_PREFIX "listen"
#define FDSTORE_REGION SDNOTIFY_STORE_PREFIX "region-"
/* The state record, the client socket and the last configuration that
 * worked (config_saved.c). */
#define FDSTORE_OWN_FDS 3u

struct fdstore_head {
	uint32_t magic, version;
	uint32_t slots;
	uint32_t restarts;
	uint8_t id[DAEMON_ID_SIZE];
	uint64_t next_region_id;
	uint64_t next_epoch;
	uint32_t recoveries;
	uint32_t pad;
};

struct fdstore_slot {
	uint64_t live; /* the region's id once its fd is stored; 0 = free */
	struct handover_record rec;
};

struct fdstore {
	int state_fd;
	struct fdstore_head *head; /* the shared mapping of state_fd */
	struct fdstore_slot *slot;
	/* after the slots: slot i's orphan deadline (region.orphan_until_ms,
	 * 0 for an owned region). A state an older rmad made ends before
	 * it and is grown (it reads only what it knows; so does an older
	 * rmad this one's). */
	uint64_t *until;
	size_t map_len;
	uint32_t slots;
	uint8_t *used; /* slots this process reserved or holds live */
	uint32_t n_used;
	uint32_t hint; /* where to look for a free slot first */
	uint32_t max;  /* fd_store_max */
	bool recovered;
	bool listen_stored; /* the client socket came back from the store */
	bool frozen;
	pthread_mutex_t lock;
};

/* One message to systemd, with fd (or -1). */
static int
fdstore_send(const char *what, const char *name, int fd)
{
	char msg[128];
	int r;

	snprintf(msg, sizeof(msg), "%s\nFDNAME=%s", what, name);
	r = sd_pid_notify_with_fds(0, 0, msg, fd >= 0 ? &fd : NULL,
				   fd >= 0 ? 1 : 0);
	if (r <= 0) {
		log_warn("fdstore_send: %s %s: %s", what, name,
			 r < 0 ? strerror(-r) : "no NOTIFY_SOCKET");
		return -1;
	}
	return 0;
}

static void
fdstore_region_name(uint64_t id, char *out, size_t len)
{
	snprintf(out, len, FDSTORE_REGION "%" PRIu64, id);
}

static size_t
fdstore_map_len(uint32_t slots)
{
	return sizeof(struct fdstore_head) +
	       (size_t)slots * sizeof(struct fdstore_slot);
}

/* With the deadlines. */
static size_t
fdstore_full_len(uint32_t slots)
{
	return fdstore_map_len(slots) + (size_t)slots * sizeof(uint64_t);
}

static struct fdstore *
fdstore_new(const struct config *cfg)
{
	struct fdstore *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	s->state_fd = -1;
	s->max = cfg->fd_store_max;
	pthread_mutex_init(&s->lock, NULL);
	return s;
}

void
fdstore_destroy(struct fdstore *s)
{
	if (s == NULL)
		return;
	if (s->head != NULL)
		munmap(s->head, s->map_len);
	if (s->state_fd >= 0)
		close(s->state_fd);
	free(s->used);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static int
fdstore_map(struct fdstore *s, int fd, size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED) {
		log_error("fdstore_map: mmap %zu bytes: %s", len,
			  strerror(errno));
		return -1;
	}
	s->head = p;
	s->slot = (struct fdstore_slot *)(s->head + 1);
	s->map_len = len;
	s->state_fd = fd;
	s->slots = s->head->slots;
	s->until = (uint64_t *)(s->slot + s->slots);
	s->used = calloc(s->slots ? s->slots : 1, 1);
	return s->used == NULL ? -1 : 0;
}

/* The state record the previous process left: 0, or -1 (not ours, a
 * version we do not know, or cut short). Takes fd on success. */
static int
fdstore_map_old(struct fdstore *s, int fd)
{
	struct fdstore_head head;
	struct stat st;

	if (fstat(fd, &st) < 0 || (size_t)st.st_size < sizeof(head) ||
	    pread(fd, &head, sizeof(head), 0) != sizeof(head)) {
		log_error("fdstore_open: the stored state is not readable");
		return -1;
	}
	if (head.magic != FDSTORE_MAGIC || head.version != FDSTORE_VERSION ||
	    head.slots == 0 ||
	    (size_t)st.st_size < fdstore_map_len(head.slots)) {
		log_error("fdstore_open: the stored state is not rmad's "
			  "version %u state",
			  FDSTORE_VERSION);
		return -1;
	}
	/* an older rmad's state: room for the deadlines (zero: none yet) */
	if ((size_t)st.st_size < fdstore_full_len(head.slots) &&
	    ftruncate(fd, (off_t)fdstore_full_len(head.slots)) < 0) {
		log_error("fdstore_open: cannot grow the stored state: %s",
			  strerror(errno));
		return -1;
	}
	if (fdstore_map(s, fd, fdstore_full_len(head.slots)) < 0)
		return -1;
	if (s->slots + FDSTORE_OWN_FDS != s->max)
		log_warn("fdstore_open: the stored state has room for %u "
			 "regions, kept until the store is emptied (systemctl "
			 "stop); fd_store_max %u takes effect then",
			 s->slots, s->max);
	return 0;
}

static int
fdstore_map_new(struct fdstore *s)
{
	uint32_t slots = s->max - FDSTORE_OWN_FDS;
	size_t len = fdstore_full_len(slots);
	int fd;

	fd = memfd_create("rmad-state", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)len) < 0) {
		log_error("fdstore_open: state memfd: %s", strerror(errno));
		goto err_close;
	}
	{
		struct fdstore_head head = {.magic = FDSTORE_MAGIC,
					    .version = FDSTORE_VERSION,
					    .slots = slots};
		if (pwrite(fd, &head, sizeof(head), 0) != sizeof(head))
			goto err_close;
	}
	if (fdstore_map(s, fd, len) < 0)
		goto err_close;
	return 0;

err_close:
	if (fd >= 0)
		close(fd);
	return -1;
}

static int
fdstore_find(const struct sdnotify_fds *passed, const char *name)
{
	for (size_t i = 0; i < passed->n; i++)
		if (passed->fds[i] >= 0 && strcmp(passed->names[i], name) == 0)
			return (int)i;
	return -1;
}

/* The live slots become regions for handover_restore(); a live slot
 * without its fd is dropped. */
static int
fdstore_rebuild(struct fdstore *s, struct sdnotify_fds *passed,
		struct handover_state *from)
{
	struct fdstore_head *h = s->head;
	char name[64];

	memcpy(from->id, h->id, sizeof(from->id));
	from->next_region_id = h->next_region_id;
	from->next_epoch = h->next_epoch;
	from->restarts = h->restarts;
	from->regions = calloc(s->slots, sizeof(*from->regions));
	if (from->regions == NULL)
		return -1;
	for (uint32_t i = 0; i < s->slots; i++) {
		uint64_t id = s->slot[i].live;
		int k;

		if (id == 0)
			continue;
		fdstore_region_name(id, name, sizeof(name));
		k = fdstore_find(passed, name);
		if (k < 0 || s->slot[i].rec.id != id) {
			log_error("fdstore_rebuild: region %" PRIu64 " has a "
				  "record but systemd passed no fd for it "
				  "(FileDescriptorStoreMax below "
				  "fd_store_max?): dropped",
				  id);
			s->slot[i].live = 0;
			continue;
		}
		region_record_take(&s->slot[i].rec, passed->fds[k],
				   &from->regions[from->n]);
		from->regions[from->n++].orphan_until_ms = s->until[i];
		passed->fds[k] = -1; /* from's now */
		s->used[i] = 1;
		s->n_used++;
	}
	return 0;
}

int
fdstore_open(const struct config *cfg, struct sdnotify_fds *passed,
	     struct fdstore **store_p, struct handover_state *from)
{
	bool have = getenv("NOTIFY_SOCKET") != NULL;
	bool on = strcmp(cfg->fd_store, "no") != 0 && have && !cfg->take_over;
	const char *limit = getenv("FDSTORE"); /* systemd >= 254 only */
	struct fdstore *s = NULL;
	int k, rc = 0;

	*store_p = NULL;
	if (strcmp(cfg->fd_store, "yes") == 0 && !have) {
		log_error("fdstore_open: fd_store = yes, but NOTIFY_SOCKET is "
			  "not set: not running under systemd");
		return -1;
	}
	if (on && limit != NULL && strtoul(limit, NULL, 10) < cfg->fd_store_max)
		log_warn("fdstore_open: fd_store_max %u is above the unit's "
			 "FileDescriptorStoreMax=%s: regions past it would "
			 "not survive a restart",
			 cfg->fd_store_max, limit);
	if (on) {
		s = fdstore_new(cfg);
		if (s == NULL)
			return -1;
		k = fdstore_find(passed, FDSTORE_STATE);
		if (k >= 0 && fdstore_map_old(s, passed->fds[k]) == 0) {
			passed->fds[k] = -1;
			s->recovered = true;
		}
		if (!s->recovered && fdstore_map_new(s) < 0)
			goto err;
	}
	if (s != NULL && s->recovered) {
		memset(from, 0, sizeof(*from));
		from->listen_fd = -1;
		if (fdstore_rebuild(s, passed, from) < 0)
			goto err;
		log_info("fdstore_open: %zu regions of the previous process "
			 "back from systemd's fd store",
			 from->n);
		k = fdstore_find(passed, FDSTORE_LISTEN);
		if (k >= 0 && passed->activation_fd < 0) {
			from->listen_fd = passed->fds[k];
			passed->fds[k] = -1;
			s->listen_stored = true;
		}
		rc = 1;
	}
	/* What is left is no region of ours any more (a crash between
	 * storing an fd and its record going live, or between its record
	 * going dead and its removal): out of the store. */
	for (size_t i = 0; i < passed->n; i++) {
		if (passed->fds[i] < 0)
			continue;
		log_info("fdstore_open: %s has no live record: closed",
			 passed->names[i]);
		if (have)
			fdstore_send("FDSTOREREMOVE=1", passed->names[i], -1);
		close(passed->fds[i]);
		passed->fds[i] = -1;
	}
	*store_p = s;
	return rc;

err:
	log_error("fdstore_open: cannot set up the fd store");
	fdstore_destroy(s);
	return -1;
}

/* r's orphan deadline (or 0) into its record. */
static void
fdstore_slot_deadline(struct fdstore *s, const struct region *r)
{
	if (r->store_slot < 0)
		return;
	/* one aligned word: a crash sees the old deadline or the new */
	__atomic_store_n(&s->until[r->store_slot],
			 r->orphan ? r->orphan_until_ms : 0, __ATOMIC_RELEASE);
}

int
fdstore_attach(struct daemon *d, struct fdstore *s)
{
	struct world *w = d->world;
	struct fdstore_head *h = s->head;
	char name[64];

	pthread_mutex_lock(&s->lock);
	memcpy(h->id, d->id, sizeof(h->id));
	if (w->next_region_id > h->next_region_id)
		h->next_region_id = w->next_region_id;
	h->next_epoch = __atomic_load_n(&w->next_epoch, __ATOMIC_RELAXED);
	h->restarts = w->restarts;
	if (s->recovered)
		h->recoveries++;
	w->store_recoveries = h->recoveries;
	pthread_mutex_unlock(&s->lock);
	/* With the identity written: a crash from here on comes back as
	 * this daemon. */
	if (!s->recovered &&
	    fdstore_send("FDSTORE=1", FDSTORE_STATE, s->state_fd) < 0) {
		log_error("fdstore_attach: systemd did not take the state "
			  "record: regions would not survive a restart");
		return -1;
	}
	/* Slots of regions that could not be mapped again are free. */
	for (uint32_t i = 0; i < s->slots; i++) {
		struct region *r;

		if (s->slot[i].live == 0)
			continue;
		r = region_lookup(d, s->slot[i].live);
		if (r != NULL) {
			r->store_slot = (int)i;
			/* the deadline it got here, for a crash to keep */
			fdstore_slot_deadline(s, r);
			continue;
		}
		fdstore_region_name(s->slot[i].live, name, sizeof(name));
		__atomic_store_n(&s->slot[i].live, 0, __ATOMIC_RELEASE);
		fdstore_send("FDSTOREREMOVE=1", name, -1);
		s->used[i] = 0;
		s->n_used--;
	}
	/* A socket systemd did not make: kept in the store too, so that
	 * clients queue on it while we restart (rmad.socket does that
	 * itself). Its path outlives us. */
	if (d->listen_fd >= 0 && !d->listen_inherited) {
		if (!s->listen_stored)
			fdstore_send("FDSTORE=1", FDSTORE_LISTEN, d->listen_fd);
		d->listen_inherited = true;
	}
	w->fdstore = s;
	log_info("fdstore_attach: systemd's fd store keeps %u of at most %u "
		 "regions (fd_store_max %u)",
		 s->n_used, s->slots, s->max);
	return 0;
}

wire_status_t
fdstore_reserve(struct daemon *d, int *slot_p, char *detail, size_t detail_len)
{
	struct fdstore *s = d->world->fdstore;
	wire_status_t st = RMA__V1__STATUS__OK;

	*slot_p = -1;
	if (s == NULL)
		return st;
	pthread_mutex_lock(&s->lock);
	if (s->frozen) {
		snprintf(detail, detail_len, "rmad is shutting down");
		st = RMA__V1__STATUS__ERR_SHUTDOWN;
	} else if (s->n_used >= s->slots ||
		   s->n_used + FDSTORE_OWN_FDS >= s->max) {
		/* (a state an older rmad made may have a slot more) */
		snprintf(detail, detail_len,
			 "systemd's fd store holds %u regions (fd_store_max %u "
			 "less %u of rmad's own): another one would not "
			 "survive a restart",
			 s->n_used, s->max, FDSTORE_OWN_FDS);
		st = RMA__V1__STATUS__ERR_LIMIT;
	} else {
		uint32_t i = s->hint;
		while (s->used[i] || s->slot[i].live != 0)
			i = (i + 1) % s->slots;
		s->used[i] = 1;
		s->n_used++;
		s->hint = (i + 1) % s->slots;
		*slot_p = (int)i;
	}
	pthread_mutex_unlock(&s->lock);
	return st;
}

wire_status_t
fdstore_commit(struct daemon *d, struct region *r, char *detail,
	       size_t detail_len)
{
	struct world *w = d->world;
	struct fdstore *s = w->fdstore;
	struct fdstore_slot *slot;
	char name[64];

	if (s == NULL)
		return RMA__V1__STATUS__OK;
	/* Even a region the store does not keep (a client's registered
	 * file) has its id recorded: the next process gives it to no other
	 * region, which its client still holds as lost. */
	pthread_mutex_lock(&s->lock);
	if (r->id + 1 > s->head->next_region_id)
		s->head->next_region_id = r->id + 1;
	s->head->next_epoch = __atomic_load_n(&w->next_epoch, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&s->lock);
	if (r->store_slot < 0)
		return RMA__V1__STATUS__OK;
	slot = &s->slot[r->store_slot];
	region_record_make(r, &slot->rec);
	s->until[r->store_slot] = 0; /* a slot is used again */
	fdstore_region_name(r->id, name, sizeof(name));
	if (fdstore_send("FDSTORE=1", name, r->memfd) < 0) {
		snprintf(detail, detail_len,
			 "systemd's fd store did not take the region");
		return RMA__V1__STATUS__ERR_INTERNAL;
	}
	/* The fd is systemd's too: from here on the region survives us. */
	__atomic_store_n(&slot->live, r->id, __ATOMIC_RELEASE);
	return RMA__V1__STATUS__OK;
}

void
fdstore_release(struct daemon *d, struct region *r)
{
	struct fdstore *s = d->world->fdstore;
	struct fdstore_slot *slot;
	char name[64];

	if (s == NULL || r->store_slot < 0)
		return;
	if (__atomic_load_n(&s->frozen, __ATOMIC_ACQUIRE))
		return; /* kept for the next start */
	slot = &s->slot[r->store_slot];
	if (r->id != 0 && slot->live == r->id) {
		/* dead first: a crash before the removal leaves an fd that
		 * the next start closes */
		__atomic_store_n(&slot->live, 0, __ATOMIC_RELEASE);
		fdstore_region_name(r->id, name, sizeof(name));
		fdstore_send("FDSTOREREMOVE=1", name, -1);
	}
	pthread_mutex_lock(&s->lock);
	s->used[r->store_slot] = 0;
	s->n_used--;
	pthread_mutex_unlock(&s->lock);
	r->store_slot = -1;
}

void
fdstore_freeze(struct daemon *d)
{
	struct world *w = d->world;
	struct fdstore *s = w->fdstore;

	if (s == NULL)
		return;
	world_stop(d);
	__atomic_store_n(&s->frozen, true, __ATOMIC_RELEASE);
	/* the regions live on in the next process: peers keep them */
	for (uint32_t i = 0; i < w->n; i++)
		w->workers[i]->regions_kept = true;
	world_resume(d);
	log_info("fdstore_freeze: %u regions stay in systemd's fd store for "
		 "the next start",
		 s->n_used);
}

void
fdstore_orphan_update(struct daemon *d, const struct region *r)
{
	struct fdstore *s = d->world->fdstore;

	if (s != NULL)
		fdstore_slot_deadline(s, r);
}

bool
fdstore_frozen(struct daemon *d)
{
	struct fdstore *s = d->world->fdstore;

	return s != NULL && __atomic_load_n(&s->frozen, __ATOMIC_ACQUIRE);
}

int
fdstore_keep(const char *name, int fd)
{
	return fdstore_send("FDSTORE=1", name, fd);
}

void
fdstore_drop(const char *name)
{
	fdstore_send("FDSTOREREMOVE=1", name, -1);
}

void
fdstore_count(struct daemon *d, uint32_t *stored_p, uint32_t *capacity_p)
{
	struct fdstore *s = d->world->fdstore;

	*stored_p = *capacity_p = 0;
	if (s == NULL)
		return;
	pthread_mutex_lock(&s->lock);
	*stored_p = s->n_used;
	*capacity_p = s->slots;
	pthread_mutex_unlock(&s->lock);
}
