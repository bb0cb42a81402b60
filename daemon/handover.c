/* SPDX-License-Identifier: BSD-2-Clause */
/* Hand-over: a new rmad process (rmad --take-over) takes the regions,
 * identity and client socket from the running one, which then exits, so
 * an upgrade keeps every region and every descriptor handed out.
 *
 * The old process listens on "<socket>.takeover" (a SOCK_SEQPACKET Unix
 * socket, mode 0600, same user only). The new one connects and asks;
 * the old one stops making regions, sends a CONFIG message (what it
 * runs on, to a successor that asks: the last configuration that worked,
 * for one whose own is refused, main.c), one HEAD message (identity,
 * counters, the client socket's listening fd), REGIONS messages (records
 * and their memfds, by SCM_RIGHTS), DEADLINES messages (the orphans'
 * deadlines, to a successor that says in its ASK that it takes them:
 * older ones do not, and older predecessors send none) and an END
 * message with the count, then
 * shuts down as on SIGTERM, except that nothing is told to other daemons:
 * the regions live on. The new process waits for the end of the stream
 * (the old one gone, its UCX port free), then starts under the same
 * identity and maps the memfds again. A region whose owner is away is an
 * orphan: remote initiators keep using it; it is freed reattach_timeout
 * after it first became one (the deadline travels with it through later
 * take-overs and restarts) unless its owner comes back.
 *
 * Either side failing before END leaves the old process serving (it only
 * commits once it has sent everything); a new process that dies after END
 * loses the regions, as a crash would.
 *
 * Each side checks the other before it gives or takes anything: the old
 * one serves only a successor of its own uid or root, and the new one
 * takes only from a predecessor of its own uid or root (SO_PEERCRED), in
 * a directory nobody else can write (server_check_dir, unless
 * socket_dir_shared), and maps only memfds sealed as rmad seals its own
 * (region_adopt). Whoever else answered at "<socket>.takeover" would
 * otherwise hand the successor an identity, a client socket and memory
 * it reads and can cut short under a peer's write. */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config_saved.h"
#include "handover_wire.h"

/* How long the new process waits for the old one to finish. */
#define HANDOVER_EXIT_SLACK 5.0

struct handover {
	struct daemon *d;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int listen_fd;
	struct event *accept_ev;
	int successor_fd; /* open until we exit: its end tells we are gone */
	struct event *orphan_ev;
	uint64_t *orphans; /* ids of regions taken over, owner away */
	size_t n_orphans;
};

static int
handover_path(const char *socket_path, char *out, size_t len)
{
	int n = snprintf(out, len, "%s%s", socket_path, HANDOVER_SUFFIX);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static struct handover *
handover_get(struct daemon *d)
{
	if (d->handover == NULL) {
		d->handover = calloc(1, sizeof(*d->handover));
		if (d->handover == NULL)
			return NULL;
		d->handover->d = d;
		d->handover->listen_fd = -1;
		d->handover->successor_fd = -1;
	}
	return d->handover;
}

/* One message with up to HANDOVER_CHUNK fds. */
static int
handover_send(int fd, const struct handover_msg *m, const void *body,
	      size_t body_len, const int *fds, size_t n_fds)
{
	if (handover_wire_send(fd, m, body, body_len, fds, n_fds) < 0) {
		log_error("handover_send: sendmsg: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* One record per region: what the hand-over sends and what fdstore.c
 * keeps in its state record, so both rebuild a region the same way. */
/* ---- old side -------------------------------------------------------- */

struct handover_snapshot {
	struct handover_record *recs;
	uint64_t *until; /* orphan deadlines, 0 for owned regions */
	int *fds;
	size_t n;
};

static void
handover_snapshot_free(struct handover_snapshot *s)
{
	for (size_t i = 0; i < s->n; i++)
		close(s->fds[i]);
	free(s->recs);
	free(s->until);
	free(s->fds);
}

/* CLOCK_BOOTTIME in ms: an orphan's deadline crosses processes, within
 * one boot (the memfds do not outlive it), and a clock set forward or
 * back by hand or NTP moves no deadline. */
static uint64_t
handover_boottime_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* For an older successor, which reads deadlines on the wall clock: the
 * same time left, or it would take boot-time deadlines as long past and
 * free every orphan at once. */
static void
handover_deadlines_to_wall_clock(struct handover_snapshot *s)
{
	uint64_t boot = handover_boottime_ms(), wall;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	wall = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	for (size_t i = 0; i < s->n; i++)
		if (s->until[i] != 0)
			s->until[i] =
			    wall +
			    (s->until[i] > boot ? s->until[i] - boot : 0);
}

/* Every live region, the world stopped; from here on none is made and
 * none is announced freed (the owners' closing frees only our mapping). */
static int
handover_take_snapshot(struct daemon *d, struct handover_snapshot *s)
{
	struct world *w = d->world;
	struct region *r;
	size_t pos = 0, cap;
	int rc = 0;

	world_stop(d);
	__atomic_store_n(&w->handed_over, true, __ATOMIC_RELEASE);
	for (uint32_t i = 0; i < w->n; i++)
		w->workers[i]->regions_kept = true;
	cap = w->regions.count;
	s->n = 0;
	s->recs = calloc(cap ? cap : 1, sizeof(*s->recs));
	s->until = calloc(cap ? cap : 1, sizeof(*s->until));
	s->fds = calloc(cap ? cap : 1, sizeof(*s->fds));
	if (s->recs == NULL || s->until == NULL || s->fds == NULL) {
		rc = -1;
		goto out;
	}
	while (idmap_next(&w->regions, &pos, (void **)&r) && s->n < cap) {
		struct handover_record *rec = &s->recs[s->n];
		int fd;

		/* a client's own file: its seals and size are the client's
		 * to choose, a successor could not adopt it (region_fd.c) */
		if (r->registered)
			continue;
		fd = fcntl(r->memfd, F_DUPFD_CLOEXEC, 3);
		if (fd < 0) {
			rc = -1;
			break;
		}
		region_record_make(r, rec);
		s->until[s->n] = r->orphan ? r->orphan_until_ms : 0;
		s->fds[s->n++] = fd;
	}
out:
	world_resume(d);
	return rc;
}

/* What we run on: the last configuration that worked, for a successor
 * whose own is refused (main.c). */
static int
handover_give_config(struct daemon *d, int fd)
{
	struct handover_msg m = {HANDOVER_MAGIC, HANDOVER_VERSION,
				 HANDOVER_CONFIG, 1};
	struct config_saved c = {0};
	struct config running;
	int rc;

	world_config_running(d->world, &running);
	if (config_saved_encode(&running, &c) < 0)
		return -1;
	rc = handover_send(fd, &m, c.blob, c.len, NULL, 0);
	config_saved_free(&c);
	return rc;
}

static int
handover_give(struct handover *h, int fd, uint32_t takes)
{
	struct daemon *d = h->d;
	struct world *w = d->world;
	struct handover_msg m = {HANDOVER_MAGIC, HANDOVER_VERSION,
				 HANDOVER_HEAD, 1};
	struct handover_head head = {0};
	struct handover_snapshot s = {0};
	int lfd = -1;

	if (handover_take_snapshot(d, &s) < 0) {
		log_error("handover_give: cannot list the regions");
		goto err;
	}
	memcpy(head.id, d->id, sizeof(head.id));
	head.next_region_id = w->next_region_id;
	head.next_epoch = __atomic_load_n(&w->next_epoch, __ATOMIC_RELAXED);
	head.restarts = w->restarts;
	if (d->listen_fd >= 0)
		lfd = fcntl(d->listen_fd, F_DUPFD_CLOEXEC, 3);
	head.has_listen_fd = lfd >= 0;
	if ((takes & HANDOVER_TAKES_CONFIG) && handover_give_config(d, fd) < 0)
		goto err;
	if (handover_send(fd, &m, &head, sizeof(head), &lfd, lfd >= 0) < 0)
		goto err;
	for (size_t i = 0; i < s.n; i += HANDOVER_CHUNK) {
		size_t k = s.n - i < HANDOVER_CHUNK ? s.n - i : HANDOVER_CHUNK;

		m.kind = HANDOVER_REGIONS;
		m.count = (uint32_t)k;
		if (handover_send(fd, &m, &s.recs[i], k * sizeof(s.recs[0]),
				  &s.fds[i], k) < 0)
			goto err;
	}
	/* A successor that does not take them restarts every orphan's
	 * deadline, as before deadlines travelled; one from before boot-time
	 * deadlines reads them on the wall clock. */
	if ((takes & HANDOVER_TAKES_DEADLINES) &&
	    !(takes & HANDOVER_TAKES_BOOTTIME))
		handover_deadlines_to_wall_clock(&s);
	for (size_t i = 0; (takes & HANDOVER_TAKES_DEADLINES) && i < s.n;
	     i += HANDOVER_CHUNK) {
		size_t k = s.n - i < HANDOVER_CHUNK ? s.n - i : HANDOVER_CHUNK;

		m.kind = HANDOVER_DEADLINES;
		m.count = (uint32_t)k;
		if (handover_send(fd, &m, &s.until[i], k * sizeof(s.until[0]),
				  NULL, 0) < 0)
			goto err;
	}
	m.kind = HANDOVER_END;
	m.count = (uint32_t)s.n;
	if (handover_send(fd, &m, NULL, 0, NULL, 0) < 0)
		goto err;
	/* Committed: the successor serves the socket (and its path). */
	d->listen_inherited = true;
	server_stop(d);
	if (lfd >= 0)
		close(lfd);
	log_info("handover_give: %zu regions handed over, exiting", s.n);
	handover_snapshot_free(&s);
	world_shutdown(d);
	return 0;

err:
	/* Not committed: we keep serving, and may hand over later. */
	if (lfd >= 0)
		close(lfd);
	handover_snapshot_free(&s);
	world_stop(d);
	__atomic_store_n(&w->handed_over, false, __ATOMIC_RELEASE);
	for (uint32_t i = 0; i < w->n; i++)
		w->workers[i]->regions_kept = false;
	world_resume(d);
	return -1;
}

static void
handover_on_accept(evutil_socket_t lfd, short what, void *arg)
{
	struct handover *h = arg;
	struct {
		struct handover_msg m;
		struct handover_ask body; /* absent from older successors */
	} ask = {0};
	struct timeval tv = {1, 0};
	ssize_t n;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd;

	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	if (h->successor_fd >= 0 || h->d->shutting_down)
		goto refuse;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
	    (cred.uid != geteuid() && cred.uid != 0)) {
		log_warn("handover_on_accept: uid %u may not take over",
			 (unsigned)cred.uid);
		goto refuse;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	n = recv(fd, &ask, sizeof(ask), 0);
	if (n < (ssize_t)sizeof(ask.m) || ask.m.magic != HANDOVER_MAGIC ||
	    ask.m.kind != HANDOVER_ASK) {
		log_warn("handover_on_accept: not a take-over request");
		goto refuse;
	}
	if (ask.m.version != HANDOVER_VERSION) {
		log_warn("handover_on_accept: successor speaks hand-over "
			 "version %u, we speak %u: refused",
			 ask.m.version, HANDOVER_VERSION);
		goto refuse;
	}
	if (n < (ssize_t)sizeof(ask))
		ask.body.takes = 0;
	log_info("handover_on_accept: pid %d takes over", (int)cred.pid);
	if (handover_give(h, fd, ask.body.takes) < 0)
		goto refuse;
	h->successor_fd = fd; /* closed by our exit: the successor's cue */
	return;

refuse:
	close(fd);
}

int
handover_start(struct daemon *d)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct handover *h = handover_get(d);
	struct stat st;
	mode_t old_umask;

	if (h == NULL)
		return -1;
	if (handover_path(d->world->learned.socket_path, sa.sun_path,
			  sizeof(sa.sun_path)) < 0) {
		log_warn("handover_start: socket path too long for %s: no "
			 "take-over possible",
			 HANDOVER_SUFFIX);
		return -1;
	}
	/* A dead rmad of ours may have left it; anything else stays. */
	if (lstat(sa.sun_path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid()) {
			log_warn("handover_start: %s is not ours: no "
				 "take-over possible",
				 sa.sun_path);
			return -1;
		}
		unlink(sa.sun_path);
	}
	h->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (h->listen_fd < 0)
		return -1;
	old_umask = umask(0177);
	if (bind(h->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(h->listen_fd, 4) < 0) {
		umask(old_umask);
		log_warn("handover_start: %s: %s", sa.sun_path,
			 strerror(errno));
		close(h->listen_fd);
		h->listen_fd = -1;
		return -1;
	}
	umask(old_umask);
	snprintf(h->path, sizeof(h->path), "%s", sa.sun_path);
	h->accept_ev = event_new(d->base, h->listen_fd, EV_READ | EV_PERSIST,
				 handover_on_accept, h);
	if (h->accept_ev == NULL || event_add(h->accept_ev, NULL) < 0)
		return -1;
	return 0;
}

void
handover_stop(struct daemon *d)
{
	struct handover *h = d->handover;
	uint64_t next;

	if (h == NULL)
		return;
	region_expire_orphans(d, h->orphans, &h->n_orphans, 0, &next);
	free(h->orphans);
	if (h->orphan_ev != NULL)
		event_free(h->orphan_ev);
	if (h->accept_ev != NULL)
		event_free(h->accept_ev);
	if (h->listen_fd >= 0) {
		close(h->listen_fd);
		unlink(h->path);
	}
	/* successor_fd stays open: the process's exit closes it, after
	 * the UCX listener is gone. */
	free(h);
	d->handover = NULL;
}

/* ---- new side -------------------------------------------------------- */

void
handover_state_free(struct handover_state *st)
{
	for (size_t i = 0; i < st->n; i++)
		if (st->regions[i].memfd >= 0)
			close(st->regions[i].memfd);
	free(st->regions);
	free(st->config);
	if (st->listen_fd >= 0)
		close(st->listen_fd);
	memset(st, 0, sizeof(*st));
	st->listen_fd = -1;
}

static int
handover_take_regions(int fd, struct handover_state *st)
{
	static struct handover_record recs[HANDOVER_CHUNK];
	int fds[HANDOVER_CHUNK];
	struct handover_msg m;
	size_t n_fds, n_until = 0;
	ssize_t n;

	for (;;) {
		n = handover_wire_recv(fd, &m, recs, sizeof(recs), fds,
				       HANDOVER_CHUNK, &n_fds);
		if (n < 0 || (n == 0 && m.kind != HANDOVER_END))
			goto bad;
		if (m.kind == HANDOVER_END)
			return m.count == st->n ? 0 : -1;
		if (m.kind == HANDOVER_DEADLINES) {
			const uint64_t *until = (const uint64_t *)recs;

			if (m.count > HANDOVER_CHUNK ||
			    (size_t)n != m.count * sizeof(*until) ||
			    n_fds != 0 || m.count > st->n - n_until)
				goto bad_fds;
			for (size_t i = 0; i < m.count; i++)
				st->regions[n_until++].orphan_until_ms =
				    until[i];
			continue;
		}
		if (m.kind != HANDOVER_REGIONS || m.count > HANDOVER_CHUNK ||
		    (size_t)n != m.count * sizeof(recs[0]) || n_fds != m.count)
			goto bad_fds;
		{
			struct handover_region *grown = realloc(
			    st->regions, (st->n + m.count) * sizeof(*grown));
			if (grown == NULL)
				goto bad_fds;
			st->regions = grown;
		}
		for (size_t i = 0; i < m.count; i++)
			region_record_take(&recs[i], fds[i],
					   &st->regions[st->n++]);
	}
bad_fds:
	for (size_t i = 0; i < n_fds; i++)
		close(fds[i]);
bad:
	log_error("handover_receive: broken hand-over stream");
	return -1;
}

/* The predecessor's configuration, when it sends one (before HEAD): a
 * peek at the next message's header tells. */
static int
handover_take_config(int fd, struct handover_state *st)
{
	struct handover_msg m;
	size_t n_fds;
	ssize_t n;

	if (recv(fd, &m, sizeof(m), MSG_PEEK) != (ssize_t)sizeof(m))
		return -1;
	if (m.kind != HANDOVER_CONFIG)
		return 0; /* from an rmad that sends none */
	st->config = malloc(HANDOVER_CONFIG_MAX);
	if (st->config == NULL)
		return -1;
	n = handover_wire_recv(fd, &m, st->config, HANDOVER_CONFIG_MAX, NULL, 0,
			       &n_fds);
	if (n <= 0) {
		free(st->config);
		st->config = NULL;
		return -1;
	}
	st->config_len = (size_t)n;
	return 0;
}

/* The old process is gone once the stream ends. */
static int
handover_wait_gone(int fd, double seconds)
{
	double deadline = daemon_now() + seconds;
	char c;

	for (;;) {
		struct pollfd p = {fd, POLLIN, 0};
		double left = deadline - daemon_now();
		if (left <= 0)
			return -1;
		if (poll(&p, 1, (int)(left * 1000) + 1) < 0 && errno != EINTR)
			return -1;
		if (p.revents && recv(fd, &c, 1, MSG_DONTWAIT) <= 0 &&
		    errno != EAGAIN)
			return 0;
	}
}

/* The old side checks our uid; we check its, before sending a byte. The
 * credentials are the listener's, taken when it called listen(). */
static int
handover_check_predecessor(int fd, const char *path)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		log_error("handover_check_predecessor: SO_PEERCRED on %s: %s",
			  path, strerror(errno));
		return -1;
	}
	if (cred.uid != geteuid() && cred.uid != 0) {
		log_error(
		    "handover_check_predecessor: %s is served by uid %u "
		    "(pid %d), not by uid %u or root: not an rmad to take "
		    "anything from; nothing taken over",
		    path, (unsigned)cred.uid, (int)cred.pid,
		    (unsigned)geteuid());
		return -1;
	}
	return 0;
}

int
handover_receive(const struct config *cfg, struct handover_state *st)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct handover_msg m = {HANDOVER_MAGIC, HANDOVER_VERSION, HANDOVER_ASK,
				 0};
	struct handover_ask ask = {.takes = HANDOVER_TAKES_DEADLINES |
					    HANDOVER_TAKES_CONFIG |
					    HANDOVER_TAKES_BOOTTIME};
	struct handover_head head;
	struct timeval tv = {5, 0};
	size_t n_fds;
	int fd, lfd = -1;

	memset(st, 0, sizeof(*st));
	st->listen_fd = -1;
	if (handover_path(cfg->socket_path, sa.sun_path, sizeof(sa.sun_path)) <
	    0) {
		log_error("handover_receive: socket path too long");
		return -1;
	}
	/* Where another user can create "<socket>.takeover", whoever
	 * answers there may be them. */
	if (server_check_dir(cfg, sa.sun_path, "taking over") < 0)
		return -1;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		log_error("handover_receive: no rmad to take over at %s: %s",
			  sa.sun_path, strerror(errno));
		goto err_close;
	}
	if (handover_check_predecessor(fd, sa.sun_path) < 0)
		goto err_close;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (handover_send(fd, &m, &ask, sizeof(ask), NULL, 0) < 0)
		goto err_stream;
	if (handover_take_config(fd, st) < 0)
		goto err_stream;
	if (handover_wire_recv(fd, &m, &head, sizeof(head), &lfd, 1, &n_fds) !=
		sizeof(head) ||
	    m.kind != HANDOVER_HEAD) {
		/* a wrong message may carry an fd all the same */
		if (n_fds == 1)
			close(lfd);
		goto err_stream;
	}
	memcpy(st->id, head.id, sizeof(st->id));
	st->next_region_id = head.next_region_id;
	st->next_epoch = head.next_epoch;
	st->restarts = head.restarts;
	st->listen_fd = n_fds == 1 ? lfd : -1;
	if (handover_take_regions(fd, st) < 0)
		goto err_state;
	if (handover_wait_gone(fd, cfg->shutdown_timeout +
				       HANDOVER_EXIT_SLACK) < 0) {
		log_error("handover_receive: the old rmad did not exit");
		goto err_state;
	}
	close(fd);
	log_info("handover_receive: took over %zu regions", st->n);
	return 0;

err_stream:
	log_error("handover_receive: the running rmad refused or broke the "
		  "hand-over");
err_state:
	handover_state_free(st);
err_close:
	close(fd);
	return -1;
}

/* reattach_timeout after the region first became an orphan: a deadline
 * an earlier process set stands, or a crash loop would keep the orphan
 * for ever; at most reattach_timeout from now (a shorter timeout since,
 * or a wall-clock deadline from an older rmad: cut to a full one). */
static uint64_t
handover_orphan_deadline(const struct daemon *d, uint64_t inherited)
{
	uint64_t latest = handover_boottime_ms() +
			  (uint64_t)(d->cfg->reattach_timeout * 1000.0);

	return inherited != 0 && inherited < latest ? inherited : latest;
}

/* The timer, for the first deadline (CLOCK_BOOTTIME ms) of the orphans
 * left. */
static void
handover_orphan_arm(struct handover *h, uint64_t first)
{
	uint64_t now = handover_boottime_ms();
	struct timeval tv;

	if (first == UINT64_MAX || h->orphan_ev == NULL)
		return;
	tv = worker_timeval(first > now ? (double)(first - now) / 1000.0 : 0);
	evtimer_add(h->orphan_ev, &tv);
}

static void
handover_on_orphan_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct handover *h = arg;
	uint64_t next;
	size_t freed;

	freed = region_expire_orphans(h->d, h->orphans, &h->n_orphans,
				      handover_boottime_ms(), &next);
	if (freed > 0)
		log_info("handover_on_orphan_deadline: %zu regions nobody "
			 "came back for freed",
			 freed);
	handover_orphan_arm(h, next);
}

int
handover_restore(struct daemon *d, struct handover_state *st)
{
	struct handover *h = handover_get(d);
	uint64_t now = handover_boottime_ms(), first = UINT64_MAX;
	size_t lost = 0, expired = 0;

	if (h == NULL)
		goto err;
	h->orphans = calloc(st->n ? st->n : 1, sizeof(*h->orphans));
	if (h->orphans == NULL)
		goto err;
	for (size_t i = 0; i < st->n; i++) {
		struct handover_region *hr = &st->regions[i];
		struct region *r;

		/* An orphan whose time ran out in an earlier process (a
		 * crash loop may leave none long enough for its timer):
		 * freed by not taking it; fdstore_attach drops its record. */
		if (hr->orphan_until_ms != 0 && hr->orphan_until_ms <= now) {
			expired++;
			continue;
		}
		if (region_adopt(d, hr->memfd, hr->id, hr->generation,
				 hr->ro_generation, hr->length, &r) < 0) {
			lost++;
			continue;
		}
		hr->memfd = -1; /* the region's now */
		r->orphan_uid = hr->owner_uid;
		r->orphan_pid = hr->owner_pid;
		r->orphan_until_ms =
		    handover_orphan_deadline(d, hr->orphan_until_ms);
		if (r->orphan_until_ms < first)
			first = r->orphan_until_ms;
		h->orphans[h->n_orphans++] = r->id;
	}
	d->world->regions_recovered += h->n_orphans;
	h->orphan_ev = evtimer_new(d->base, handover_on_orphan_deadline, h);
	handover_orphan_arm(h, first);
	if (lost > 0)
		log_error("handover_restore: %zu of %zu regions could not be "
			  "mapped again",
			  lost, st->n);
	if (expired > 0)
		log_info("handover_restore: %zu orphans past their deadline "
			 "freed",
			 expired);
	if (st->listen_fd >= 0) {
		if (server_adopt(d, st->listen_fd) < 0)
			goto err;
		st->listen_fd = -1;
	} else if (server_start(d) != 0) {
		goto err;
	}
	log_info("handover_restore: %zu regions recovered, restart %u of id "
		 "%s",
		 h->n_orphans, d->world->restarts, d->id_hex);
	handover_state_free(st);
	return 0;

err:
	handover_state_free(st);
	return -1;
}
