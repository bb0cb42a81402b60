/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rma._Waiter: what `await request` yields to its Task.
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
 * Request.future() still gives a real asyncio.Future.
 *
 * What a Task does with a Waiter per await is kept cheap: its
 * attributes _asyncio_future_blocking, get_loop and add_done_callback
 * are answered without the generic lookup (waiter_getattro; the last is
 * the waiter itself, whose call adds a done callback, so that no bound
 * method is made per await), and a successful await's Task
 * wakeup is handed the client's finished Future (Client.loop_ok), whose
 * result the C Task reads in C, instead of the waiter, whose result()
 * it would call by name (waiter_run). */

#include "_rma.h"

#include <string.h>

__thread int waiter_direct_ok;

static PyObject *waiter_add_done_callback(WaiterObject *w,
					  PyObject *const *args, size_t nargsf,
					  PyObject *kwnames);

/* A waiter called is its add_done_callback (see waiter_getattro). */
static PyObject *
waiter_call(PyObject *w, PyObject *const *args, size_t nargsf,
	    PyObject *kwnames)
{
	return waiter_add_done_callback((WaiterObject *)w, args, nargsf,
					kwnames);
}

/* @p get_loop: what w.get_loop is to give (a callable returning loop,
 * made once per client and loop: see waiter_getattro), or NULL. */
WaiterObject *
waiter_new(rma_state *st, PyObject *loop, PyObject *get_loop)
{
	WaiterObject *w =
	    (WaiterObject *)pool_take(&st->waiter_pool, st->waiter_type);

	if (w == NULL)
		w = PyObject_GC_New(WaiterObject, st->waiter_type);
	if (w == NULL)
		return NULL;
	w->st = st;
	w->add_call = waiter_call;
	w->loop = Py_NewRef(loop);
	w->result = w->exception = w->cancel_msg = NULL;
	w->cb0 = w->ctx0 = w->more = NULL;
	w->get_loop = Py_XNewRef(get_loop);
	w->state = WAITER_PENDING;
	w->blocking = w->yielded = 0;
	PyObject_GC_Track(w);
	return w;
}

static int
waiter_traverse(WaiterObject *w, visitproc visit, void *arg)
{
	Py_VISIT(Py_TYPE(w));
	Py_VISIT(w->loop);
	Py_VISIT(w->result);
	Py_VISIT(w->exception);
	Py_VISIT(w->cancel_msg);
	Py_VISIT(w->cb0);
	Py_VISIT(w->ctx0);
	Py_VISIT(w->more);
	Py_VISIT(w->get_loop);
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
	Py_CLEAR(w->get_loop);
	return 0;
}

static void
waiter_dealloc(WaiterObject *w)
{
	PyTypeObject *tp = Py_TYPE(w);

	PyObject_GC_UnTrack(w);
	waiter_clear(w);
	if (!pool_give(&w->st->waiter_pool, (PyObject *)w))
		tp->tp_free((PyObject *)w);
	Py_DECREF(tp);
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
	    threadsafe ? w->st->str_call_soon_threadsafe : w->st->str_call_soon,
	    args, 3,
	    ctx != NULL && ctx != Py_None ? w->st->kwnames_context : NULL);
	if (res == NULL)
		return loop_closed_clear(w->loop) ? 0 : -1;
	Py_DECREF(res);
	return 0;
}

/* Whether fn is an asyncio Task's wakeup (the C Task's task_wakeup,
 * bound to its Task), which only asks the future it is given for its
 * outcome (result(), or the exception to throw in) and steps the Task. */
static int
waiter_is_task_wakeup(WaiterObject *w, PyObject *fn)
{
	PyCFunctionObject *f = (PyCFunctionObject *)fn;

	if (!PyCFunction_CheckExact(fn) || f->m_self == NULL)
		return 0;
	if (f->m_ml == w->st->task_wakeup_def)
		return 1;
	if (!PyObject_TypeCheck(f->m_self, w->st->task_type) ||
	    strcmp(f->m_ml->ml_name, "task_wakeup") != 0)
		return 0;
	w->st->task_wakeup_def = f->m_ml; /* _asyncio's: lives as long */
	return 1;
}

/* fn(w) in ctx, now: only while waiter_direct_ok. A Task's wakeup of a
 * successful await gets @p ok instead (when not NULL): a finished
 * asyncio.Future with the same outcome (None; what the await returns
 * comes from w, in waiter_iternext), whose result the C Task reads
 * directly where it would call w.result() through a method lookup by a
 * C string. */
static void
waiter_run(WaiterObject *w, PyObject *fn, PyObject *ctx, PyObject *ok)
{
	PyObject *res, *arg = (PyObject *)w;
	int entered = ctx != NULL && ctx != Py_None;

	if (ok != NULL && w->exception == NULL && w->state == WAITER_DONE &&
	    waiter_is_task_wakeup(w, fn))
		arg = ok;

	if (entered && PyContext_Enter(ctx) < 0) {
		/* that context is running already: take the loop's way */
		PyErr_Clear();
		if (waiter_schedule(w, fn, ctx, 0) < 0)
			PyErr_WriteUnraisable(fn);
		return;
	}
	waiter_direct_ok = 0; /* a Task runs now */
	res = PyObject_CallOneArg(fn, arg);
	waiter_direct_ok = 1;
	if (res == NULL)
		PyErr_WriteUnraisable(fn);
	Py_XDECREF(res);
	if (entered && PyContext_Exit(ctx) < 0)
		PyErr_WriteUnraisable(fn);
}

/* Runs or schedules the callbacks once the state is final (@p ok: see
 * waiter_run). */
static void
waiter_fire(WaiterObject *w, int direct, int threadsafe, PyObject *ok)
{
	PyObject *fn = w->cb0, *ctx = w->ctx0, *more = w->more;

	w->cb0 = w->ctx0 = w->more = NULL;
	/* keep w alive through the callbacks */
	Py_INCREF(w);
	if (fn != NULL) {
		if (direct)
			waiter_run(w, fn, ctx, ok);
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
				waiter_run(w, f, cx, ok);
			else if (waiter_schedule(w, f, cx, threadsafe) < 0)
				PyErr_WriteUnraisable(f);
		}
		Py_DECREF(more);
	}
	Py_DECREF(w);
}

/* The request's outcome: steals neither reference. @p ok: a finished
 * asyncio.Future on w's loop with the result None, or NULL (see
 * waiter_run). */
void
waiter_complete(WaiterObject *w, PyObject *value, PyObject *exc,
		PyObject *running, PyObject *ok)
{
	int same = running == w->loop;

	if (w->state != WAITER_PENDING)
		return; /* cancelled meanwhile */
	w->state = WAITER_DONE;
	w->result = Py_NewRef(value);
	w->exception = exc ? Py_NewRef(exc) : NULL;
	waiter_fire(w, same && waiter_direct_ok, !same, ok);
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

	if (nargs != 1 ||
	    (kwnames != NULL && kwnames != w->st->kwnames_context_seen &&
	     (PyTuple_GET_SIZE(kwnames) != 1 ||
	      (PyTuple_GET_ITEM(kwnames, 0) !=
		   PyTuple_GET_ITEM(w->st->kwnames_context, 0) &&
	       PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0),
						"context") != 0)))) {
		PyErr_SetString(PyExc_TypeError,
				"add_done_callback(fn, *, context=None)");
		return NULL;
	}
	fn = args[0];
	if (kwnames != NULL) {
		ctx = args[1];
		/* the next call (a Task's) brings the same tuple */
		if (kwnames != w->st->kwnames_context_seen)
			Py_XSETREF(w->st->kwnames_context_seen,
				   Py_NewRef(kwnames));
	}
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
	waiter_fire(w, 0, 0, NULL);
	Py_RETURN_TRUE;
}

static PyObject *
waiter_cancelled_exc(WaiterObject *w)
{
	return w->cancel_msg != NULL && w->cancel_msg != Py_None
		   ? PyObject_CallOneArg(w->st->cancelled_error, w->cancel_msg)
		   : PyObject_CallNoArgs(w->st->cancelled_error);
}

static PyObject *
waiter_result(WaiterObject *w, PyObject *unused)
{
	PyObject *exc;

	if (w->state == WAITER_PENDING) {
		PyErr_SetString(w->st->invalid_state, "Result is not set.");
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

/* The await: yield the waiter once to the Task, then give the result.
 * am_send, which the coroutine's await calls (PyIter_Send), returns the
 * result as it is; tp_iternext, for the others, raises StopIteration
 * with it. */
static PySendResult
waiter_send(WaiterObject *w, PyObject *arg, PyObject **result)
{
	if (w->state == WAITER_PENDING) {
		if (w->yielded) {
			PyErr_SetString(PyExc_RuntimeError,
					"await wasn't used with future");
			*result = NULL;
			return PYGEN_ERROR;
		}
		w->yielded = 1;
		w->blocking = 1;
		*result = Py_NewRef(w);
		return PYGEN_NEXT;
	}
	*result = waiter_result(w, NULL);
	return *result != NULL ? PYGEN_RETURN : PYGEN_ERROR;
}

static PyObject *
waiter_iternext(WaiterObject *w)
{
	PyObject *res;

	switch (waiter_send(w, Py_None, &res)) {
	case PYGEN_NEXT:
		return res;
	case PYGEN_RETURN:
		if (res != Py_None)
			PyErr_SetObject(PyExc_StopIteration, res);
		Py_DECREF(res);
		return NULL;
	default:
		return NULL;
	}
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

/* What a Task reads and writes of the object its coroutine yielded
 * (_asyncio_future_blocking, get_loop, add_done_callback), without the
 * generic lookup (the type's dict, then the descriptor) and, for
 * get_loop, without a bound method made and freed per await. */
static PyObject *
waiter_getattro(WaiterObject *w, PyObject *name)
{
	if (name == w->st->str_blocking)
		return PyBool_FromLong(w->blocking);
	if (name == w->st->str_get_loop && w->get_loop != NULL)
		return Py_NewRef(w->get_loop);
	/* The Task looks this up and calls it once per await: the waiter
	 * itself, callable as add_done_callback, where a bound method made
	 * and freed each time was 190 of the 5450 instructions of an
	 * awaited 8-byte put. */
	if (name == w->st->str_add_done_callback)
		return Py_NewRef(w);
	return PyObject_GenericGetAttr((PyObject *)w, name);
}

static int
waiter_setattro(WaiterObject *w, PyObject *name, PyObject *v)
{
	if (name == w->st->str_blocking && v != NULL)
		return waiter_set_blocking(w, v, NULL);
	return PyObject_GenericSetAttr((PyObject *)w, name, v);
}

static PyGetSetDef waiter_getset[] = {{"_asyncio_future_blocking",
				       (getter)waiter_get_blocking,
				       (setter)waiter_set_blocking, NULL, NULL},
				      {NULL}};

static PyMemberDef waiter_members[] = {{"__vectorcalloffset__", T_PYSSIZET,
					offsetof(WaiterObject, add_call),
					READONLY, NULL},
				       {NULL}};

static PyType_Slot waiter_slots[] = {
    {Py_tp_doc, "What awaiting a Request yields to its asyncio Task."},
    {Py_tp_dealloc, waiter_dealloc},
    {Py_tp_traverse, waiter_traverse},
    {Py_tp_clear, waiter_clear},
    {Py_tp_repr, waiter_repr},
    {Py_tp_getattro, waiter_getattro},
    {Py_tp_setattro, waiter_setattro},
    {Py_tp_iter, PyObject_SelfIter},
    {Py_tp_iternext, waiter_iternext},
    {Py_am_send, waiter_send},
    {Py_tp_methods, waiter_methods},
    {Py_tp_getset, waiter_getset},
    {Py_tp_members, waiter_members},
    {Py_tp_call, PyVectorcall_Call},
    {0, NULL}};

PyType_Spec waiter_spec = {
    .name = "rma._Waiter",
    .basicsize = sizeof(WaiterObject),
    .flags = RMA_TPFLAGS | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .slots = waiter_slots,
};
