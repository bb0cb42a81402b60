/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rma.Notification and a client's notifications: queued natively
 * (notify_on_native), handed to the callback or to the notifications()
 * iterator by client_leave (notify_dispatch). The iterator itself is
 * Python (rma._resolve.notifications).
 */
#include "_rma.h"

#include <stdlib.h>
#include <string.h>

static PyStructSequence_Field notification_fields[] = {
    {"region", "the Region written (None if freed or not known here)"},
    {"offset", "where in it"},
    {"length", "bytes written"},
    {"value", "the initiator's notify value"},
    {"sender", "the initiating daemon's id (hex)"},
    {NULL, NULL}};

PyStructSequence_Desc notification_desc = {
    "rma.Notification",
    "What a notifying put (put(..., notify=value)) wrote into a region "
    "of this client.",
    notification_fields, 5};

/* Native notification callback; no Python here (see the file comment):
 * queued for client_leave. */
void
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
	PyObject *o = PyStructSequence_New(c->state->notification_type),
		 *region = NULL;

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

/* Gives the awaiting iterator its notification (@p val) or failure
 * (@p exc): directly in the future's loop, which checked that the future
 * is pending; from another thread through the loop, where a future
 * cancelled meanwhile hands the notification back (_notify_unget) so
 * that none is lost. */
static void
notify_hand(ClientObject *c, PyObject *fut, PyObject *exc, PyObject *val)
{
	rma_state *st = c->state;
	PyObject *running = running_loop(st), *res;

	if (running != NULL && running == c->loop)
		res = exc ? PyObject_CallMethodOneArg(
				fut, st->str_set_exception, exc)
			  : PyObject_CallMethodOneArg(fut, st->str_set_result,
						      val);
	else
		res = PyObject_CallFunctionObjArgs(st->notify_deliver, c, fut,
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
void
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
			callback_report(c, cb,
					"exception in an rma notification "
					"callback",
					"notification", n);
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
				    c->state, c->stashed,
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

PyObject *
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
PyObject *
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
		return error_raise(c->state, got,
				   "the daemon closed the connection");
	if (got == 0)
		Py_RETURN_NONE;
	return notify_make(c, &n);
}

/* A future of the running loop that the next notification resolves, in
 * the loop's reader (or wherever progress runs next). */
PyObject *
client_notify_wait(ClientObject *c, PyObject *unused)
{
	PyObject *loop, *fut;

	if (c->closed || c->rc == NULL)
		return error_closed(c->state);
	if ((loop = running_loop(c->state)) == NULL)
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
PyObject *
client_notify_unget(ClientObject *c, PyObject *n)
{
	if (c->unget == NULL && (c->unget = PyList_New(0)) == NULL)
		return NULL;
	if (PyList_Append(c->unget, n) < 0)
		return NULL;
	Py_RETURN_NONE;
}

PyObject *
client_notifications(ClientObject *c, PyObject *unused)
{
	return PyObject_CallOneArg(c->state->notify_iterate, (PyObject *)c);
}
