/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rma.Request: one operation, from its submission (request_new,
 * request_submitted) through librma's native completion
 * (request_on_complete) to its finish with the GIL (request_finish: the
 * callback, the future, the waiter of an await). Awaits go through a
 * _Waiter (_rma_waiter.c), resolved in the loop's reader.
 */
#include "_rma.h"

#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Native completion callback; no Python here (see the file comment). */
void
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

/* ---- Request ---- */

static int
request_traverse(RequestObject *r, visitproc visit, void *arg)
{
	Py_VISIT(Py_TYPE(r));
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
	PyTypeObject *tp = Py_TYPE(r);

	PyObject_GC_UnTrack(r);
	if (r->weakrefs != NULL)
		PyObject_ClearWeakRefs((PyObject *)r);
	request_clear(r);
	/* never submitted, or a fork()'s child: librma is not using it */
	request_release_view(r);
	Py_CLEAR(r->client);
	free(r->detail);
	free(r->n_detail);
	if (!pool_give(&((rma_state *)PyType_GetModuleState(tp))->request_pool,
		       (PyObject *)r))
		tp->tp_free((PyObject *)r);
	Py_DECREF(tp);
}

static PyObject *
request_error(RequestObject *r)
{
	if (!r->finished || r->status == RMA_OK)
		Py_RETURN_NONE;
	return error_new(r->client->state, r->status, r->detail);
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
	rma_state *st = r->client->state;

	if (fut == NULL)
		return;
	if (r->status != RMA_OK && (exc = request_error(r)) == NULL)
		goto report;
	if ((running = running_loop(st)) == NULL)
		goto report;
	if (running == r->loop) {
		PyObject *val = request_result(r);

		if (val == NULL)
			res = NULL;
		else if (exc != NULL)
			res = PyObject_CallMethodOneArg(
			    fut, st->str_set_exception, exc);
		else if (Py_TYPE(fut) == (PyTypeObject *)st->future_type)
			res = PyObject_Vectorcall(st->future_set_result,
						  (PyObject *[]){fut, val}, 2,
						  NULL);
		else
			res = PyObject_CallMethodOneArg(fut, st->str_set_result,
							val);
		Py_XDECREF(val);
		/* a cancelled future keeps its cancellation */
		if (res == NULL && PyErr_ExceptionMatches(st->invalid_state)) {
			PyErr_Clear();
			res = Py_NewRef(Py_None);
		}
	} else {
		PyObject *val = request_result(r);

		res = val == NULL ? NULL
				  : PyObject_CallFunctionObjArgs(
					st->resolve_threadsafe, fut,
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
	if ((running = running_loop(r->client->state)) == NULL) {
		Py_DECREF(val);
		goto report;
	}
	waiter_complete(w, val, exc, running,
			w->loop == r->client->loop ? r->client->loop_ok : NULL);
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

/* Once per request: records the outcome, runs the callback, resolves the
 * future. Takes @p detail (malloc'd). */
void
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
			callback_report(c, cb,
					"exception in an rma request callback",
					"request", (PyObject *)r);
		Py_XDECREF(res);
	}
	Py_XDECREF(cb);
	Py_XDECREF(ud);
	request_resolve(r);
	request_resolve_waiter(r);
}

void
request_release_view(RequestObject *r)
{
	if (r->has_view) {
		r->has_view = 0;
		PyBuffer_Release(&r->view);
	}
}

RequestObject *
request_new(ClientObject *c, PyObject *callback, PyObject *user_data)
{
	RequestObject *r;

	if (callback != NULL && callback != Py_None &&
	    !PyCallable_Check(callback)) {
		PyErr_SetString(PyExc_TypeError, "callback must be callable");
		return NULL;
	}
	r = (RequestObject *)pool_take(&c->state->request_pool,
				       c->state->request_type);
	if (r == NULL)
		r = PyObject_GC_New(RequestObject, c->state->request_type);
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
	r->has_view = 0;
	PyObject_GC_Track(r);
	return r;
}

/* After a successful submit: librma owns one reference until the
 * completion has been handled (client_leave). */
void
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
				error_raise(c->state, RMA_ERR_TIMEOUT,
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
		return error_raise(c->state, RMA_ERR_DAEMON_GONE,
				   "client closed");
	if (r->status != RMA_OK)
		return error_raise(c->state, r->status, r->detail);
	Py_RETURN_NONE;

err:
	c->waiters--;
	return NULL;
}

/* loop.create_future(), without the Python-level call when the loop's
 * is asyncio's own (which returns Future(loop=self)). */
static PyObject *
loop_create_future(rma_state *st, PyObject *loop)
{
	PyObject *type = (PyObject *)Py_TYPE(loop), *m;

	if (type != st->loop_type_seen) {
		m = PyObject_GetAttr(type, st->str_create_future);
		if (m == NULL)
			return NULL;
		st->loop_type_stock = m == st->stock_create_future;
		Py_DECREF(m);
		Py_XSETREF(st->loop_type_seen, Py_NewRef(type));
	}
	if (st->loop_type_stock)
		return PyObject_Vectorcall(st->future_type, &loop, 0,
					   st->kwnames_loop);
	return PyObject_CallMethodNoArgs(loop, st->str_create_future);
}

static PyObject *
request_future(RequestObject *r, PyObject *unused)
{
	PyObject *loop, *fut;

	if (r->future != NULL)
		return Py_NewRef(r->future);
	loop = PyObject_CallNoArgs(r->client->state->get_running_loop);
	if (loop == NULL)
		return NULL;
	if (loop == Py_None) {
		Py_DECREF(loop);
		PyErr_SetString(PyExc_RuntimeError,
				"Request.future() needs a running event loop");
		return NULL;
	}
	fut = loop_create_future(r->client->state, loop);
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

/* The running loop of this thread, as asyncio._get_running_loop() gives
 * it, without the getpid() that CPython 3.11's makes on every call (a
 * system call: 0.4-0.9 us on this VM, as much as the rest of an awaited
 * 8-byte put). The client's loop is this thread's running loop while it
 * runs in this thread (asyncio's loops set _thread_id for as long as
 * run_forever runs, and one thread runs one loop at a time) and no fork
 * came since it was set (what the pid check is for). Anything else, a
 * loop without _thread_id included, asks asyncio. */
static PyObject *
request_running_loop(rma_state *st, ClientObject *c)
{
	PyObject *tid;
	int here;

	/* in the loop's reader (a Task woken there awaits its next
	 * request): the loop that runs it, known already */
	if (rma_leave_running != NULL)
		return Py_NewRef(rma_leave_running);
	if (c->loop == NULL || c->loop_generation != rma_fork_generation)
		return PyObject_CallNoArgs(st->get_running_loop);
	tid = PyObject_GetAttr(c->loop, st->str_thread_id);
	if (tid == NULL) {
		PyErr_Clear();
		return PyObject_CallNoArgs(st->get_running_loop);
	}
	here = PyLong_Check(tid) &&
	       PyLong_AsUnsignedLong(tid) == PyThread_get_thread_ident();
	Py_DECREF(tid);
	if (!here) {
		PyErr_Clear(); /* an int out of range is simply not ours */
		return PyObject_CallNoArgs(st->get_running_loop);
	}
	return Py_NewRef(c->loop);
}

static PyObject *
request_await(RequestObject *r)
{
	rma_state *st = r->client->state;
	PyObject *fut, *it, *loop;
	WaiterObject *w;

	/* The usual await: a pending request awaited once, no future asked
	 * for. Others (a second await, a completed request, future() used)
	 * go through the asyncio.Future. */
	if (r->future == NULL && r->waiter == NULL && !r->finished &&
	    r->client->rc != NULL && !r->client->closed) {
		loop = request_running_loop(st, r->client);
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
		w = waiter_new(
		    st, loop,
		    r->client->loop == loop ? r->client->loop_get_loop : NULL);
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
		it = PyObject_CallMethodNoArgs(fut, st->str_await);
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

/* The type has no __weakref__ slot but takes weak references:
 * PyType_FromSpec's way to set tp_weaklistoffset on 3.10. */
static PyMemberDef request_members[] = {{"__weaklistoffset__", T_PYSSIZET,
					 offsetof(RequestObject, weakrefs),
					 READONLY, NULL},
					{NULL}};

static PyType_Slot request_slots[] = {
    {Py_tp_doc, "One put, get, flush, atomic or vectored transfer. "
		"Awaitable: `await request` returns when it completes (an "
		"atomic's old value, else None) and raises its error if it "
		"failed. Cancelling an await (asyncio.wait_for() timing out, "
		"task.cancel()) cancels the await, not the operation: it runs "
		"on and completes as it would have (a put's bytes land); "
		"cancel() asks the daemon to take it back."},
    {Py_tp_dealloc, request_dealloc},
    {Py_tp_traverse, request_traverse},
    {Py_tp_clear, request_clear},
    {Py_tp_repr, request_repr},
    {Py_am_await, request_await},
    {Py_tp_methods, request_methods},
    {Py_tp_getset, request_getset},
    {Py_tp_members, request_members},
    {0, NULL}};

PyType_Spec request_spec = {
    .name = "rma.Request",
    .basicsize = sizeof(RequestObject),
    .flags = RMA_TPFLAGS | Py_TPFLAGS_HAVE_GC,
    .slots = request_slots,
};
