/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rma.Client: the connection, its lock and how completions leave it
 * (client_enter/client_leave), its watch by an event loop, connect and
 * close. The operations that make the other objects are in
 * _rma_client_ops.c, notifications in _rma_notification.c.
 */
#include "_rma.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* A plain mutex, not a PyThread lock: taken twice per operation, and
 * CPython's reads the clock on every acquire, even one that does not
 * wait. Always let go by the thread that took it. */
static pthread_mutex_t *
client_lock_new(void)
{
	pthread_mutex_t *lock = malloc(sizeof(*lock));

	if (lock != NULL && pthread_mutex_init(lock, NULL) != 0) {
		free(lock);
		lock = NULL;
	}
	return lock;
}

static void
client_lock_free(pthread_mutex_t *lock)
{
	pthread_mutex_destroy(lock);
	free(lock);
}

/* Drops the loop and what was made for it (client_watch). */
static void
client_forget_loop(ClientObject *c)
{
	Py_CLEAR(c->loop);
	Py_CLEAR(c->loop_ok);
	Py_CLEAR(c->loop_get_loop);
}

/* A Client made before a fork() is the parent's in the child (see
 * _rma_module.c): the child's copy gets a fresh lock and forgets its loop
 * without telling it. One load and compare per call. */
void
client_fork_adopt(ClientObject *c)
{
	pthread_mutex_t *lock;

	if (c->fork_generation == rma_fork_generation)
		return;
	c->fork_generation = rma_fork_generation;
	/* the old one may be held for good: it is left, not freed */
	lock = client_lock_new();
	if (lock != NULL)
		c->lock = lock;
	c->waiters = 0;
	client_forget_loop(c);
}

/* ---- client lock and completions ---- */

void
client_lock(ClientObject *c)
{
	PyThreadState *ts;

	client_fork_adopt(c);
	if (pthread_mutex_trylock(c->lock) != 0) {
		ts = PyEval_SaveThread();
		pthread_mutex_lock(c->lock);
		PyEval_RestoreThread(ts);
	}
}

/* Frees queued by deallocs and released views, done here because a
 * dealloc must not block on the lock. Called with the lock held. */
void
client_reap_dead(ClientObject *c)
{
	while (c->ndead > 0) {
		rma_region_t *rr = c->dead[--c->ndead];

		if (c->rc != NULL)
			rma_region_free(c->rc, rr);
	}
	while (c->ndead_remotes > 0) {
		rma_remote_t *rr = c->dead_remotes[--c->ndead_remotes];

		if (c->rc != NULL)
			rma_remote_release(c->rc, rr);
	}
}

/* Takes the lock; 0 with an exception set if the client is closed. */
int
client_enter(ClientObject *c)
{
	if (c->closed || c->rc == NULL) {
		error_closed(c->state);
		return 0;
	}
	client_lock(c);
	client_reap_dead(c);
	return 1;
}

/* Lets the lock go, then finishes what completed meanwhile. Keeps a
 * pending exception across the Python callbacks. */
void
client_leave(ClientObject *c)
{
	RequestObject *list = c->done;
	PyObject *et, *ev, *tb, *saved;
	rma_notification_t *nq = NULL;
	size_t nnq = 0;
	int resolve_notify = 0;

	if (c->notify_future != NULL && !c->stashed && c->rc != NULL) {
		c->stashed = rma_notify_next(c->rc, &c->stash);
		resolve_notify = c->stashed != 0;
	}
	if (c->nnq > 0) {
		nq = c->nq;
		nnq = c->nnq;
		c->nq = NULL;
		c->nnq = c->capnq = 0;
	}
	c->done = NULL;
	c->done_tail = &c->done;
	/* librma's handles go while the lock still serializes the client
	 * (a handle outlives a disconnected client, so this is safe then
	 * too) */
	for (RequestObject *r = list; r != NULL; r = r->next_done) {
		rma_request_release(r->req);
		r->req = NULL;
	}
	pthread_mutex_unlock(c->lock);
	if (nq != NULL || resolve_notify)
		notify_dispatch(c, nq, nnq, resolve_notify);
	if (list == NULL)
		return;
	PyErr_Fetch(&et, &ev, &tb);
	Py_INCREF(c);
	saved = rma_leave_running;
	rma_leave_running = PyObject_CallNoArgs(c->state->get_running_loop);
	if (rma_leave_running == NULL)
		PyErr_Clear();
	while (list != NULL) {
		RequestObject *r = list;

		list = r->next_done;
		r->next_done = NULL;
		r->value = r->n_value;
		/* librma is done with the buffer: the callback may reuse it */
		request_release_view(r);
		request_finish(r, r->n_status, r->n_bytes, r->n_detail);
		r->n_detail = NULL;
		c->finishes++;
		/* the reference librma held, as user_data */
		Py_DECREF(r);
	}
	Py_XDECREF(rma_leave_running);
	rma_leave_running = saved;
	if (c->waiters > 0 && c->wake_fd >= 0 &&
	    write(c->wake_fd, &(uint64_t){(uint64_t)c->waiters}, 8) < 0) {
		/* full (2^64 - 2 tokens): waiters are awake already */
	}
	Py_DECREF(c);
	PyErr_Restore(et, ev, tb);
}

void
client_unwatch(ClientObject *c)
{
	PyObject *res;

	client_fork_adopt(c);
	if (c->loop == NULL)
		return;
	res = PyObject_CallMethod(c->loop, "remove_reader", "i", c->fd);
	if (res == NULL)
		PyErr_Clear(); /* a closed loop has forgotten it already */
	Py_XDECREF(res);
	client_forget_loop(c);
}

/* A finished asyncio.Future on @p loop with the result None, which
 * Tasks woken from the reader are handed for a successful await (see
 * waiter_run); NULL if it could not be made (they get the waiter). */
static PyObject *
client_loop_ok(rma_state *st, PyObject *loop)
{
	PyObject *fut, *res;

	fut = PyObject_Vectorcall(st->future_type, &loop, 0, st->kwnames_loop);
	if (fut == NULL) {
		PyErr_Clear();
		return NULL;
	}
	res = PyObject_CallMethodOneArg(fut, st->str_set_result, Py_None);
	if (res == NULL) {
		PyErr_Clear();
		Py_CLEAR(fut);
	}
	Py_XDECREF(res);
	return fut;
}

/* Progress runs in @p loop from now on: the fd is watched there. */
int
client_watch(ClientObject *c, PyObject *loop)
{
	PyObject *cb, *res;

	if (c->loop == loop)
		return 1;
	client_unwatch(c);
	cb = PyObject_GetAttrString((PyObject *)c, "_on_readable");
	if (cb == NULL)
		return 0;
	res = PyObject_CallMethod(loop, "add_reader", "iO", c->fd, cb);
	Py_DECREF(cb);
	if (res == NULL)
		return 0;
	Py_DECREF(res);
	Py_INCREF(loop);
	c->loop = loop;
	c->loop_generation = rma_fork_generation;
	c->loop_ok = client_loop_ok(c->state, loop);
	if (c->loop_ok != NULL && (c->loop_get_loop = PyObject_GetAttrString(
				       c->loop_ok, "get_loop")) == NULL)
		PyErr_Clear();
	return 1;
}

/* The native disconnect, once nothing maps a region any more: requests
 * still in flight complete with DAEMON_GONE. */
void
client_disconnect(ClientObject *c)
{
	if (c->rc == NULL)
		return;
	client_lock(c);
	client_reap_dead(c);
	rma_disconnect(c->rc);
	c->rc = NULL;
	client_leave(c);
}

static int
client_usable(ClientObject *c)
{
	return !c->closed && c->rc != NULL;
}

/* One turn of progress (rma_progress), or with @p poll the ring polled
 * for a while if nothing came (rma_poll; *got_p: whether something
 * came): sends batches, reads, finishes completions. */
static int
client_turn(ClientObject *c, int poll, int *got_p, int *gone_p)
{
	rma_status_t st;
	char detail[512];

	if (!client_enter(c))
		return 0;
	if (poll) {
		/* a spin: other threads may run meanwhile (the completion
		 * callback needs no GIL) */
		Py_BEGIN_ALLOW_THREADS st = rma_poll(c->rc, -1);
		Py_END_ALLOW_THREADS
	} else
		st = rma_progress(c->rc);
	*got_p = st == RMA_OK;
	if (st == RMA_ERR_TIMEOUT)
		st = RMA_OK;
	if (st != RMA_OK && st != RMA_ERR_DAEMON_GONE)
		snprintf(detail, sizeof(detail), "%s", rma_last_error(c->rc));
	client_leave(c);
	if (PyErr_Occurred())
		return 0;
	/* RMA_ERR_INVALID: the parent's client, in a child of fork() */
	if (st != RMA_OK && st != RMA_ERR_DAEMON_GONE) {
		error_raise(c->state, st, detail);
		return 0;
	}
	*gone_p = st == RMA_ERR_DAEMON_GONE;
	if (*gone_p)
		client_unwatch(c);
	return 1;
}

int
client_progress_once(ClientObject *c, int *gone_p)
{
	int got;

	return client_turn(c, 0, &got, gone_p);
}

/* ---- Client ---- */

static int
client_init(ClientObject *c, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"socket", "timeout", NULL};
	PyObject *sock = Py_None, *bytes = NULL;
	double timeout = RMA_CONNECT_TIMEOUT_DEFAULT_MS / 1000.0;
	const char *path = NULL;
	rma_client_t *rc;
	rma_status_t st;
	char detail[512];
	int ms;
	PyThreadState *ts;

	if (c->rc != NULL || c->lock != NULL) {
		PyErr_SetString(PyExc_RuntimeError, "Client initialized twice");
		return -1;
	}
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|Od:Client", kwlist, &sock,
					 &timeout))
		return -1;
	if (sock != Py_None) {
		if (!PyUnicode_FSConverter(sock, &bytes))
			return -1;
		path = PyBytes_AS_STRING(bytes);
	}
	ms = timeout < 0 ? -1 : (int)(timeout * 1000);
	ts = PyEval_SaveThread();
	st = rma_connect_timeout(path, ms, &rc);
	if (st != RMA_OK)
		snprintf(detail, sizeof(detail), "%s", rma_last_error(NULL));
	PyEval_RestoreThread(ts);
	Py_XDECREF(bytes);
	if (st != RMA_OK) {
		error_raise(c->state, st, detail);
		return -1;
	}
	c->lock = client_lock_new();
	if (c->lock == NULL) {
		rma_disconnect(rc);
		PyErr_NoMemory();
		return -1;
	}
	c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE);
	if (c->wake_fd < 0) {
		client_lock_free(c->lock);
		c->lock = NULL;
		rma_disconnect(rc);
		PyErr_SetFromErrno(PyExc_OSError);
		return -1;
	}
	c->rc = rc;
	c->fd = rma_fd(rc);
	c->done_tail = &c->done;
	c->fork_generation = rma_fork_generation;
	return 0;
}

static int
client_traverse(ClientObject *c, visitproc visit, void *arg)
{
	Py_VISIT(Py_TYPE(c));
	Py_VISIT(c->loop);
	Py_VISIT(c->loop_ok);
	Py_VISIT(c->loop_get_loop);
	Py_VISIT(c->notify_cb);
	Py_VISIT(c->notify_future);
	Py_VISIT(c->unget);
	return 0;
}

/* What can close a cycle back to the client (a callback, a loop, a
 * future, handed-back notifications). An unreachable client has no
 * request in flight (librma's reference would reach it), so nothing
 * needs these afterwards but dealloc, which takes them as NULL. */
static int
client_clear(ClientObject *c)
{
	client_forget_loop(c);
	Py_CLEAR(c->notify_cb);
	Py_CLEAR(c->notify_future);
	Py_CLEAR(c->unget);
	return 0;
}

/* Client() before __init__: the state is there from the start, so that
 * every method can raise. */
static PyObject *
client_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	ClientObject *c = (ClientObject *)type->tp_alloc(type, 0);

	if (c != NULL)
		c->state = PyType_GetModuleState(type);
	return (PyObject *)c;
}

static PyObject *
client_close(ClientObject *c, PyObject *unused)
{
	RequestObject *r;

	if (c->closed)
		Py_RETURN_NONE;
	client_unwatch(c);
	c->closed = 1;
	if (c->notify_future != NULL) {
		/* an iteration awaiting the next notification ends (None) */
		PyObject *fut = c->notify_future, *res;

		c->notify_future = NULL;
		res = PyObject_CallMethod(fut, "done", NULL);
		if (res != NULL && res == Py_False) {
			Py_DECREF(res);
			res = PyObject_CallFunctionObjArgs(
			    c->state->resolve_threadsafe, fut, Py_None, Py_None,
			    NULL);
		}
		/* a closed loop: nothing awaits there any more */
		if (res == NULL)
			PyErr_Clear();
		Py_XDECREF(res);
		Py_DECREF(fut);
	}
	if (c->pinned == 0) {
		client_disconnect(c);
		Py_RETURN_NONE;
	}
	/* Views keep the mapping, so the native disconnect waits for the
	 * last one; the requests in flight fail now all the same (librma
	 * still owns its reference to each until then). */
	Py_INCREF(c);
	while ((r = c->live) != NULL)
		request_finish(r, RMA_ERR_DAEMON_GONE, 0,
			       strdup("client closed"));
	Py_DECREF(c);
	if (PyErr_Occurred())
		return NULL;
	Py_RETURN_NONE;
}

static void
client_dealloc(ClientObject *c)
{
	PyTypeObject *tp = Py_TYPE(c);

	PyObject_GC_UnTrack(c);
	if (c->lock != NULL) {
		c->closed = 1;
		/* a dying client is no longer watched */
		client_forget_loop(c);
		if (c->rc != NULL) {
			/* nothing refers to us: no region views, no
			 * requests in flight */
			client_fork_adopt(c);
			pthread_mutex_lock(c->lock);
			client_reap_dead(c);
			rma_disconnect(c->rc);
			c->rc = NULL;
			pthread_mutex_unlock(c->lock);
		}
		client_lock_free(c->lock);
		close(c->wake_fd);
	}
	PyMem_Free(c->dead);
	PyMem_Free(c->dead_remotes);
	free(c->nq);
	Py_CLEAR(c->notify_cb);
	Py_CLEAR(c->notify_future);
	Py_CLEAR(c->regions);
	Py_CLEAR(c->unget);
	tp->tp_free((PyObject *)c);
	Py_DECREF(tp);
}

static PyObject *
client_progress(ClientObject *c, PyObject *unused)
{
	int gone;

	if (!client_progress_once(c, &gone))
		return NULL;
	if (gone)
		return error_raise(c->state, RMA_ERR_DAEMON_GONE,
				   "the daemon closed the connection");
	Py_RETURN_NONE;
}

/* The loop's reader polls the ring (rma_poll) after a wake-up that
 * found at least CLIENT_READER_BURST completions, while each poll brings
 * something, for up to CLIENT_READER_POLL_S: what the completions
 * unblock runs in between, so a dense stream is taken as it comes
 * rather than in bursts a wake-up apart (8-byte puts, 256 awaited at a
 * time: about 230 per wake-up, then the process idle for 120-330 us).
 * Fewer say the completions come spaced out, where the spin would be
 * CPU taken from the daemons (1 MiB puts, 16 at a time: about 4 per
 * wake-up, 0.4 ms apart). The loop's other callbacks wait no longer
 * than the bound. */
#define CLIENT_READER_BURST 32
#define CLIENT_READER_POLL_S 0.001

/* The reader again at the loop's next turn (call_soon): the loop does
 * not sleep while it has a callback ready. */
static int
client_read_soon(ClientObject *c)
{
	PyObject *cb, *res;

	if (c->loop == NULL)
		return 1;
	cb = PyObject_GetAttrString((PyObject *)c, "_on_readable");
	if (cb == NULL)
		return 0;
	res = PyObject_CallMethodOneArg(c->loop, c->state->str_call_soon, cb);
	Py_DECREF(cb);
	Py_XDECREF(res);
	return res != NULL;
}

/* The loop's reader: progress, then the ring polled as above; and stop
 * watching a dead connection (its fd would stay readable forever). */
static PyObject *
client_on_readable(ClientObject *c, PyObject *unused)
{
	int gone = 0, got = 1, ok, saved = waiter_direct_ok;
	unsigned long before = c->finishes;
	double end;

	if (c->closed || c->rc == NULL) {
		client_unwatch(c);
		Py_RETURN_NONE;
	}
	/* the loop runs this reader as a Handle: no Task is running */
	waiter_direct_ok = 1;
	ok = client_turn(c, 0, &got, &gone);
	end = mono_now() + CLIENT_READER_POLL_S;
	if (ok && c->finishes - before >= CLIENT_READER_BURST) {
		while (ok && !gone && got && client_usable(c) &&
		       c->live != NULL && mono_now() < end) {
			before = c->finishes;
			ok = client_turn(c, 1, &got, &gone);
		}
	}
	/* What the last turn's completions unblocked submitted joined
	 * librma's batch, sent at its next call: before the loop sleeps,
	 * or those operations wait for the next wake-up, out of the window
	 * (rmactl's rma_wait sends them before it sleeps), or for ever if
	 * all else in flight waits on a stopped peer. Until a turn finishes
	 * nothing, so submits nothing. Past the bound, the reader comes
	 * back after the loop's other callbacks, before it sleeps. */
	while (ok && !gone && client_usable(c) && c->finishes != before) {
		if (mono_now() >= end) {
			ok = client_read_soon(c);
			break;
		}
		before = c->finishes;
		ok = client_turn(c, 0, &got, &gone);
	}
	waiter_direct_ok = saved;
	if (!ok)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *
client_fileno(ClientObject *c, PyObject *unused)
{
	if (c->closed || c->rc == NULL)
		return error_closed(c->state);
	return PyLong_FromLong(c->fd);
}

static PyObject *
client_enter_ctx(ClientObject *c, PyObject *unused)
{
	return Py_NewRef(c);
}

static PyObject *
client_exit_ctx(ClientObject *c, PyObject *args)
{
	PyObject *res = client_close(c, NULL);

	Py_XDECREF(res);
	if (res == NULL)
		return NULL;
	Py_RETURN_FALSE;
}

static PyObject *
client_get_daemon_id(ClientObject *c, void *unused)
{
	if (c->rc == NULL || c->closed)
		Py_RETURN_NONE;
	return PyUnicode_FromString(rma_daemon_id(c->rc));
}

static PyObject *
client_get_reattaches(ClientObject *c, void *unused)
{
	if (c->rc == NULL)
		return PyLong_FromLong(0);
	return PyLong_FromUnsignedLongLong(rma_reattach_count(c->rc));
}

static PyObject *
client_get_in_flight(ClientObject *c, void *unused)
{
	Py_ssize_t n = 0;

	for (RequestObject *r = c->live; r != NULL; r = r->next_live)
		n++;
	return PyLong_FromSsize_t(n);
}

static PyObject *
client_get_closed(ClientObject *c, void *unused)
{
	return PyBool_FromLong(c->closed || c->rc == NULL);
}

static PyMethodDef client_methods[] = {
    {"close", (PyCFunction)client_close, METH_NOARGS,
     "close($self, /)\n--\n\nClose the connection. Requests in flight fail "
     "with rma.DaemonGone; later calls on the client or on its regions "
     "and remotes raise rma.ClientClosed. "
     "Memory that buffer views still use stays mapped until the last view "
     "is released."},
    {"alloc", (PyCFunction)client_alloc, METH_VARARGS,
     "alloc($self, size, /)\n--\n\nAllocate a zeroed region shared with the "
     "daemon."},
    {"register", (PyCFunction)client_register, METH_VARARGS,
     "register($self, fd, offset=0, length=None, /)\n--\n\nMake memory "
     "the application already shares a region: length bytes (default: "
     "the rest of the file) from offset of the memory file fd (an int or "
     "an object with fileno()), which the daemon maps too. fd must be a "
     "memfd (os.memfd_create(name, os.MFD_ALLOW_SEALING)) sealed with "
     "fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK) and open "
     "read-write; offset a multiple of the page size. Anything else "
     "raises rma.InvalidArgument (a read-only fd rma.Permission, a range "
     "past the file's end rma.OutOfBounds) with what to do. A buffer "
     "such as mmap.mmap raises TypeError: Python does not tell which "
     "file it maps; pass its fd. fd may be closed once this returns. "
     "The region does not survive a take-over or restart of the "
     "daemon (see rma_region_register_fd in rma.h)."},
    {"peer", (PyCFunction)client_peer, METH_VARARGS,
     "peer($self, address, /)\n--\n\nConnect the daemon to the rmad at "
     "'host:port' (blocks, GIL released)."},
    {"import_remote", (PyCFunction)client_import_remote, METH_VARARGS,
     "import_remote($self, peer, descriptor, /)\n--\n\nResolve a "
     "descriptor with its owner through peer. A descriptor of another "
     "daemon than peer raises rma.BadDescriptor ('wrong peer', naming "
     "the owner's address when the daemon knows it); one of a freed "
     "region, or of the daemon that peer was before it restarted, "
     "rma.StaleDescriptor."},
    {"put", (PyCFunction)(void (*)(void))client_put,
     METH_FASTCALL | METH_KEYWORDS,
     "put($self, /, *args, **kwargs)\n--\n\n"
     "put(region, offset, remote, remote_offset, length, "
     "callback=None, user_data=None, *, remote_completion=False, "
     "notify=None)\nput(buffer, remote, remote_offset, callback=None, "
     "user_data=None, *, remote_completion=False)\n\nStart a put of "
     "length bytes at offset of region to remote_offset of remote; or of "
     "all of buffer, any C-contiguous object with the buffer protocol "
     "(bytes, bytearray, memoryview, array, numpy array, mmap; a Region "
     "is put whole, with no copy), through librma's staging area "
     "(rma_put_buf): up to 64 KiB is copied before put() returns, so the "
     "buffer may be changed at once; a bigger one is read until the "
     "request completes, and held (a bytearray cannot be resized) until "
     "then. callback(request, status, "
     "user_data) runs exactly once, where progress runs. Errors found "
     "before submission raise; errors found by the daemon arrive as the "
     "request's status. remote_completion: complete only once the bytes "
     "are in the remote region (not merely sent). notify: an int (0 to "
     "2**64 - 1); the region's owning client is told (offset, length, "
     "notify, this daemon's id) as an rma.Notification once the bytes "
     "are there. A put after close() raises rma.ClientClosed. "
     "Cancelling an await of it (asyncio.wait_for() timing out, "
     "task.cancel()) cancels the await only: the operation carries on "
     "and completes as it would have (the bytes land); "
     "request.cancel() is what asks to take it back."},
    {"get", (PyCFunction)(void (*)(void))client_get,
     METH_FASTCALL | METH_KEYWORDS,
     "get($self, /, *args, **kwargs)\n--\n\n"
     "get(region, offset, remote, remote_offset, length, "
     "callback=None, user_data=None)\nget(buffer, remote, remote_offset, "
     "callback=None, user_data=None)\n\nStart a get of length bytes "
     "at remote_offset of remote into offset of region, as put() (no "
     "notify); or of len(buffer) bytes into buffer, any writable "
     "C-contiguous object with the buffer protocol (bytearray, a "
     "memoryview slice, numpy array, mmap), through librma's staging "
     "area (rma_get_buf): the buffer is written until the request "
     "completes and held until then. A failed get leaves each piece of "
     "it (64 KiB to 1 MiB) either with the remote bytes or as it was."},
    {"atomic", (PyCFunction)(void (*)(void))client_atomic,
     METH_VARARGS | METH_KEYWORDS,
     "atomic($self, /, remote, offset, op, value, compare=None, width=64, "
     "callback=None, user_data=None)\n--\n\nStart an atomic "
     "operation on the naturally aligned width-bit word (32 or 64) at "
     "offset of remote, applied by its owner with the CPU's atomics. op: "
     "'add', 'fetch-add', 'swap', 'cswap' (needs compare), 'and', 'or', "
     "'xor', 'fetch-and', 'fetch-or', 'fetch-xor' (add and fetch-add do "
     "the same; every op returns the old value). Awaiting the request (or "
     "request.value once done) gives the word's old value; for cswap it "
     "equals compare when the swap happened. value and compare are ints "
     "from -2**63 to 2**64 - 1, a negative one taken as its two's "
     "complement (add -1 subtracts 1); others raise OverflowError. A "
     "misaligned offset fails with rma.InvalidArgument, a word "
     "outside the region with rma.OutOfBounds, one reached through a "
     "read-only descriptor with rma.Permission."},
    {"putv", (PyCFunction)(void (*)(void))client_putv,
     METH_VARARGS | METH_KEYWORDS,
     "putv($self, /, region, remote, pieces, callback=None, "
     "user_data=None, *, remote_completion=False)\n--\n\nA vectored "
     "put: pieces is a "
     "list of (offset, remote_offset, length) (1 to 1024), sent as one "
     "request with one completion; it fails with the first piece's "
     "failure, and request.bytes counts the pieces that worked."},
    {"getv", (PyCFunction)(void (*)(void))client_getv,
     METH_VARARGS | METH_KEYWORDS,
     "getv($self, /, region, remote, pieces, callback=None, "
     "user_data=None)\n--\n\nA vectored get into region, as putv()."},
    {"flush", (PyCFunction)(void (*)(void))client_flush,
     METH_VARARGS | METH_KEYWORDS,
     "flush($self, /, peer=None, callback=None, user_data=None)\n--\n\n"
     "Complete when everything issued before to peer (every peer if None) "
     "has completed."},
    {"progress", (PyCFunction)client_progress, METH_NOARGS,
     "progress($self, /)\n--\n\nSend batches and handle what the daemon sent, "
     "without blocking; runs callbacks. Raises rma.DaemonGone once the "
     "daemon is gone."},
    {"fileno", (PyCFunction)client_fileno, METH_NOARGS,
     "fileno($self, /)\n--\n\nThe fd to poll for readability (then call "
     "progress())."},
    {"_on_readable", (PyCFunction)client_on_readable, METH_NOARGS, NULL},
    {"on_notification", (PyCFunction)client_on_notification, METH_O,
     "on_notification($self, callback, /)\n--\n\nRun callback(notification) "
     "for each "
     "notification as it arrives, where progress runs (exceptions are "
     "reported as request callbacks' are); None goes back to queuing them "
     "for notifications()."},
    {"notifications", (PyCFunction)client_notifications, METH_NOARGS,
     "notifications($self, /)\n--\n\nAn async iterator of rma.Notification: "
     "the queued "
     "notifications, in arrival order, then each as it arrives (driven by "
     "the loop's reader of this client)."},
    {"_notify_next", (PyCFunction)client_notify_next, METH_NOARGS, NULL},
    {"_notify_wait", (PyCFunction)client_notify_wait, METH_NOARGS, NULL},
    {"_notify_unget", (PyCFunction)client_notify_unget, METH_O, NULL},
    {"__enter__", (PyCFunction)client_enter_ctx, METH_NOARGS,
     "__enter__($self, /)\n--\n\nThe client itself."},
    {"__exit__", (PyCFunction)client_exit_ctx, METH_VARARGS,
     "__exit__($self, *exc)\n--\n\nclose(); exceptions propagate."},
    {NULL}};

static PyGetSetDef client_getset[] = {
    {"daemon_id", (getter)client_get_daemon_id, NULL,
     "Identity of the connected daemon (None once closed).", NULL},
    {"in_flight", (getter)client_get_in_flight, NULL,
     "Requests submitted and not yet completed.", NULL},
    {"reattaches", (getter)client_get_reattaches, NULL,
     "Times the client got back to its daemon after a take-over or a "
     "restart (awaits, readers and notifications() carry on by "
     "themselves).",
     NULL},
    {"closed", (getter)client_get_closed, NULL, "True once closed.", NULL},
    {NULL}};

static PyType_Slot client_slots[] = {
    {Py_tp_doc,
     "Client(socket=None, timeout=5.0)\n--\n\nA connection to the "
     "host's rmad (socket None: the same resolution as librma's "
     "rma_default_socket()). A context manager.\n\n"
     "Offsets, lengths, sizes and notification values are ints from "
     "0 to 2**64 - 1; others (negative ones included) raise "
     "OverflowError before anything is sent.\n\n"
     "A Client belongs to the process that made it. In a child of "
     "os.fork(), every call on a Client made before the fork (put, "
     "get, atomic, putv, getv, flush, alloc, peer, import_remote, "
     "progress, request.wait(), region.free(), notifications) raises "
     "rma.InvalidArgument ('this client belongs to the parent "
     "process') and touches nothing of the parent's connection, ring "
     "or event loop: the parent's requests complete in the parent. "
     "close() in the child releases only the child's copy; its "
     "requests fail there with InvalidArgument. Connect a new Client "
     "in the child."},
    {Py_tp_new, client_new},
    {Py_tp_init, client_init},
    {Py_tp_dealloc, client_dealloc},
    {Py_tp_traverse, client_traverse},
    {Py_tp_clear, client_clear},
    {Py_tp_methods, client_methods},
    {Py_tp_getset, client_getset},
    {0, NULL}};

PyType_Spec client_spec = {
    .name = "rma.Client",
    .basicsize = sizeof(ClientObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = client_slots,
};
