/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rma._rma: the CPython binding of librma (client/rma.h).
 *
 * Threading: a librma client is not thread-safe, so every native call on
 * a client is made holding that client's lock (client_enter/client_leave).
 * Calls that may block (connect, alloc, free, peer connect, import, the
 * poll of a wait) run with the GIL released and the lock held.
 *
 * Completions: librma runs completion callbacks inside its own calls.
 * request_on_complete, the native callback, runs no Python code (it may
 * run without the GIL): it copies the status into the Request and links it
 * on the client's done list. client_leave takes that list while it still
 * holds the lock, lets the lock go, then finishes each request with the
 * GIL (request_finish: the Python callback, then the future). So Python
 * callbacks may call the client again, and never run inside librma.
 *
 * Lifetimes: a submitted Request holds one reference owned by librma
 * (its user_data), dropped when its completion has been handled, so a
 * request outlives the user's references until it completes. Region, Peer,
 * Remote and Request hold their Client. A Region's memory is mapped by
 * librma and unmapped by rma_region_free() and rma_disconnect(), so while
 * buffer views on a region exist (exports), its native free and the
 * client's disconnect are deferred until the last view is released.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <structmember.h>

#include "rma.h"

typedef struct pyrequest RequestObject;
typedef struct waiter WaiterObject;

typedef struct {
	PyObject_HEAD rma_client_t *rc; /* NULL once disconnected */
	PyThread_type_lock lock;
	int closed;	   /* close() ran: the Python API refuses calls */
	Py_ssize_t pinned; /* buffer views on this client's regions */
	int fd;
	/* Threads in Request.wait() poll fd without the lock; one of them may
	 * read the completion another waits for. wake_fd (an eventfd
	 * semaphore) then gets one token per waiter, so none sleeps on an
	 * fd that will not turn readable for it. */
	int wake_fd;
	int waiters;
	PyObject *loop;	     /* event loop watching fd, or NULL */
	RequestObject *done; /* completed natively, not yet finished */
	RequestObject **done_tail;
	RequestObject *live; /* submitted, not finished (doubly linked) */
	rma_region_t **dead; /* native frees deferred to the next call */
	size_t ndead, capdead;
	rma_remote_t **dead_remotes; /* releases deferred likewise */
	size_t ndead_remotes, capdead_remotes;
	/* Notifications. With on_notification(cb) librma hands them to
	 * notify_on_native, which (no Python there) queues them in nq;
	 * client_leave runs cb on each once the lock is let go. Without a
	 * callback they stay queued in librma (so its bound on unconsumed
	 * ones holds) until notifications() takes them: while its iterator
	 * awaits notify_future, client_leave takes the next one into
	 * stash (stashed: 1, or a negative status) and resolves it. */
	PyObject *notify_cb;
	rma_notification_t *nq;
	size_t nnq, capnq;
	PyObject *notify_future;
	rma_notification_t stash;
	int stashed;
	PyObject *regions; /* address of rma_region_t -> weakref to Region */
	PyObject *unget;   /* list of Notifications handed back, or NULL */
	unsigned fork_generation; /* fork_generation when connected */
} ClientObject;

typedef struct {
	PyObject_HEAD ClientObject *client;
	rma_region_t *rr; /* NULL once freed natively (or queued) */
	void *ptr;
	Py_ssize_t length;
	Py_ssize_t exports;
	int free_pending; /* free() ran while views existed */
	PyObject *weakrefs;
} RegionObject;

typedef struct {
	PyObject_HEAD ClientObject *client;
	rma_peer_t *rp;
	PyObject *address;
} PeerObject;

typedef struct {
	PyObject_HEAD ClientObject *client;
	PeerObject *peer;
	rma_remote_t *rr; /* NULL once released */
} RemoteObject;

struct pyrequest {
	PyObject_HEAD ClientObject *client;
	PyObject *callback, *user_data, *future;
	WaiterObject *waiter; /* of the await in progress, until resolved */
	PyObject *loop;	      /* the future's */
	rma_request_t *req;   /* librma's, until its completion is handled */
	int finished;	      /* request_finish ran */
	int is_atomic;	      /* the result is the word's old value */
	int status;	      /* RMA_INPROGRESS until finished */
	unsigned long long bytes, value;
	char *detail; /* malloc'd, NULL for "" */
	/* written by request_on_complete, read by request_finish */
	int n_status;
	unsigned long long n_bytes, n_value;
	char *n_detail;
	RequestObject *next_done;
	RequestObject *prev_live, *next_live;
	PyObject *weakrefs;
};

static PyTypeObject ClientType, RegionType, PeerType, RemoteType, RequestType;

/* rma.errors._make, asyncio._get_running_loop, rma._resolve_threadsafe,
 * asyncio.InvalidStateError */
static PyObject *errors_make, *errors_closed, *get_running_loop,
    *resolve_threadsafe, *invalid_state;
static PyObject *str_set_result, *str_set_exception, *str_create_future,
    *str_await;
/* The await path, per operation, without Python-level calls where asyncio
 * has C ones: asyncio.Future (the C _asyncio.Future), its set_result
 * descriptor, BaseEventLoop.create_future (a loop whose type still has it
 * gets Future(loop=loop) directly), ("loop",) as kwnames. */
static PyObject *future_type, *future_set_result, *stock_create_future,
    *kwnames_loop;
/* The last loop type asked about, and whether its create_future is the
 * stock one. */
static PyObject *loop_type_seen;
static int loop_type_stock;

/* The running loop of this thread while client_leave finishes requests,
 * asked once per batch of completions rather than once per request. */
static __thread PyObject *leave_running;

static PyObject *
running_loop(void)
{
	if (leave_running != NULL)
		return Py_NewRef(leave_running);
	return PyObject_CallNoArgs(get_running_loop);
}

/* ---- errors ---- */

/* Symbolic names, indexed by the negated status (rma.h's enum). */
static const char *const status_names[] = {
    "OK",
    "ERR_INVALID",
    "ERR_PROTOCOL",
    "ERR_VERSION",
    "ERR_UNKNOWN_REQUEST",
    "ERR_NO_MEMORY",
    "ERR_NO_REGION",
    "ERR_OUT_OF_BOUNDS",
    "ERR_BAD_DESCRIPTOR",
    "ERR_STALE_DESCRIPTOR",
    "ERR_NO_PEER",
    "ERR_UNREACHABLE",
    "ERR_REJECTED",
    "ERR_CONNECTION_RESET",
    "ERR_TIMEOUT",
    "ERR_CANCELED",
    "ERR_NOT_RMAD",
    "ERR_SHUTDOWN",
    "ERR_LIMIT",
    "ERR_PERMISSION",
    "ERR_TRANSPORT",
    "ERR_DAEMON_GONE",
    "ERR_INTERNAL",
    "ERR_RESTARTED",
};

static const char *
status_name(int status)
{
	if (status == RMA_INPROGRESS)
		return "INPROGRESS";
	if (status > 0 ||
	    -status >= (int)(sizeof(status_names) / sizeof(status_names[0])))
		return "UNKNOWN";
	return status_names[-status];
}

static PyObject *
error_new(int status, const char *detail)
{
	return PyObject_CallFunction(
	    errors_make, "isss", status, status_name(status),
	    rma_strerror((rma_status_t)status), detail ? detail : "");
}

static PyObject *
error_raise(int status, const char *detail)
{
	PyObject *exc = error_new(status, detail);

	if (exc != NULL) {
		PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
		Py_DECREF(exc);
	}
	return NULL;
}

/* rma.ClientClosed: a call on a Client after its close(), or on what it
 * made; no librma status stands for it (the handle is gone). */
static PyObject *
error_closed(void)
{
	PyErr_SetString(errors_closed, "rma client is closed");
	return NULL;
}

/* ---- fork() ----
 *
 * A Client made before a fork() is the parent's in the child: librma
 * fails every call on it with RMA_ERR_INVALID ("this client belongs to
 * the parent process"), raised as rma.InvalidArgument, and close() there
 * releases only the child's copy. What is the binding's own needs the
 * same care: the lock may be held by a parent's thread that the child
 * does not have, and the loop's selector (epoll) is shared with the
 * parent's loop, so remove_reader would stop the parent's watch. The
 * child's copy gets a fresh lock and forgets its loop without telling it
 * (client_fork_adopt). Told as librma is, by a pthread_atfork() child
 * handler: one load and compare per call. */

static unsigned fork_generation;

static void
fork_child(void)
{
	fork_generation++;
}

static void
client_fork_adopt(ClientObject *c)
{
	PyThread_type_lock lock;

	if (c->fork_generation == fork_generation)
		return;
	c->fork_generation = fork_generation;
	/* the old one may be held for good: it is left, not freed */
	lock = PyThread_allocate_lock();
	if (lock != NULL)
		c->lock = lock;
	c->waiters = 0;
	Py_CLEAR(c->loop);
}

/* ---- client lock and completions ---- */

static void
client_lock(ClientObject *c)
{
	PyThreadState *ts;

	client_fork_adopt(c);
	if (!PyThread_acquire_lock(c->lock, NOWAIT_LOCK)) {
		ts = PyEval_SaveThread();
		PyThread_acquire_lock(c->lock, WAIT_LOCK);
		PyEval_RestoreThread(ts);
	}
}

/* Frees queued by deallocs and released views, done here because a
 * dealloc must not block on the lock. Called with the lock held. */
static void
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
static int
client_enter(ClientObject *c)
{
	if (c->closed || c->rc == NULL) {
		error_closed();
		return 0;
	}
	client_lock(c);
	client_reap_dead(c);
	return 1;
}

static void request_finish(RequestObject *r, int status,
			   unsigned long long bytes, char *detail);
static void notify_dispatch(ClientObject *c, rma_notification_t *nq, size_t nnq,
			    int resolve);

/* Lets the lock go, then finishes what completed meanwhile. Keeps a
 * pending exception across the Python callbacks. */
static void
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
	PyThread_release_lock(c->lock);
	if (nq != NULL || resolve_notify)
		notify_dispatch(c, nq, nnq, resolve_notify);
	if (list == NULL)
		return;
	PyErr_Fetch(&et, &ev, &tb);
	Py_INCREF(c);
	saved = leave_running;
	leave_running = PyObject_CallNoArgs(get_running_loop);
	if (leave_running == NULL)
		PyErr_Clear();
	while (list != NULL) {
		RequestObject *r = list;

		list = r->next_done;
		r->next_done = NULL;
		r->value = r->n_value;
		request_finish(r, r->n_status, r->n_bytes, r->n_detail);
		r->n_detail = NULL;
		/* the reference librma held, as user_data */
		Py_DECREF(r);
	}
	Py_XDECREF(leave_running);
	leave_running = saved;
	if (c->waiters > 0 && c->wake_fd >= 0 &&
	    write(c->wake_fd, &(uint64_t){(uint64_t)c->waiters}, 8) < 0) {
		/* full (2^64 - 2 tokens): waiters are awake already */
	}
	Py_DECREF(c);
	PyErr_Restore(et, ev, tb);
}

/* Native completion callback; no Python here (see the file comment). */
static void
request_on_complete(rma_request_t *req, rma_status_t status, void *user_data)
{
	RequestObject *r = user_data;
	const char *detail = rma_request_detail(req);
	ClientObject *c = r->client;

	r->n_status = status;
	r->n_bytes = rma_request_bytes(req);
	r->n_value = rma_request_value(req);
	r->n_detail = detail && *detail ? strdup(detail) : NULL;
	r->next_done = NULL;
	*c->done_tail = r;
	c->done_tail = &r->next_done;
}

static void
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
	Py_CLEAR(c->loop);
}

/* Progress runs in @p loop from now on: the fd is watched there. */
static int
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
	return 1;
}

/* The native disconnect, once nothing maps a region any more: requests
 * still in flight complete with DAEMON_GONE. */
static void
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

/* ---- Waiter: what `await request` yields to its Task ----
 *
 * An asyncio.Future per operation costs a loop.call_soon() (a Handle, a
 * turn of the loop) to wake the awaiting Task. A Waiter is as much of the
 * Future protocol as asyncio's Task uses (_asyncio_future_blocking,
 * get_loop, add_done_callback, cancel, result, done, cancelled,
 * exception, remove_done_callback), so a Task can await it; when its
 * request completes in the loop's reader (no Task running then), the
 * Task's wakeup runs at once, in its context, in the same turn, instead of
 * through call_soon. Anywhere else (a completion in request.wait(), in
 * progress() inside a Task, in another thread, a cancel) the callbacks go
 * through call_soon / call_soon_threadsafe as a Future's do.
 * Request.future() still gives a real asyncio.Future. */

enum { WAITER_PENDING, WAITER_DONE, WAITER_CANCELLED };

struct waiter {
	PyObject_HEAD PyObject *loop;
	PyObject *result, *exception, *cancel_msg;
	PyObject *cb0, *ctx0; /* the first callback inline: the usual one */
	PyObject *more;	      /* list of (fn, ctx) for the others */
	int state, blocking, yielded;
};

static PyTypeObject WaiterType;
static PyObject *cancelled_error, *str_call_soon, *str_call_soon_threadsafe,
    *kwnames_context;
/* Set while this thread runs the loop's reader of a client: no Task is
 * running, so Task wakeups may run directly. */
static __thread int waiter_direct_ok;

static WaiterObject *
waiter_new(PyObject *loop)
{
	WaiterObject *w = PyObject_GC_New(WaiterObject, &WaiterType);

	if (w == NULL)
		return NULL;
	w->loop = Py_NewRef(loop);
	w->result = w->exception = w->cancel_msg = NULL;
	w->cb0 = w->ctx0 = w->more = NULL;
	w->state = WAITER_PENDING;
	w->blocking = w->yielded = 0;
	PyObject_GC_Track(w);
	return w;
}

static int
waiter_traverse(WaiterObject *w, visitproc visit, void *arg)
{
	Py_VISIT(w->loop);
	Py_VISIT(w->result);
	Py_VISIT(w->exception);
	Py_VISIT(w->cancel_msg);
	Py_VISIT(w->cb0);
	Py_VISIT(w->ctx0);
	Py_VISIT(w->more);
	return 0;
}

static int
waiter_clear(WaiterObject *w)
{
	Py_CLEAR(w->loop);
	Py_CLEAR(w->result);
	Py_CLEAR(w->exception);
	Py_CLEAR(w->cancel_msg);
	Py_CLEAR(w->cb0);
	Py_CLEAR(w->ctx0);
	Py_CLEAR(w->more);
	return 0;
}

static void
waiter_dealloc(WaiterObject *w)
{
	PyObject_GC_UnTrack(w);
	waiter_clear(w);
	Py_TYPE(w)->tp_free((PyObject *)w);
}

/* The error pending is the RuntimeError of a closed loop: cleared, 1. A
 * loop closed with requests pending has nobody left to wake: they
 * complete into nothing (request.status still says how), rather than
 * one "Event loop is closed" per request in sys.unraisablehook. */
static int
loop_closed_clear(PyObject *loop)
{
	PyObject *closed, *et, *ev, *tb;
	int yes;

	if (!PyErr_ExceptionMatches(PyExc_RuntimeError))
		return 0;
	PyErr_Fetch(&et, &ev, &tb);
	closed = PyObject_CallMethod(loop, "is_closed", NULL);
	yes = closed != NULL && PyObject_IsTrue(closed) == 1;
	Py_XDECREF(closed);
	if (!yes) {
		PyErr_Clear();
		PyErr_Restore(et, ev, tb);
		return 0;
	}
	PyErr_Clear();
	Py_XDECREF(et);
	Py_XDECREF(ev);
	Py_XDECREF(tb);
	return 1;
}

/* fn(w) in ctx through the loop: call_soon, or call_soon_threadsafe
 * from another thread. */
static int
waiter_schedule(WaiterObject *w, PyObject *fn, PyObject *ctx, int threadsafe)
{
	PyObject *args[4] = {w->loop, fn, (PyObject *)w, ctx};
	PyObject *res;

	res = PyObject_VectorcallMethod(
	    threadsafe ? str_call_soon_threadsafe : str_call_soon, args, 3,
	    ctx != NULL && ctx != Py_None ? kwnames_context : NULL);
	if (res == NULL)
		return loop_closed_clear(w->loop) ? 0 : -1;
	Py_DECREF(res);
	return 0;
}

/* fn(w) in ctx, now: only while waiter_direct_ok. */
static void
waiter_run(WaiterObject *w, PyObject *fn, PyObject *ctx)
{
	PyObject *res;
	int entered = ctx != NULL && ctx != Py_None;

	if (entered && PyContext_Enter(ctx) < 0) {
		/* that context is running already: take the loop's way */
		PyErr_Clear();
		if (waiter_schedule(w, fn, ctx, 0) < 0)
			PyErr_WriteUnraisable(fn);
		return;
	}
	waiter_direct_ok = 0; /* a Task runs now */
	res = PyObject_CallOneArg(fn, (PyObject *)w);
	waiter_direct_ok = 1;
	if (res == NULL)
		PyErr_WriteUnraisable(fn);
	Py_XDECREF(res);
	if (entered && PyContext_Exit(ctx) < 0)
		PyErr_WriteUnraisable(fn);
}

/* Runs or schedules the callbacks once the state is final. */
static void
waiter_fire(WaiterObject *w, int direct, int threadsafe)
{
	PyObject *fn = w->cb0, *ctx = w->ctx0, *more = w->more;

	w->cb0 = w->ctx0 = w->more = NULL;
	/* keep w alive through the callbacks */
	Py_INCREF(w);
	if (fn != NULL) {
		if (direct)
			waiter_run(w, fn, ctx);
		else if (waiter_schedule(w, fn, ctx, threadsafe) < 0)
			PyErr_WriteUnraisable(fn);
	}
	Py_XDECREF(fn);
	Py_XDECREF(ctx);
	if (more != NULL) {
		for (Py_ssize_t i = 0; i < PyList_GET_SIZE(more); i++) {
			PyObject *t = PyList_GET_ITEM(more, i);
			PyObject *f = PyTuple_GET_ITEM(t, 0);
			PyObject *cx = PyTuple_GET_ITEM(t, 1);

			if (direct)
				waiter_run(w, f, cx);
			else if (waiter_schedule(w, f, cx, threadsafe) < 0)
				PyErr_WriteUnraisable(f);
		}
		Py_DECREF(more);
	}
	Py_DECREF(w);
}

/* The request's outcome: steals neither reference. */
static void
waiter_complete(WaiterObject *w, PyObject *value, PyObject *exc,
		PyObject *running)
{
	int same = running == w->loop;

	if (w->state != WAITER_PENDING)
		return; /* cancelled meanwhile */
	w->state = WAITER_DONE;
	w->result = Py_NewRef(value);
	w->exception = exc ? Py_NewRef(exc) : NULL;
	waiter_fire(w, same && waiter_direct_ok, !same);
}

static PyObject *
waiter_get_blocking(WaiterObject *w, void *unused)
{
	return PyBool_FromLong(w->blocking);
}

static int
waiter_set_blocking(WaiterObject *w, PyObject *v, void *unused)
{
	int b = v ? PyObject_IsTrue(v) : 0;

	if (b < 0)
		return -1;
	if (b)
		return PyErr_SetString(PyExc_ValueError,
				       "_asyncio_future_blocking can only be "
				       "set to False"),
		       -1;
	w->blocking = 0;
	return 0;
}

static PyObject *
waiter_get_loop(WaiterObject *w, PyObject *unused)
{
	return Py_NewRef(w->loop);
}

static PyObject *
waiter_add_done_callback(WaiterObject *w, PyObject *const *args, size_t nargsf,
			 PyObject *kwnames)
{
	Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
	PyObject *fn, *ctx = Py_None, *t;

	if (nargs != 1 || (kwnames != NULL && (PyTuple_GET_SIZE(kwnames) != 1 ||
					       PyUnicode_CompareWithASCIIString(
						   PyTuple_GET_ITEM(kwnames, 0),
						   "context") != 0))) {
		PyErr_SetString(PyExc_TypeError,
				"add_done_callback(fn, *, context=None)");
		return NULL;
	}
	fn = args[0];
	if (kwnames != NULL)
		ctx = args[1];
	if (w->state != WAITER_PENDING) {
		if (waiter_schedule(w, fn, ctx, 0) < 0)
			return NULL;
		Py_RETURN_NONE;
	}
	if (w->cb0 == NULL) {
		w->cb0 = Py_NewRef(fn);
		w->ctx0 = Py_NewRef(ctx);
		Py_RETURN_NONE;
	}
	if (w->more == NULL && (w->more = PyList_New(0)) == NULL)
		return NULL;
	if ((t = PyTuple_Pack(2, fn, ctx)) == NULL)
		return NULL;
	if (PyList_Append(w->more, t) < 0) {
		Py_DECREF(t);
		return NULL;
	}
	Py_DECREF(t);
	Py_RETURN_NONE;
}

static PyObject *
waiter_remove_done_callback(WaiterObject *w, PyObject *fn)
{
	Py_ssize_t n = 0;

	if (w->cb0 != NULL && w->cb0 == fn) {
		Py_CLEAR(w->cb0);
		Py_CLEAR(w->ctx0);
		n++;
	}
	if (w->more != NULL) {
		PyObject *keep = PyList_New(0);

		if (keep == NULL)
			return NULL;
		for (Py_ssize_t i = 0; i < PyList_GET_SIZE(w->more); i++) {
			PyObject *t = PyList_GET_ITEM(w->more, i);

			if (PyTuple_GET_ITEM(t, 0) == fn)
				n++;
			else if (PyList_Append(keep, t) < 0) {
				Py_DECREF(keep);
				return NULL;
			}
		}
		Py_SETREF(w->more, keep);
	}
	return PyLong_FromSsize_t(n);
}

static PyObject *
waiter_cancel(WaiterObject *w, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"msg", NULL};
	PyObject *msg = Py_None;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:cancel", kwlist, &msg))
		return NULL;
	if (w->state != WAITER_PENDING)
		Py_RETURN_FALSE;
	w->state = WAITER_CANCELLED;
	w->cancel_msg = Py_NewRef(msg);
	waiter_fire(w, 0, 0);
	Py_RETURN_TRUE;
}

static PyObject *
waiter_cancelled_exc(WaiterObject *w)
{
	return w->cancel_msg != NULL && w->cancel_msg != Py_None
		   ? PyObject_CallOneArg(cancelled_error, w->cancel_msg)
		   : PyObject_CallNoArgs(cancelled_error);
}

static PyObject *
waiter_result(WaiterObject *w, PyObject *unused)
{
	PyObject *exc;

	if (w->state == WAITER_PENDING) {
		PyErr_SetString(invalid_state, "Result is not set.");
		return NULL;
	}
	if (w->state == WAITER_CANCELLED) {
		if ((exc = waiter_cancelled_exc(w)) != NULL) {
			PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
			Py_DECREF(exc);
		}
		return NULL;
	}
	if (w->exception != NULL) {
		PyErr_SetObject((PyObject *)Py_TYPE(w->exception),
				w->exception);
		return NULL;
	}
	return Py_NewRef(w->result);
}

static PyObject *
waiter_exception(WaiterObject *w, PyObject *unused)
{
	if (w->state != WAITER_DONE)
		return waiter_result(w, NULL); /* raises as a Future's */
	return Py_NewRef(w->exception ? w->exception : Py_None);
}

static PyObject *
waiter_done(WaiterObject *w, PyObject *unused)
{
	return PyBool_FromLong(w->state != WAITER_PENDING);
}

static PyObject *
waiter_cancelled(WaiterObject *w, PyObject *unused)
{
	return PyBool_FromLong(w->state == WAITER_CANCELLED);
}

/* The await: yield the waiter once to the Task, then give the result. */
static PyObject *
waiter_iternext(WaiterObject *w)
{
	PyObject *res;

	if (w->state == WAITER_PENDING) {
		if (w->yielded) {
			PyErr_SetString(PyExc_RuntimeError,
					"await wasn't used with future");
			return NULL;
		}
		w->yielded = 1;
		w->blocking = 1;
		return Py_NewRef(w);
	}
	res = waiter_result(w, NULL);
	if (res == NULL)
		return NULL;
	if (res != Py_None)
		PyErr_SetObject(PyExc_StopIteration, res);
	Py_DECREF(res);
	return NULL;
}

static PyObject *
waiter_repr(WaiterObject *w)
{
	return PyUnicode_FromFormat(
	    "<rma._Waiter %s>", w->state == WAITER_PENDING     ? "pending"
				: w->state == WAITER_CANCELLED ? "cancelled"
							       : "finished");
}

static PyMethodDef waiter_methods[] = {
    {"get_loop", (PyCFunction)waiter_get_loop, METH_NOARGS, NULL},
    {"add_done_callback", (PyCFunction)(void (*)(void))waiter_add_done_callback,
     METH_FASTCALL | METH_KEYWORDS, NULL},
    {"remove_done_callback", (PyCFunction)waiter_remove_done_callback, METH_O,
     NULL},
    {"cancel", (PyCFunction)(void (*)(void))waiter_cancel,
     METH_VARARGS | METH_KEYWORDS, NULL},
    {"result", (PyCFunction)waiter_result, METH_NOARGS, NULL},
    {"exception", (PyCFunction)waiter_exception, METH_NOARGS, NULL},
    {"done", (PyCFunction)waiter_done, METH_NOARGS, NULL},
    {"cancelled", (PyCFunction)waiter_cancelled, METH_NOARGS, NULL},
    {NULL}};

static PyGetSetDef waiter_getset[] = {{"_asyncio_future_blocking",
				       (getter)waiter_get_blocking,
				       (setter)waiter_set_blocking, NULL, NULL},
				      {NULL}};

static PyTypeObject WaiterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rma._Waiter",
    .tp_basicsize = sizeof(WaiterObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "What awaiting a Request yields to its asyncio Task.",
    .tp_dealloc = (destructor)waiter_dealloc,
    .tp_traverse = (traverseproc)waiter_traverse,
    .tp_clear = (inquiry)waiter_clear,
    .tp_repr = (reprfunc)waiter_repr,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)waiter_iternext,
    .tp_methods = waiter_methods,
    .tp_getset = waiter_getset,
};

/* ---- Request ---- */

static int
request_traverse(RequestObject *r, visitproc visit, void *arg)
{
	Py_VISIT(r->callback);
	Py_VISIT(r->user_data);
	Py_VISIT(r->future);
	Py_VISIT(r->waiter);
	Py_VISIT(r->loop);
	Py_VISIT(r->client);
	return 0;
}

static int
request_clear(RequestObject *r)
{
	Py_CLEAR(r->callback);
	Py_CLEAR(r->user_data);
	Py_CLEAR(r->future);
	Py_CLEAR(r->waiter);
	Py_CLEAR(r->loop);
	return 0;
}

static void
request_dealloc(RequestObject *r)
{
	PyObject_GC_UnTrack(r);
	if (r->weakrefs != NULL)
		PyObject_ClearWeakRefs((PyObject *)r);
	request_clear(r);
	Py_CLEAR(r->client);
	free(r->detail);
	free(r->n_detail);
	Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyObject *
request_error(RequestObject *r)
{
	if (!r->finished || r->status == RMA_OK)
		Py_RETURN_NONE;
	return error_new(r->status, r->detail);
}

static PyObject *
request_error_method(RequestObject *r, PyObject *unused)
{
	return request_error(r);
}

/* What awaiting a successful request gives: an atomic's old value, else
 * None. */
static PyObject *
request_result(RequestObject *r)
{
	if (r->is_atomic && r->finished && r->status == RMA_OK)
		return PyLong_FromUnsignedLongLong(r->value);
	Py_RETURN_NONE;
}

/* Resolves the future, from the loop's own thread or through
 * call_soon_threadsafe. */
static void
request_resolve(RequestObject *r)
{
	PyObject *fut = r->future, *running, *exc = NULL, *res = NULL;

	if (fut == NULL)
		return;
	if (r->status != RMA_OK && (exc = request_error(r)) == NULL)
		goto report;
	if ((running = running_loop()) == NULL)
		goto report;
	if (running == r->loop) {
		PyObject *val = request_result(r);

		if (val == NULL)
			res = NULL;
		else if (exc != NULL)
			res = PyObject_CallMethodOneArg(fut, str_set_exception,
							exc);
		else if (Py_TYPE(fut) == (PyTypeObject *)future_type)
			res = PyObject_Vectorcall(future_set_result,
						  (PyObject *[]){fut, val}, 2,
						  NULL);
		else
			res =
			    PyObject_CallMethodOneArg(fut, str_set_result, val);
		Py_XDECREF(val);
		/* a cancelled future keeps its cancellation */
		if (res == NULL && PyErr_ExceptionMatches(invalid_state)) {
			PyErr_Clear();
			res = Py_NewRef(Py_None);
		}
	} else {
		PyObject *val = request_result(r);

		res = val == NULL ? NULL
				  : PyObject_CallFunctionObjArgs(
					resolve_threadsafe, fut,
					exc ? exc : Py_None, val, NULL);
		Py_XDECREF(val);
	}
	Py_DECREF(running);
report:
	if (res == NULL)
		PyErr_WriteUnraisable(fut);
	Py_XDECREF(res);
	Py_XDECREF(exc);
}

/* Completes the waiter of an await in progress (see Waiter). */
static void
request_resolve_waiter(RequestObject *r)
{
	WaiterObject *w = r->waiter;
	PyObject *exc = NULL, *val, *running;

	if (w == NULL)
		return;
	r->waiter = NULL; /* ours, now the local w's */
	if (r->status != RMA_OK && (exc = request_error(r)) == NULL)
		goto report;
	if ((val = request_result(r)) == NULL)
		goto report;
	if ((running = running_loop()) == NULL) {
		Py_DECREF(val);
		goto report;
	}
	waiter_complete(w, val, exc, running);
	Py_DECREF(running);
	Py_DECREF(val);
	Py_XDECREF(exc);
	Py_DECREF(w);
	return;

report:
	PyErr_WriteUnraisable((PyObject *)w);
	Py_XDECREF(exc);
	Py_DECREF(w);
}

/* Reports an exception a callback raised: to the loop's exception
 * handler when the loop is running here, else sys.unraisablehook. */
static void
request_report(RequestObject *r, PyObject *callback)
{
	ClientObject *c = r->client;
	PyObject *et, *ev, *tb, *running, *ctx, *res;

	if (c->loop == NULL) {
		PyErr_WriteUnraisable(callback);
		return;
	}
	PyErr_Fetch(&et, &ev, &tb);
	PyErr_NormalizeException(&et, &ev, &tb);
	if (tb != NULL && ev != NULL)
		PyException_SetTraceback(ev, tb);
	running = running_loop();
	if (running == NULL || running != c->loop) {
		Py_XDECREF(running);
		PyErr_Clear();
		PyErr_Restore(et, ev, tb);
		PyErr_WriteUnraisable(callback);
		return;
	}
	ctx = Py_BuildValue("{s:s,s:O,s:O,s:O}", "message",
			    "exception in an rma request callback", "exception",
			    ev ? ev : Py_None, "request", (PyObject *)r,
			    "callback", callback);
	res = ctx ? PyObject_CallMethod(running, "call_exception_handler", "O",
					ctx)
		  : NULL;
	if (res == NULL)
		PyErr_WriteUnraisable(callback);
	Py_XDECREF(res);
	Py_XDECREF(ctx);
	Py_DECREF(running);
	Py_XDECREF(et);
	Py_XDECREF(ev);
	Py_XDECREF(tb);
}

/* Once per request: records the outcome, runs the callback, resolves the
 * future. Takes @p detail (malloc'd). */
static void
request_finish(RequestObject *r, int status, unsigned long long bytes,
	       char *detail)
{
	ClientObject *c = r->client;
	PyObject *cb, *ud, *res;

	if (r->finished) {
		free(detail);
		return;
	}
	r->finished = 1;
	r->status = status;
	r->bytes = bytes;
	r->detail = detail;
	if (r->prev_live != NULL)
		r->prev_live->next_live = r->next_live;
	else
		c->live = r->next_live;
	if (r->next_live != NULL)
		r->next_live->prev_live = r->prev_live;
	r->prev_live = r->next_live = NULL;
	/* the callback's references go with this one call */
	cb = r->callback;
	ud = r->user_data;
	r->callback = r->user_data = NULL;
	if (cb != NULL) {
		res = PyObject_CallFunction(cb, "OiO", (PyObject *)r, status,
					    ud ? ud : Py_None);
		if (res == NULL)
			request_report(r, cb);
		Py_XDECREF(res);
	}
	Py_XDECREF(cb);
	Py_XDECREF(ud);
	request_resolve(r);
	request_resolve_waiter(r);
}

static RequestObject *
request_new(ClientObject *c, PyObject *callback, PyObject *user_data)
{
	RequestObject *r;

	if (callback != NULL && callback != Py_None &&
	    !PyCallable_Check(callback)) {
		PyErr_SetString(PyExc_TypeError, "callback must be callable");
		return NULL;
	}
	r = PyObject_GC_New(RequestObject, &RequestType);
	if (r == NULL)
		return NULL;
	r->client = (ClientObject *)Py_NewRef(c);
	r->callback =
	    callback && callback != Py_None ? Py_NewRef(callback) : NULL;
	r->user_data =
	    user_data && user_data != Py_None ? Py_NewRef(user_data) : NULL;
	r->future = NULL;
	r->waiter = NULL;
	r->loop = NULL;
	r->req = NULL;
	r->finished = 0;
	r->is_atomic = 0;
	r->status = RMA_INPROGRESS;
	r->bytes = r->n_bytes = r->value = r->n_value = 0;
	r->detail = r->n_detail = NULL;
	r->n_status = RMA_INPROGRESS;
	r->next_done = r->prev_live = r->next_live = NULL;
	r->weakrefs = NULL;
	PyObject_GC_Track(r);
	return r;
}

/* After a successful submit: librma owns one reference until the
 * completion has been handled (client_leave). */
static void
request_submitted(RequestObject *r)
{
	ClientObject *c = r->client;

	Py_INCREF(r);
	r->next_live = c->live;
	if (c->live != NULL)
		c->live->prev_live = r;
	c->live = r;
}

static PyObject *
request_done(RequestObject *r, PyObject *unused)
{
	return PyBool_FromLong(r->finished);
}

static double
mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One turn of progress: sends batches, reads, finishes completions. */
static int
client_progress_once(ClientObject *c, int *gone_p)
{
	rma_status_t st;
	char detail[512];

	if (!client_enter(c))
		return 0;
	st = rma_progress(c->rc);
	if (st != RMA_OK && st != RMA_ERR_DAEMON_GONE)
		snprintf(detail, sizeof(detail), "%s", rma_last_error(c->rc));
	client_leave(c);
	if (PyErr_Occurred())
		return 0;
	/* RMA_ERR_INVALID: the parent's client, in a child of fork() */
	if (st != RMA_OK && st != RMA_ERR_DAEMON_GONE) {
		error_raise(st, detail);
		return 0;
	}
	*gone_p = st == RMA_ERR_DAEMON_GONE;
	if (*gone_p)
		client_unwatch(c);
	return 1;
}

static PyObject *
request_wait(RequestObject *r, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"timeout", NULL};
	PyObject *timeout = Py_None;
	ClientObject *c = r->client;
	double deadline = -1, left;
	struct pollfd pfd[2];
	uint64_t tokens;
	int gone = 0, ms, rc;
	PyThreadState *ts;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:wait", kwlist, &timeout))
		return NULL;
	if (timeout != Py_None) {
		double t = PyFloat_AsDouble(timeout);

		if (t == -1 && PyErr_Occurred())
			return NULL;
		deadline = mono_now() + (t < 0 ? 0 : t);
	}
	c->waiters++;
	while (!r->finished) {
		if (c->rc == NULL || c->closed)
			break; /* close() finished it */
		if (!client_progress_once(c, &gone))
			goto err;
		if (r->finished || gone)
			break;
		ms = -1;
		if (deadline >= 0) {
			left = deadline - mono_now();
			if (left <= 0) {
				error_raise(RMA_ERR_TIMEOUT,
					    "request not completed within the "
					    "timeout");
				goto err;
			}
			ms = (int)(left * 1000) + 1;
		}
		pfd[0].fd = c->fd;
		pfd[0].events = POLLIN;
		pfd[1].fd = c->wake_fd;
		pfd[1].events = POLLIN;
		ts = PyEval_SaveThread();
		rc = poll(pfd, 2, ms);
		if (rc > 0 && (pfd[1].revents & POLLIN) &&
		    read(c->wake_fd, &tokens, sizeof(tokens)) < 0) {
			/* another waiter took the last token: fine */
		}
		PyEval_RestoreThread(ts);
		if (PyErr_CheckSignals() < 0)
			goto err;
	}
	c->waiters--;
	if (!r->finished)
		return error_raise(RMA_ERR_DAEMON_GONE, "client closed");
	if (r->status != RMA_OK)
		return error_raise(r->status, r->detail);
	Py_RETURN_NONE;

err:
	c->waiters--;
	return NULL;
}

/* loop.create_future(), without the Python-level call when the loop's
 * is asyncio's own (which returns Future(loop=self)). */
static PyObject *
loop_create_future(PyObject *loop)
{
	PyObject *type = (PyObject *)Py_TYPE(loop), *m;

	if (type != loop_type_seen) {
		m = PyObject_GetAttr(type, str_create_future);
		if (m == NULL)
			return NULL;
		loop_type_stock = m == stock_create_future;
		Py_DECREF(m);
		Py_XSETREF(loop_type_seen, Py_NewRef(type));
	}
	if (loop_type_stock)
		return PyObject_Vectorcall(future_type, &loop, 0, kwnames_loop);
	return PyObject_CallMethodNoArgs(loop, str_create_future);
}

static PyObject *
request_future(RequestObject *r, PyObject *unused)
{
	PyObject *loop, *fut;

	if (r->future != NULL)
		return Py_NewRef(r->future);
	loop = PyObject_CallNoArgs(get_running_loop);
	if (loop == NULL)
		return NULL;
	if (loop == Py_None) {
		Py_DECREF(loop);
		PyErr_SetString(PyExc_RuntimeError,
				"Request.future() needs a running event loop");
		return NULL;
	}
	fut = loop_create_future(loop);
	if (fut == NULL)
		goto err_loop;
	r->future = fut;
	r->loop = Py_NewRef(loop);
	if (r->finished)
		request_resolve(r);
	else if (r->client->rc != NULL && !r->client->closed &&
		 !client_watch(r->client, loop))
		goto err_future;
	Py_DECREF(loop);
	return Py_NewRef(fut);

err_future:
	Py_CLEAR(r->future);
	Py_CLEAR(r->loop);
err_loop:
	Py_DECREF(loop);
	return NULL;
}

static PyObject *
request_await(RequestObject *r)
{
	PyObject *fut, *it, *loop;
	WaiterObject *w;

	/* The usual await: a pending request awaited once, no future asked
	 * for. Others (a second await, a completed request, future() used)
	 * go through the asyncio.Future. */
	if (r->future == NULL && r->waiter == NULL && !r->finished &&
	    r->client->rc != NULL && !r->client->closed) {
		loop = PyObject_CallNoArgs(get_running_loop);
		if (loop == NULL)
			return NULL;
		if (loop == Py_None) {
			Py_DECREF(loop);
			PyErr_SetString(PyExc_RuntimeError,
					"awaiting a Request needs a running "
					"event loop");
			return NULL;
		}
		if (!client_watch(r->client, loop)) {
			Py_DECREF(loop);
			return NULL;
		}
		w = waiter_new(loop);
		Py_DECREF(loop);
		if (w == NULL)
			return NULL;
		r->waiter = (WaiterObject *)Py_NewRef(w);
		return (PyObject *)w;
	}
	fut = request_future(r, NULL);

	if (fut == NULL)
		return NULL;
	/* asyncio.Future's am_await slot, else its __await__ */
	if (Py_TYPE(fut)->tp_as_async != NULL &&
	    Py_TYPE(fut)->tp_as_async->am_await != NULL)
		it = Py_TYPE(fut)->tp_as_async->am_await(fut);
	else
		it = PyObject_CallMethodNoArgs(fut, str_await);
	Py_DECREF(fut);
	return it;
}

static PyObject *
request_get_status(RequestObject *r, void *unused)
{
	return PyLong_FromLong(r->status);
}

static PyObject *
request_get_detail(RequestObject *r, void *unused)
{
	return PyUnicode_FromString(r->detail ? r->detail : "");
}

static PyObject *
request_get_bytes(RequestObject *r, void *unused)
{
	return PyLong_FromUnsignedLongLong(r->bytes);
}

static PyObject *
request_get_value(RequestObject *r, void *unused)
{
	return request_result(r);
}

static PyObject *
request_cancel(RequestObject *r, PyObject *unused)
{
	ClientObject *c = r->client;
	rma_status_t st;

	if (r->finished || r->req == NULL)
		Py_RETURN_FALSE;
	if (!client_enter(c))
		return NULL;
	st = r->req != NULL ? rma_request_cancel(c->rc, r->req)
			    : RMA_ERR_INVALID;
	client_leave(c); /* finishes it when canceled: callback, future */
	if (PyErr_Occurred())
		return NULL;
	return PyBool_FromLong(st == RMA_OK);
}

static PyObject *
request_repr(RequestObject *r)
{
	return PyUnicode_FromFormat("<rma.Request %s>",
				    r->finished ? rma_strerror(r->status)
						: "in progress");
}

static PyMethodDef request_methods[] = {
    {"done", (PyCFunction)request_done, METH_NOARGS,
     "done($self, /)\n--\n\nTrue once the request completed, well or not."},
    {"wait", (PyCFunction)(void (*)(void))request_wait,
     METH_VARARGS | METH_KEYWORDS,
     "wait($self, /, timeout=None)\n--\n\nMake progress (GIL released while "
     "blocked) until the request completes; raise its error if it failed, "
     "rma.Timeout if it is still in progress after timeout seconds (it "
     "stays valid and may complete later)."},
    {"future", (PyCFunction)request_future, METH_NOARGS,
     "future($self, /)\n--\n\nThe future of this request on the "
     "running loop (created once): its result is None (an atomic's old "
     "value), or the request's "
     "error. Registers the client's fd with the loop."},
    {"error", (PyCFunction)request_error_method, METH_NOARGS,
     "error($self, /)\n--\n\nThe exception for a failed request."},
    {"cancel", (PyCFunction)request_cancel, METH_NOARGS,
     "cancel($self, /)\n--\n\nCancel the operation if it has not been handed "
     "to the daemon yet (it is still in librma's batch): it then completes "
     "at once with rma.Canceled (callback run, future failed, before this "
     "returns) and True is returned. An operation already sent: False; the "
     "daemon is asked to take it back, and one it still held (parked while "
     "its peer reconnects) fails with rma.Canceled soon after, others run "
     "to their own completion. A completed one stays as it is: False. A "
     "vectored request loses its unsent pieces and fails with rma.Canceled "
     "once the others are done (True)."},
    {NULL}};

static PyGetSetDef request_getset[] = {
    {"status", (getter)request_get_status, NULL,
     "rma.INPROGRESS (1), rma.OK (0) or a negative rma status.", NULL},
    {"detail", (getter)request_get_detail, NULL,
     "The daemon's detail for a failed request ('' if none).", NULL},
    {"bytes", (getter)request_get_bytes, NULL,
     "Bytes moved by a completed request.", NULL},
    {"value", (getter)request_get_value, NULL,
     "An atomic's result: the word's old value once it completed with "
     "rma.OK (also what awaiting it returns); None otherwise.",
     NULL},
    {NULL}};

static PyAsyncMethods request_async = {.am_await = (unaryfunc)request_await};

static PyTypeObject RequestType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rma.Request",
    .tp_basicsize = sizeof(RequestObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "One put, get, flush, atomic or vectored transfer. "
	      "Awaitable: `await request` returns when it completes (an "
	      "atomic's old value, else None) and raises its error if it "
	      "failed. Cancelling an await (asyncio.wait_for() timing out, "
	      "task.cancel()) cancels the await, not the operation: it runs "
	      "on and completes as it would have (a put's bytes land); "
	      "cancel() asks the daemon to take it back.",
    .tp_dealloc = (destructor)request_dealloc,
    .tp_traverse = (traverseproc)request_traverse,
    .tp_clear = (inquiry)request_clear,
    .tp_repr = (reprfunc)request_repr,
    .tp_as_async = &request_async,
    .tp_methods = request_methods,
    .tp_getset = request_getset,
    .tp_weaklistoffset = offsetof(RequestObject, weakrefs),
};

/* ---- Region ---- */

static void
region_queue_free(RegionObject *r)
{
	ClientObject *c = r->client;
	size_t cap;
	rma_region_t **dead;

	if (r->rr == NULL || c->rc == NULL)
		return;
	if (c->ndead == c->capdead) {
		cap = c->capdead ? c->capdead * 2 : 8;
		dead = PyMem_Realloc(c->dead, cap * sizeof(*dead));
		if (dead == NULL)
			return; /* freed with the connection instead */
		c->dead = dead;
		c->capdead = cap;
	}
	c->dead[c->ndead++] = r->rr;
	r->rr = NULL;
	r->ptr = NULL;
}

static void
region_dealloc(RegionObject *r)
{
	if (r->weakrefs != NULL)
		PyObject_ClearWeakRefs((PyObject *)r);
	if (r->rr != NULL && r->client->regions != NULL) {
		PyObject *key = PyLong_FromVoidPtr(r->rr);

		if (key == NULL || PyDict_DelItem(r->client->regions, key) < 0)
			PyErr_Clear();
		Py_XDECREF(key);
	}
	/* no views exist: each holds a reference */
	region_queue_free(r);
	Py_CLEAR(r->client);
	Py_TYPE(r)->tp_free((PyObject *)r);
}

static int
region_usable(RegionObject *r)
{
	if (r->client->rc == NULL || r->client->closed) {
		error_closed();
		return 0;
	}
	if (r->rr == NULL || r->free_pending) {
		error_raise(RMA_ERR_NO_REGION, "region freed");
		return 0;
	}
	return 1;
}

static int
region_getbuffer(RegionObject *r, Py_buffer *view, int flags)
{
	if (r->rr == NULL || r->free_pending || r->client->rc == NULL ||
	    r->client->closed) {
		PyErr_SetString(PyExc_BufferError,
				"region freed or client closed");
		return -1;
	}
	if (PyBuffer_FillInfo(view, (PyObject *)r, r->ptr, r->length, 0,
			      flags) < 0)
		return -1;
	r->exports++;
	r->client->pinned++;
	return 0;
}

static void
region_releasebuffer(RegionObject *r, Py_buffer *view)
{
	ClientObject *c = r->client;

	r->exports--;
	c->pinned--;
	if (r->exports == 0 && r->free_pending)
		region_queue_free(r);
	if (c->pinned == 0 && c->closed)
		client_disconnect(c);
}

static PyObject *
region_free(RegionObject *r, PyObject *unused)
{
	ClientObject *c = r->client;
	rma_region_t *rr = r->rr;
	rma_status_t st;
	char detail[512];
	PyThreadState *ts;

	if (rr == NULL || r->free_pending)
		return error_raise(RMA_ERR_NO_REGION, "region already freed");
	if (r->exports > 0) {
		/* views still use the memory: freed with the last one */
		r->free_pending = 1;
		Py_RETURN_NONE;
	}
	if (!client_enter(c))
		return NULL;
	r->rr = NULL;
	r->ptr = NULL;
	ts = PyEval_SaveThread();
	st = rma_region_free(c->rc, rr);
	PyEval_RestoreThread(ts);
	snprintf(detail, sizeof(detail), "%s", rma_last_error(c->rc));
	client_leave(c);
	if (st != RMA_OK)
		return error_raise(st, detail);
	Py_RETURN_NONE;
}

static PyObject *
region_descriptor(RegionObject *r, PyObject *unused)
{
	if (!region_usable(r))
		return NULL;
	return PyUnicode_FromString(rma_region_descriptor(r->rr));
}

static PyObject *
region_read_only_descriptor(RegionObject *r, PyObject *unused)
{
	if (!region_usable(r))
		return NULL;
	return PyUnicode_FromString(rma_region_read_only_descriptor(r->rr));
}

static Py_ssize_t
region_len(RegionObject *r)
{
	return r->length;
}

static PyObject *
region_get_address(RegionObject *r, void *unused)
{
	if (!region_usable(r))
		return NULL;
	return PyLong_FromVoidPtr(r->ptr);
}

static PyObject *
region_get_freed(RegionObject *r, void *unused)
{
	return PyBool_FromLong(r->rr == NULL || r->free_pending);
}

static PyMethodDef region_methods[] = {
    {"descriptor", (PyCFunction)region_descriptor, METH_NOARGS,
     "descriptor($self, /)\n--\n\nThe printable descriptor to hand to other "
     "hosts."},
    {"read_only_descriptor", (PyCFunction)region_read_only_descriptor,
     METH_NOARGS,
     "read_only_descriptor($self, /)\n--\n\nA descriptor of the same region "
     "that allows gets only: a put or atomic through it fails with "
     "rma.Permission, nothing written."},
    {"free", (PyCFunction)region_free, METH_NOARGS,
     "free($self, /)\n--\n\nFree the region. While buffer views on it exist "
     "the memory stays mapped and the daemon frees it when the last view "
     "is released; the region is unusable from now on either way."},
    {NULL}};

static PyGetSetDef region_getset[] = {
    {"address", (getter)region_get_address, NULL,
     "Local address of the shared memory (for zero-copy checks).", NULL},
    {"freed", (getter)region_get_freed, NULL, "True once free() ran.", NULL},
    {NULL}};

static PySequenceMethods region_seq = {.sq_length = (lenfunc)region_len};

static PyBufferProcs region_buffer = {
    .bf_getbuffer = (getbufferproc)region_getbuffer,
    .bf_releasebuffer = (releasebufferproc)region_releasebuffer,
};

static PyTypeObject RegionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rma.Region",
    .tp_basicsize = sizeof(RegionObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Memory shared with the daemon, from Client.alloc(). Supports "
	      "the buffer protocol: memoryview(region) and "
	      "numpy.frombuffer(region) are writable views, no copy; the "
	      "memory stays valid while any view exists. len(region) is its "
	      "length.",
    .tp_dealloc = (destructor)region_dealloc,
    .tp_weaklistoffset = offsetof(RegionObject, weakrefs),
    .tp_as_sequence = &region_seq,
    .tp_as_buffer = &region_buffer,
    .tp_methods = region_methods,
    .tp_getset = region_getset,
};

/* ---- Peer and Remote ---- */

static void
peer_dealloc(PeerObject *p)
{
	Py_CLEAR(p->client);
	Py_CLEAR(p->address);
	Py_TYPE(p)->tp_free((PyObject *)p);
}

static PyObject *
peer_get_status(PeerObject *p, void *unused)
{
	if (p->client->rc == NULL)
		return PyLong_FromLong(RMA_ERR_DAEMON_GONE);
	return PyLong_FromLong(rma_peer_status(p->rp));
}

static PyObject *
peer_get_detail(PeerObject *p, void *unused)
{
	if (p->client->rc == NULL)
		return PyUnicode_FromString("client closed");
	return PyUnicode_FromString(rma_peer_detail(p->rp));
}

static PyGetSetDef peer_getset[] = {
    {"status", (getter)peer_get_status, NULL,
     "rma.OK while the peer is up, else the status it failed with.", NULL},
    {"detail", (getter)peer_get_detail, NULL,
     "The daemon's detail for the peer's last failure.", NULL},
    {NULL}};

static PyMemberDef peer_members[] = {{"address", T_OBJECT,
				      offsetof(PeerObject, address), READONLY,
				      "The address given to Client.peer()."},
				     {NULL}};

static PyTypeObject PeerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rma.Peer",
    .tp_basicsize = sizeof(PeerObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Another host's rmad, from Client.peer(address).",
    .tp_dealloc = (destructor)peer_dealloc,
    .tp_getset = peer_getset,
    .tp_members = peer_members,
};

static void
remote_dealloc(RemoteObject *r)
{
	ClientObject *c = r->client;
	rma_remote_t **dead;
	size_t cap;

	/* The release is a round trip that may read completions: it waits
	 * for the next call, which finishes them (see client_reap_dead). */
	if (r->rr != NULL && c->rc != NULL && !c->closed) {
		if (c->ndead_remotes == c->capdead_remotes) {
			cap = c->capdead_remotes ? c->capdead_remotes * 2 : 8;
			dead =
			    PyMem_Realloc(c->dead_remotes, cap * sizeof(*dead));
			if (dead != NULL) {
				c->dead_remotes = dead;
				c->capdead_remotes = cap;
			}
		}
		/* else released with the connection */
		if (c->ndead_remotes < c->capdead_remotes)
			c->dead_remotes[c->ndead_remotes++] = r->rr;
	}
	Py_CLEAR(r->peer);
	Py_CLEAR(r->client);
	Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyObject *
remote_release(RemoteObject *r, PyObject *unused)
{
	ClientObject *c = r->client;
	rma_remote_t *rr = r->rr;
	PyThreadState *ts;

	if (rr == NULL)
		Py_RETURN_NONE;
	if (!client_enter(c))
		return NULL;
	r->rr = NULL;
	ts = PyEval_SaveThread();
	rma_remote_release(c->rc, rr);
	PyEval_RestoreThread(ts);
	client_leave(c);
	Py_RETURN_NONE;
}

static PyObject *
remote_get_length(RemoteObject *r, void *unused)
{
	if (r->client->rc == NULL || r->client->closed)
		return error_closed();
	if (r->rr == NULL)
		return error_raise(RMA_ERR_NO_PEER, "remote released");
	return PyLong_FromUnsignedLongLong(rma_remote_length(r->rr));
}

static PyMethodDef remote_methods[] = {
    {"release", (PyCFunction)remote_release, METH_NOARGS,
     "release($self, /)\n--\n\nForget the remote (operations already submitted "
     "on it are not affected)."},
    {NULL}};

static PyGetSetDef remote_getset[] = {
    {"length", (getter)remote_get_length, NULL,
     "Length of the remote region, as its owner answered.", NULL},
    {NULL}};

static PyMemberDef remote_members[] = {
    {"peer", T_OBJECT, offsetof(RemoteObject, peer), READONLY,
     "The peer the remote was imported through."},
    {NULL}};

static PyTypeObject RemoteType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rma.Remote",
    .tp_basicsize = sizeof(RemoteObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A remote region resolved with its owner, from "
	      "Client.import_remote().",
    .tp_dealloc = (destructor)remote_dealloc,
    .tp_methods = remote_methods,
    .tp_getset = remote_getset,
    .tp_members = remote_members,
};

/* ---- Notifications ---- */

static PyTypeObject *NotificationType;
/* rma._resolve.notifications and .notify_deliver */
static PyObject *notify_iterate, *notify_deliver;

static PyStructSequence_Field notification_fields[] = {
    {"region", "the Region written (None if freed or not known here)"},
    {"offset", "where in it"},
    {"length", "bytes written"},
    {"value", "the initiator's notify value"},
    {"sender", "the initiating daemon's id (hex)"},
    {NULL, NULL}};

static PyStructSequence_Desc notification_desc = {
    "rma.Notification",
    "What a notifying put (put(..., notify=value)) wrote into a region "
    "of this client.",
    notification_fields, 5};

/* Native notification callback; no Python here (see the file comment):
 * queued for client_leave. */
static void
notify_on_native(rma_client_t *rc, const rma_notification_t *n, void *ud)
{
	ClientObject *c = ud;

	(void)rc;
	if (c->nnq == c->capnq) {
		size_t cap = c->capnq ? 2 * c->capnq : 16;
		rma_notification_t *q = realloc(c->nq, cap * sizeof(*q));

		if (q == NULL)
			return; /* dropped: nothing better to do without memory
				 */
		c->nq = q;
		c->capnq = cap;
	}
	c->nq[c->nnq++] = *n;
}

static PyObject *
notify_make(ClientObject *c, const rma_notification_t *n)
{
	PyObject *o = PyStructSequence_New(NotificationType), *region = NULL;

	if (o == NULL)
		return NULL;
	if (n->region != NULL && c->regions != NULL) {
		PyObject *key = PyLong_FromVoidPtr(n->region), *ref;

		if (key == NULL)
			goto err;
		ref = PyDict_GetItemWithError(c->regions, key);
		Py_DECREF(key);
		if (ref == NULL && PyErr_Occurred())
			goto err;
		if (ref != NULL)
			region = PyWeakref_GetObject(ref);
	}
	if (region == NULL)
		region = Py_None;
	PyStructSequence_SET_ITEM(o, 0, Py_NewRef(region));
	PyStructSequence_SET_ITEM(o, 1, PyLong_FromUnsignedLongLong(n->offset));
	PyStructSequence_SET_ITEM(o, 2, PyLong_FromUnsignedLongLong(n->length));
	PyStructSequence_SET_ITEM(o, 3, PyLong_FromUnsignedLongLong(n->value));
	PyStructSequence_SET_ITEM(
	    o, 4,
	    PyUnicode_FromStringAndSize(
		n->daemon_id, strnlen(n->daemon_id, sizeof(n->daemon_id))));
	for (int i = 1; i < 5; i++)
		if (PyStructSequence_GET_ITEM(o, i) == NULL)
			goto err;
	return o;

err:
	Py_DECREF(o);
	return NULL;
}

/* Reports an exception of a notification callback as request_report
 * does: the loop's exception handler when its loop runs here, else
 * sys.unraisablehook. */
static void
notify_report(ClientObject *c, PyObject *cb, PyObject *n)
{
	PyObject *et, *ev, *tb, *running = NULL, *ctx, *res;

	PyErr_Fetch(&et, &ev, &tb);
	PyErr_NormalizeException(&et, &ev, &tb);
	if (tb != NULL && ev != NULL)
		PyException_SetTraceback(ev, tb);
	if (c->loop != NULL)
		running = running_loop();
	if (running == NULL || running != c->loop) {
		Py_XDECREF(running);
		PyErr_Clear();
		PyErr_Restore(et, ev, tb);
		PyErr_WriteUnraisable(cb);
		return;
	}
	ctx = Py_BuildValue("{s:s,s:O,s:O,s:O}", "message",
			    "exception in an rma notification callback",
			    "exception", ev ? ev : Py_None, "notification",
			    n ? n : Py_None, "callback", cb);
	res = ctx ? PyObject_CallMethod(running, "call_exception_handler", "O",
					ctx)
		  : NULL;
	if (res == NULL)
		PyErr_WriteUnraisable(cb);
	Py_XDECREF(res);
	Py_XDECREF(ctx);
	Py_DECREF(running);
	Py_XDECREF(et);
	Py_XDECREF(ev);
	Py_XDECREF(tb);
}

/* Gives the awaiting iterator its notification (@p val) or failure
 * (@p exc): directly in the future's loop, which checked that the future
 * is pending; from another thread through the loop, where a future
 * cancelled meanwhile hands the notification back (_notify_unget) so
 * that none is lost. */
static void
notify_hand(ClientObject *c, PyObject *fut, PyObject *exc, PyObject *val)
{
	PyObject *running = running_loop(), *res;

	if (running != NULL && running == c->loop)
		res =
		    exc ? PyObject_CallMethodOneArg(fut, str_set_exception, exc)
			: PyObject_CallMethodOneArg(fut, str_set_result, val);
	else
		res = PyObject_CallFunctionObjArgs(notify_deliver, c, fut,
						   exc ? exc : Py_None,
						   val ? val : Py_None, NULL);
	PyErr_Clear();
	Py_XDECREF(running);
	if (res == NULL)
		PyErr_WriteUnraisable(fut);
	else if (val != NULL)
		c->stashed = 0;
	Py_XDECREF(res);
}

/* Runs the callback on the queued notifications (takes @p nq), then
 * hands the stashed one to the awaiting iterator. Keeps a pending
 * exception. */
static void
notify_dispatch(ClientObject *c, rma_notification_t *nq, size_t nnq,
		int resolve)
{
	PyObject *et, *ev, *tb, *cb, *n, *res, *fut, *exc = NULL, *val = NULL;

	PyErr_Fetch(&et, &ev, &tb);
	Py_INCREF(c);
	for (size_t i = 0; i < nnq; i++) {
		cb = c->notify_cb;
		if (cb == NULL)
			break; /* unset meanwhile: these are lost to Python */
		Py_INCREF(cb);
		n = notify_make(c, &nq[i]);
		res = n ? PyObject_CallOneArg(cb, n) : NULL;
		if (res == NULL)
			notify_report(c, cb, n);
		Py_XDECREF(res);
		Py_XDECREF(n);
		Py_DECREF(cb);
	}
	free(nq);
	fut = c->notify_future;
	if (resolve && fut != NULL && c->stashed != 0) {
		PyObject *cancelled = PyObject_CallMethod(fut, "done", NULL);
		int done = cancelled ? PyObject_IsTrue(cancelled) : 1;

		Py_XDECREF(cancelled);
		PyErr_Clear();
		c->notify_future = NULL;
		if (!done) {
			/* the stash stays unless the future takes it */
			if (c->stashed > 0)
				val = notify_make(c, &c->stash);
			else
				exc = error_new(
				    c->stashed,
				    "the daemon closed the connection");
			if (val != NULL || exc != NULL)
				notify_hand(c, fut, exc, val);
			else
				PyErr_WriteUnraisable(fut);
			Py_XDECREF(val);
			Py_XDECREF(exc);
		}
		Py_DECREF(fut);
	}
	Py_DECREF(c);
	PyErr_Restore(et, ev, tb);
}

static PyObject *
client_on_notification(ClientObject *c, PyObject *cb)
{
	if (cb != Py_None && !PyCallable_Check(cb)) {
		PyErr_SetString(PyExc_TypeError, "callback must be callable");
		return NULL;
	}
	if (!client_enter(c))
		return NULL;
	Py_XSETREF(c->notify_cb, cb == Py_None ? NULL : Py_NewRef(cb));
	rma_notify_callback(c->rc, cb == Py_None ? NULL : notify_on_native, c);
	client_leave(c);
	Py_RETURN_NONE;
}

/* The next notification queued, None if none is, for notifications(). */
static PyObject *
client_notify_next(ClientObject *c, PyObject *unused)
{
	rma_notification_t n;
	int got;

	if (c->unget != NULL && PyList_GET_SIZE(c->unget) > 0) {
		PyObject *n = PyList_GetItem(c->unget, 0);

		Py_INCREF(n);
		if (PyList_SetSlice(c->unget, 0, 1, NULL) < 0) {
			Py_DECREF(n);
			return NULL;
		}
		return n;
	}
	if (!client_enter(c))
		return NULL;
	if (c->stashed) {
		got = c->stashed;
		n = c->stash;
		c->stashed = got < 0 ? got : 0;
	} else {
		got = rma_notify_next(c->rc, &n);
	}
	client_leave(c);
	if (got < 0)
		return error_raise(got, "the daemon closed the connection");
	if (got == 0)
		Py_RETURN_NONE;
	return notify_make(c, &n);
}

/* A future of the running loop that the next notification resolves, in
 * the loop's reader (or wherever progress runs next). */
static PyObject *
client_notify_wait(ClientObject *c, PyObject *unused)
{
	PyObject *loop, *fut;

	if (c->closed || c->rc == NULL)
		return error_closed();
	if ((loop = running_loop()) == NULL)
		return NULL;
	if (loop == Py_None) {
		Py_DECREF(loop);
		PyErr_SetString(PyExc_RuntimeError, "no running event loop");
		return NULL;
	}
	fut = PyObject_CallMethod(loop, "create_future", NULL);
	if (fut == NULL || !client_watch(c, loop)) {
		Py_DECREF(loop);
		Py_XDECREF(fut);
		return NULL;
	}
	Py_DECREF(loop);
	Py_XSETREF(c->notify_future, Py_NewRef(fut));
	return fut;
}

/* A notification the iterator's cancelled await did not take. */
static PyObject *
client_notify_unget(ClientObject *c, PyObject *n)
{
	if (c->unget == NULL && (c->unget = PyList_New(0)) == NULL)
		return NULL;
	if (PyList_Append(c->unget, n) < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *
client_notifications(ClientObject *c, PyObject *unused)
{
	return PyObject_CallOneArg(notify_iterate, (PyObject *)c);
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
		error_raise(st, detail);
		return -1;
	}
	c->lock = PyThread_allocate_lock();
	if (c->lock == NULL) {
		rma_disconnect(rc);
		PyErr_NoMemory();
		return -1;
	}
	c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE);
	if (c->wake_fd < 0) {
		PyThread_free_lock(c->lock);
		c->lock = NULL;
		rma_disconnect(rc);
		PyErr_SetFromErrno(PyExc_OSError);
		return -1;
	}
	c->rc = rc;
	c->fd = rma_fd(rc);
	c->done_tail = &c->done;
	c->fork_generation = fork_generation;
	return 0;
}

static int
client_traverse(ClientObject *c, visitproc visit, void *arg)
{
	Py_VISIT(c->loop);
	Py_VISIT(c->notify_cb);
	Py_VISIT(c->notify_future);
	Py_VISIT(c->unget);
	return 0;
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
			    resolve_threadsafe, fut, Py_None, Py_None, NULL);
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
	PyObject_GC_UnTrack(c);
	if (c->lock != NULL) {
		c->closed = 1;
		Py_CLEAR(c->loop); /* a dying client is no longer watched */
		if (c->rc != NULL) {
			/* nothing refers to us: no region views, no
			 * requests in flight */
			client_fork_adopt(c);
			PyThread_acquire_lock(c->lock, WAIT_LOCK);
			client_reap_dead(c);
			rma_disconnect(c->rc);
			c->rc = NULL;
			PyThread_release_lock(c->lock);
		}
		PyThread_free_lock(c->lock);
	}
	if (c->lock != NULL)
		close(c->wake_fd);
	PyMem_Free(c->dead);
	PyMem_Free(c->dead_remotes);
	free(c->nq);
	Py_CLEAR(c->notify_cb);
	Py_CLEAR(c->notify_future);
	Py_CLEAR(c->regions);
	Py_CLEAR(c->unget);
	Py_TYPE(c)->tp_free((PyObject *)c);
}

/* An offset, length, count or notification value: an int (or what has
 * __index__) from 0 to 2**64 - 1. Others raise OverflowError, negative
 * ones too, instead of wrapping ("K" masked: 2**64 + 8 was 8). An O&
 * converter. */
static int
u64_arg(PyObject *o, void *p)
{
	PyObject *i = PyNumber_Index(o);
	unsigned long long v;

	if (i == NULL)
		return 0;
	v = PyLong_AsUnsignedLongLong(i);
	if (v == (unsigned long long)-1 && PyErr_Occurred()) {
		if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
			PyErr_Clear();
			PyErr_Format(PyExc_OverflowError,
				     "%S is out of range: offsets, lengths "
				     "and values are 0 to 2**64 - 1",
				     i);
		}
		Py_DECREF(i);
		return 0;
	}
	Py_DECREF(i);
	*(unsigned long long *)p = v;
	return 1;
}

static PyObject *
client_alloc(ClientObject *c, PyObject *args)
{
	unsigned long long size;
	rma_region_t *rr;
	rma_status_t st;
	RegionObject *r;
	char detail[512];
	PyThreadState *ts;

	if (!PyArg_ParseTuple(args, "O&:alloc", u64_arg, &size))
		return NULL;
	if (size == 0)
		return error_raise(RMA_ERR_INVALID, "size must be positive");
	/* a Region's length is a Py_ssize_t (its buffer's) */
	if (size > PY_SSIZE_T_MAX)
		return PyErr_Format(PyExc_OverflowError,
				    "size %llu over a buffer's limit", size);
	if (!client_enter(c))
		return NULL;
	ts = PyEval_SaveThread();
	st = rma_region_alloc(c->rc, (size_t)size, &rr);
	PyEval_RestoreThread(ts);
	snprintf(detail, sizeof(detail), "%s", rma_last_error(c->rc));
	client_leave(c);
	if (st != RMA_OK)
		return error_raise(st, detail);
	r = PyObject_New(RegionObject, &RegionType);
	if (r == NULL) {
		/* ownership of rr stays with the client: freed at close */
		return NULL;
	}
	r->client = (ClientObject *)Py_NewRef(c);
	r->rr = rr;
	r->ptr = rma_region_ptr(rr);
	r->length = (Py_ssize_t)size;
	r->exports = 0;
	r->free_pending = 0;
	r->weakrefs = NULL;
	/* notifications name the region by its handle */
	if (c->regions == NULL && (c->regions = PyDict_New()) == NULL)
		PyErr_Clear();
	if (c->regions != NULL) {
		PyObject *key = PyLong_FromVoidPtr(rr),
			 *ref = PyWeakref_NewRef((PyObject *)r, NULL);

		if (key == NULL || ref == NULL ||
		    PyDict_SetItem(c->regions, key, ref) < 0)
			PyErr_Clear();
		Py_XDECREF(key);
		Py_XDECREF(ref);
	}
	return (PyObject *)r;
}

static PyObject *
client_peer(ClientObject *c, PyObject *args)
{
	const char *addr;
	rma_peer_t *rp;
	rma_status_t st;
	PeerObject *p;
	char detail[512];
	PyThreadState *ts;

	if (!PyArg_ParseTuple(args, "s:peer", &addr))
		return NULL;
	if (!client_enter(c))
		return NULL;
	ts = PyEval_SaveThread();
	st = rma_peer_connect(c->rc, addr, &rp);
	PyEval_RestoreThread(ts);
	snprintf(detail, sizeof(detail), "%s", rma_last_error(c->rc));
	client_leave(c);
	if (st != RMA_OK)
		return error_raise(st, detail);
	p = PyObject_New(PeerObject, &PeerType);
	if (p == NULL)
		return NULL;
	p->client = (ClientObject *)Py_NewRef(c);
	p->rp = rp;
	p->address = PyUnicode_FromString(addr);
	if (p->address == NULL) {
		Py_DECREF(p);
		return NULL;
	}
	return (PyObject *)p;
}

static PyObject *
client_import_remote(ClientObject *c, PyObject *args)
{
	PeerObject *p;
	const char *desc;
	rma_remote_t *rr;
	rma_status_t st;
	RemoteObject *r;
	char detail[512];
	PyThreadState *ts;

	if (!PyArg_ParseTuple(args, "O!s:import_remote", &PeerType, &p, &desc))
		return NULL;
	if (p->client != c)
		return error_raise(RMA_ERR_INVALID, "peer of another client");
	if (!client_enter(c))
		return NULL;
	ts = PyEval_SaveThread();
	st = rma_remote_import(c->rc, p->rp, desc, &rr);
	PyEval_RestoreThread(ts);
	snprintf(detail, sizeof(detail), "%s", rma_last_error(c->rc));
	client_leave(c);
	if (st != RMA_OK)
		return error_raise(st, detail);
	r = PyObject_New(RemoteObject, &RemoteType);
	if (r == NULL)
		return NULL;
	r->client = (ClientObject *)Py_NewRef(c);
	r->peer = (PeerObject *)Py_NewRef(p);
	r->rr = rr;
	return (PyObject *)r;
}

/* put and get share their arguments and submission. */
static PyObject *transfer_submit(ClientObject *c, RegionObject *reg,
				 unsigned long long off, RemoteObject *rem,
				 unsigned long long roff,
				 unsigned long long len, PyObject *cb,
				 PyObject *ud, int remote_completion,
				 int is_put, PyObject *notify);

static PyObject *
client_transfer(ClientObject *c, PyObject *args, PyObject *kw, int is_put)
{
	static char *kwlist[] = {
	    "region", "offset",	  "remote",    "remote_offset",
	    "length", "callback", "user_data", "remote_completion",
	    "notify", NULL};
	RegionObject *reg;
	RemoteObject *rem;
	unsigned long long off, roff, len;
	PyObject *cb = Py_None, *ud = Py_None;
	int remote_completion = 0;
	PyObject *notify = Py_None;

	if (!PyArg_ParseTupleAndKeywords(
		args, kw,
		is_put ? "O!O&O!O&O&|OO$pO:put" : "O!O&O!O&O&|OO$pO:get",
		kwlist, &RegionType, &reg, u64_arg, &off, &RemoteType, &rem,
		u64_arg, &roff, u64_arg, &len, &cb, &ud, &remote_completion,
		&notify))
		return NULL;
	if (!is_put && notify != Py_None) {
		PyErr_SetString(PyExc_TypeError,
				"get() got an unexpected keyword 'notify'");
		return NULL;
	}
	return transfer_submit(c, reg, off, rem, roff, len, cb, ud,
			       remote_completion, is_put,
			       notify == Py_None ? NULL : notify);
}

/* The submission of a parsed put or get. */
static PyObject *
transfer_submit(ClientObject *c, RegionObject *reg, unsigned long long off,
		RemoteObject *rem, unsigned long long roff,
		unsigned long long len, PyObject *cb, PyObject *ud,
		int remote_completion, int is_put, PyObject *notify)
{
	RequestObject *r;
	rma_status_t st;
	char detail[512];
	unsigned long long value = 0;

	if (notify != NULL && !u64_arg(notify, &value))
		return NULL;

	if (reg->client != c || rem->client != c)
		return error_raise(RMA_ERR_INVALID,
				   "region or remote of another client");
	if (!region_usable(reg))
		return NULL;
	if (rem->rr == NULL)
		return error_raise(RMA_ERR_NO_PEER, "remote released");
	r = request_new(c, cb, ud);
	if (r == NULL)
		return NULL;
	if (!client_enter(c))
		goto err_request;
	if (notify != NULL)
		st = rma_put_notify(
		    c->rc, reg->rr, off, rem->rr, roff, len, value,
		    remote_completion ? RMA_FLAG_REMOTE_COMPLETION : 0,
		    request_on_complete, r, &r->req);
	else if (is_put)
		st = rma_put(c->rc, reg->rr, off, rem->rr, roff, len,
			     remote_completion ? RMA_FLAG_REMOTE_COMPLETION : 0,
			     request_on_complete, r, &r->req);
	else
		st = rma_get(c->rc, reg->rr, off, rem->rr, roff, len,
			     request_on_complete, r, &r->req);
	if (st == RMA_OK)
		request_submitted(r);
	else
		snprintf(detail, sizeof(detail), "%s", rma_last_error(c->rc));
	client_leave(c);
	if (st != RMA_OK) {
		error_raise(st, detail);
		goto err_request;
	}
	return (PyObject *)r;

err_request:
	Py_DECREF(r);
	return NULL;
}

/* put and get are called once per operation: positional calls with
 * exact types skip the general parser; the rest go through it (with its
 * error messages). */
static PyObject *
client_transfer_fast(ClientObject *c, PyObject *const *args, Py_ssize_t nargs,
		     PyObject *kwnames, int is_put)
{
	PyObject *tuple, *kw = NULL, *res;
	unsigned long long off, roff, len;

	if (kwnames == NULL && nargs >= 5 && nargs <= 7 &&
	    Py_IS_TYPE(args[0], &RegionType) && PyLong_CheckExact(args[1]) &&
	    Py_IS_TYPE(args[2], &RemoteType) && PyLong_CheckExact(args[3]) &&
	    PyLong_CheckExact(args[4])) {
		/* as the general parser's u64_arg */
		if (!u64_arg(args[1], &off) || !u64_arg(args[3], &roff) ||
		    !u64_arg(args[4], &len))
			return NULL;
		return transfer_submit(
		    c, (RegionObject *)args[0], off, (RemoteObject *)args[2],
		    roff, len, nargs > 5 ? args[5] : Py_None,
		    nargs > 6 ? args[6] : Py_None, 0, is_put, NULL);
	}
	tuple = PyTuple_New(nargs);
	if (tuple == NULL)
		return NULL;
	for (Py_ssize_t i = 0; i < nargs; i++)
		PyTuple_SET_ITEM(tuple, i, Py_NewRef(args[i]));
	if (kwnames != NULL) {
		if ((kw = PyDict_New()) == NULL)
			goto out;
		for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++)
			if (PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, i),
					   args[nargs + i]) < 0)
				goto out;
	}
	res = client_transfer(c, tuple, kw, is_put);
	Py_DECREF(tuple);
	Py_XDECREF(kw);
	return res;

out:
	Py_DECREF(tuple);
	Py_XDECREF(kw);
	return NULL;
}

static PyObject *
client_put(ClientObject *c, PyObject *const *args, size_t nargsf,
	   PyObject *kwnames)
{
	return client_transfer_fast(c, args, PyVectorcall_NARGS(nargsf),
				    kwnames, 1);
}

static PyObject *
client_get(ClientObject *c, PyObject *const *args, size_t nargsf,
	   PyObject *kwnames)
{
	return client_transfer_fast(c, args, PyVectorcall_NARGS(nargsf),
				    kwnames, 0);
}

/* Atomic op names, as rma_atomic_op_t's (underscores work as dashes). */
static const struct {
	const char *name;
	rma_atomic_op_t op;
} atomic_ops[] = {
    {"add", RMA_ATOMIC_ADD},	       {"fetch-add", RMA_ATOMIC_FETCH_ADD},
    {"swap", RMA_ATOMIC_SWAP},	       {"cswap", RMA_ATOMIC_CSWAP},
    {"and", RMA_ATOMIC_AND},	       {"or", RMA_ATOMIC_OR},
    {"xor", RMA_ATOMIC_XOR},	       {"fetch-and", RMA_ATOMIC_FETCH_AND},
    {"fetch-or", RMA_ATOMIC_FETCH_OR}, {"fetch-xor", RMA_ATOMIC_FETCH_XOR},
};

static int
atomic_op_parse(const char *name, rma_atomic_op_t *op_p)
{
	char buf[16];
	size_t i;

	for (i = 0; name[i] != '\0' && i < sizeof(buf) - 1; i++)
		buf[i] = name[i] == '_' ? '-' : name[i];
	buf[i] = '\0';
	if (name[i] != '\0')
		return 0;
	for (i = 0; i < sizeof(atomic_ops) / sizeof(atomic_ops[0]); i++)
		if (strcmp(buf, atomic_ops[i].name) == 0) {
			*op_p = atomic_ops[i].op;
			return 1;
		}
	return 0;
}

/* A Python int as a 64-bit word: 0 to 2**64 - 1, or a negative one
 * down to -2**63 as its two's complement (add -1 works). What no word
 * holds raises OverflowError, never wraps. */
static int
word_from(PyObject *o, unsigned long long *w_p)
{
	unsigned long long u;
	long long v;
	int over;

	if (!PyLong_Check(o)) {
		PyErr_SetString(PyExc_TypeError, "atomic operands are ints");
		return 0;
	}
	v = PyLong_AsLongLongAndOverflow(o, &over);
	if (v == -1 && PyErr_Occurred())
		return 0;
	if (over == 0) {
		*w_p = (unsigned long long)v;
		return 1;
	}
	if (over > 0) {
		u = PyLong_AsUnsignedLongLong(o);
		if (!(u == (unsigned long long)-1 && PyErr_Occurred())) {
			*w_p = u;
			return 1;
		}
		if (!PyErr_ExceptionMatches(PyExc_OverflowError))
			return 0;
		PyErr_Clear();
	}
	PyErr_Format(PyExc_OverflowError,
		     "%S is out of range: atomic operands are -2**63 to "
		     "2**64 - 1",
		     o);
	return 0;
}

static PyObject *
client_atomic(ClientObject *c, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"remote",   "offset",	  "op",
				 "value",    "compare",	  "width",
				 "callback", "user_data", NULL};
	RemoteObject *rem;
	unsigned long long off, value, compare = 0;
	const char *opname;
	PyObject *vo, *co = Py_None, *cb = Py_None, *ud = Py_None;
	int width = 64;
	rma_atomic_op_t op;
	RequestObject *r;
	rma_status_t st;
	char detail[512];

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O&sO|OiOO:atomic", kwlist,
					 &RemoteType, &rem, u64_arg, &off,
					 &opname, &vo, &co, &width, &cb, &ud))
		return NULL;
	if (!atomic_op_parse(opname, &op))
		return error_raise(RMA_ERR_INVALID,
				   "unknown atomic op (add, fetch-add, swap, "
				   "cswap, and, or, xor, fetch-and, fetch-or, "
				   "fetch-xor)");
	if (width != 32 && width != 64)
		return error_raise(RMA_ERR_INVALID, "width must be 32 or 64");
	if (op == RMA_ATOMIC_CSWAP && co == Py_None)
		return error_raise(RMA_ERR_INVALID, "cswap needs compare");
	if (!word_from(vo, &value) ||
	    (co != Py_None && !word_from(co, &compare)))
		return NULL;
	if (rem->client != c)
		return error_raise(RMA_ERR_INVALID, "remote of another client");
	if (rem->rr == NULL)
		return error_raise(RMA_ERR_NO_PEER, "remote released");
	r = request_new(c, cb, ud);
	if (r == NULL)
		return NULL;
	r->is_atomic = 1;
	if (!client_enter(c))
		goto err_request;
	st = rma_atomic(c->rc, rem->rr, off, op, (unsigned)width / 8, value,
			compare, request_on_complete, r, &r->req);
	if (st == RMA_OK)
		request_submitted(r);
	else
		snprintf(detail, sizeof(detail), "%s", rma_last_error(c->rc));
	client_leave(c);
	if (st != RMA_OK) {
		error_raise(st, detail);
		goto err_request;
	}
	return (PyObject *)r;

err_request:
	Py_DECREF(r);
	return NULL;
}

/* putv and getv: a list of (offset, remote_offset, length). */
static PyObject *
client_vector(ClientObject *c, PyObject *args, PyObject *kw, int is_put)
{
	static char *kwlist[] = {"region",   "remote",	  "pieces",
				 "callback", "user_data", "remote_completion",
				 NULL};
	RegionObject *reg;
	RemoteObject *rem;
	PyObject *pieces, *seq = NULL, *cb = Py_None, *ud = Py_None;
	int remote_completion = 0;
	rma_iov_t *iov = NULL;
	Py_ssize_t n;
	RequestObject *r = NULL;
	rma_status_t st;
	char detail[512];

	if (!PyArg_ParseTupleAndKeywords(
		args, kw, is_put ? "O!O!O|OO$p:putv" : "O!O!O|OO:getv", kwlist,
		&RegionType, &reg, &RemoteType, &rem, &pieces, &cb, &ud,
		&remote_completion))
		return NULL;
	if (reg->client != c || rem->client != c)
		return error_raise(RMA_ERR_INVALID,
				   "region or remote of another client");
	if (!region_usable(reg))
		return NULL;
	if (rem->rr == NULL)
		return error_raise(RMA_ERR_NO_PEER, "remote released");
	seq = PySequence_Fast(pieces, "pieces must be a sequence of "
				      "(offset, remote_offset, length)");
	if (seq == NULL)
		return NULL;
	n = PySequence_Fast_GET_SIZE(seq);
	if (n == 0 || n > RMA_IOV_MAX) {
		error_raise(RMA_ERR_INVALID, "1 to 1024 pieces");
		goto out;
	}
	iov = PyMem_Malloc((size_t)n * sizeof(*iov));
	if (iov == NULL) {
		PyErr_NoMemory();
		goto out;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		unsigned long long o, ro, l;

		if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i),
				      "O&O&O&;a piece is (offset, "
				      "remote_offset, length)",
				      u64_arg, &o, u64_arg, &ro, u64_arg, &l))
			goto out;
		iov[i] = (rma_iov_t){o, ro, l};
	}
	r = request_new(c, cb, ud);
	if (r == NULL)
		goto out;
	if (!client_enter(c))
		goto err_request;
	if (is_put)
		st =
		    rma_putv(c->rc, reg->rr, rem->rr, iov, (size_t)n,
			     remote_completion ? RMA_FLAG_REMOTE_COMPLETION : 0,
			     request_on_complete, r, &r->req);
	else
		st = rma_getv(c->rc, reg->rr, rem->rr, iov, (size_t)n,
			      request_on_complete, r, &r->req);
	if (st == RMA_OK)
		request_submitted(r);
	else
		snprintf(detail, sizeof(detail), "%s", rma_last_error(c->rc));
	client_leave(c);
	if (st != RMA_OK) {
		error_raise(st, detail);
		goto err_request;
	}
	goto out;

err_request:
	Py_CLEAR(r);
out:
	PyMem_Free(iov);
	Py_XDECREF(seq);
	return (PyObject *)r;
}

static PyObject *
client_putv(ClientObject *c, PyObject *args, PyObject *kw)
{
	return client_vector(c, args, kw, 1);
}

static PyObject *
client_getv(ClientObject *c, PyObject *args, PyObject *kw)
{
	return client_vector(c, args, kw, 0);
}

static PyObject *
client_flush(ClientObject *c, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"peer", "callback", "user_data", NULL};
	PyObject *peer = Py_None, *cb = Py_None, *ud = Py_None;
	RequestObject *r;
	rma_status_t st;
	char detail[512];

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOO:flush", kwlist, &peer,
					 &cb, &ud))
		return NULL;
	if (peer != Py_None && (!PyObject_TypeCheck(peer, &PeerType) ||
				((PeerObject *)peer)->client != c)) {
		PyErr_SetString(PyExc_TypeError,
				"peer must be None or a Peer of this client");
		return NULL;
	}
	r = request_new(c, cb, ud);
	if (r == NULL)
		return NULL;
	if (!client_enter(c))
		goto err_request;
	st = rma_flush(c->rc, peer == Py_None ? NULL : ((PeerObject *)peer)->rp,
		       request_on_complete, r, &r->req);
	if (st == RMA_OK)
		request_submitted(r);
	else
		snprintf(detail, sizeof(detail), "%s", rma_last_error(c->rc));
	client_leave(c);
	if (st != RMA_OK) {
		error_raise(st, detail);
		goto err_request;
	}
	return (PyObject *)r;

err_request:
	Py_DECREF(r);
	return NULL;
}

static PyObject *
client_progress(ClientObject *c, PyObject *unused)
{
	int gone;

	if (!client_progress_once(c, &gone))
		return NULL;
	if (gone)
		return error_raise(RMA_ERR_DAEMON_GONE,
				   "the daemon closed the connection");
	Py_RETURN_NONE;
}

/* The loop's reader: progress, and stop watching a dead connection
 * (its fd would stay readable forever). */
static PyObject *
client_on_readable(ClientObject *c, PyObject *unused)
{
	int gone, ok, saved = waiter_direct_ok;

	if (c->closed || c->rc == NULL) {
		client_unwatch(c);
		Py_RETURN_NONE;
	}
	/* the loop runs this reader as a Handle: no Task is running */
	waiter_direct_ok = 1;
	ok = client_progress_once(c, &gone);
	waiter_direct_ok = saved;
	if (!ok)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *
client_fileno(ClientObject *c, PyObject *unused)
{
	if (c->closed || c->rc == NULL)
		return error_closed();
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
     "put($self, /, region, offset, remote, remote_offset, length, "
     "callback=None, user_data=None, *, remote_completion=False, "
     "notify=None)\n--\n\nStart a put of length bytes at offset of "
     "region to remote_offset of remote; callback(request, status, "
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
     "get($self, /, region, offset, remote, remote_offset, length, "
     "callback=None, user_data=None)\n--\n\nStart a get of length bytes "
     "at remote_offset of remote into offset of region, as put() (no "
     "notify)."},
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

static PyTypeObject ClientType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rma.Client",
    .tp_basicsize = sizeof(ClientObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Client(socket=None, timeout=5.0)\n--\n\nA connection to the "
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
	      "in the child.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)client_init,
    .tp_dealloc = (destructor)client_dealloc,
    .tp_traverse = (traverseproc)client_traverse,
    .tp_methods = client_methods,
    .tp_getset = client_getset,
};

/* ---- module ---- */

static PyObject *
mod_default_socket(PyObject *m, PyObject *unused)
{
	return PyUnicode_DecodeFSDefault(rma_default_socket());
}

static PyObject *
mod_strerror(PyObject *m, PyObject *args)
{
	int st;

	if (!PyArg_ParseTuple(args, "i:strerror", &st))
		return NULL;
	return PyUnicode_FromString(rma_strerror((rma_status_t)st));
}

static PyMethodDef mod_methods[] = {
    {"default_socket", mod_default_socket, METH_NOARGS,
     "default_socket()\n--\n\nThe socket librma connects to by "
     "default."},
    {"strerror", mod_strerror, METH_VARARGS,
     "strerror(status, /)\n--\n\nThe phrase for a status (\"timed out\")."},
    {NULL}};

static struct PyModuleDef rma_module = {
    PyModuleDef_HEAD_INIT, .m_name = "rma._rma",
    .m_doc = "The C part of the rma package.", .m_size = -1,
    .m_methods = mod_methods};

static int
mod_add_type(PyObject *m, PyTypeObject *t, const char *name)
{
	if (PyType_Ready(t) < 0)
		return -1;
	Py_INCREF(t);
	if (PyModule_AddObject(m, name, (PyObject *)t) < 0) {
		Py_DECREF(t);
		return -1;
	}
	return 0;
}

PyMODINIT_FUNC
PyInit__rma(void)
{
	PyObject *m, *mod;

	m = PyModule_Create(&rma_module);
	if (m == NULL)
		return NULL;
	/* without it a child is not told; the parent is fine */
	(void)pthread_atfork(NULL, NULL, fork_child);
	if (mod_add_type(m, &ClientType, "Client") < 0 ||
	    mod_add_type(m, &RegionType, "Region") < 0 ||
	    mod_add_type(m, &PeerType, "Peer") < 0 ||
	    mod_add_type(m, &RemoteType, "Remote") < 0 ||
	    mod_add_type(m, &RequestType, "Request") < 0 ||
	    mod_add_type(m, &WaiterType, "_Waiter") < 0)
		goto err;
	if ((mod = PyImport_ImportModule("rma.errors")) == NULL)
		goto err;
	errors_make = PyObject_GetAttrString(mod, "_make");
	errors_closed = PyObject_GetAttrString(mod, "ClientClosed");
	Py_DECREF(mod);
	if ((mod = PyImport_ImportModule("asyncio")) == NULL)
		goto err;
	get_running_loop = PyObject_GetAttrString(mod, "_get_running_loop");
	future_type = PyObject_GetAttrString(mod, "Future");
	future_set_result =
	    future_type ? PyObject_GetAttrString(future_type, "set_result")
			: NULL;
	{
		PyObject *bel = PyObject_GetAttrString(mod, "BaseEventLoop");

		stock_create_future =
		    bel ? PyObject_GetAttrString(bel, "create_future") : NULL;
		Py_XDECREF(bel);
	}
	kwnames_loop = Py_BuildValue("(s)", "loop");
	kwnames_context = Py_BuildValue("(s)", "context");
	cancelled_error = PyObject_GetAttrString(mod, "CancelledError");
	str_call_soon = PyUnicode_InternFromString("call_soon");
	str_call_soon_threadsafe =
	    PyUnicode_InternFromString("call_soon_threadsafe");
	invalid_state = PyObject_GetAttrString(mod, "InvalidStateError");
	Py_DECREF(mod);
	str_set_result = PyUnicode_InternFromString("set_result");
	str_set_exception = PyUnicode_InternFromString("set_exception");
	str_create_future = PyUnicode_InternFromString("create_future");
	str_await = PyUnicode_InternFromString("__await__");
	NotificationType = PyStructSequence_NewType(&notification_desc);
	if (NotificationType == NULL ||
	    PyModule_AddObjectRef(m, "Notification",
				  (PyObject *)NotificationType) < 0)
		goto err;
	if ((mod = PyImport_ImportModule("rma._resolve")) == NULL)
		goto err;
	resolve_threadsafe = PyObject_GetAttrString(mod, "resolve_threadsafe");
	notify_iterate = PyObject_GetAttrString(mod, "notifications");
	notify_deliver = PyObject_GetAttrString(mod, "notify_deliver");
	Py_DECREF(mod);
	if (errors_make == NULL || errors_closed == NULL ||
	    get_running_loop == NULL || resolve_threadsafe == NULL ||
	    notify_iterate == NULL || notify_deliver == NULL ||
	    invalid_state == NULL || str_set_result == NULL ||
	    str_set_exception == NULL || str_create_future == NULL ||
	    str_await == NULL || future_type == NULL ||
	    future_set_result == NULL || stock_create_future == NULL ||
	    kwnames_loop == NULL || kwnames_context == NULL ||
	    cancelled_error == NULL || str_call_soon == NULL ||
	    str_call_soon_threadsafe == NULL)
		goto err;
	for (int st = RMA_ERR_RESTARTED; st <= RMA_INPROGRESS; st++)
		if (PyModule_AddIntConstant(m, status_name(st), st) < 0)
			goto err;
	return m;

err:
	Py_DECREF(m);
	return NULL;
}
