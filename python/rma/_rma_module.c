/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The module rma._rma: its state (what it caches from rma.errors,
 * rma._resolve and asyncio, and its types), multi-phase init, the
 * errors raised everywhere, fork() detection. The design of the binding
 * as a whole is in _rma.h.
 */
#include "_rma.h"

#include <pthread.h>

__thread PyObject *rma_leave_running;

PyObject *
running_loop(rma_state *st)
{
	if (rma_leave_running != NULL)
		return Py_NewRef(rma_leave_running);
	return PyObject_CallNoArgs(st->get_running_loop);
}

/* An object of @p tp (refcount 1, untracked) made from the pool's
 * memory, or NULL (no exception) when it has none. */
PyObject *
pool_take(struct rma_pool *p, PyTypeObject *tp)
{
	if (p->n == 0)
		return NULL;
	return PyObject_Init(p->items[--p->n], tp);
}

/* From a dealloc, once @p o is untracked and holds nothing: 1 if the
 * pool keeps its memory, 0 if the caller frees it. */
int
pool_give(struct rma_pool *p, PyObject *o)
{
	if (p->n == RMA_POOL_MAX)
		return 0;
	p->items[p->n++] = o;
	return 1;
}

static void
pool_drain(struct rma_pool *p)
{
	while (p->n > 0)
		PyObject_GC_Del(p->items[--p->n]);
}

/* Reports the exception a callback (@p cb) raised: to the loop's
 * exception handler when the client's loop runs in this thread, with
 * @p message and the object it was about (@p obj, under @p key), else
 * sys.unraisablehook. For request and notification callbacks. */
void
callback_report(ClientObject *c, PyObject *cb, const char *message,
		const char *key, PyObject *obj)
{
	PyObject *et, *ev, *tb, *running = NULL, *ctx, *res;

	PyErr_Fetch(&et, &ev, &tb);
	PyErr_NormalizeException(&et, &ev, &tb);
	if (tb != NULL && ev != NULL)
		PyException_SetTraceback(ev, tb);
	if (c->loop != NULL)
		running = running_loop(c->state);
	if (running == NULL || running != c->loop) {
		Py_XDECREF(running);
		PyErr_Clear();
		PyErr_Restore(et, ev, tb);
		PyErr_WriteUnraisable(cb);
		return;
	}
	ctx = Py_BuildValue("{s:s,s:O,s:O,s:O}", "message", message,
			    "exception", ev ? ev : Py_None, key,
			    obj ? obj : Py_None, "callback", cb);
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

const char *
status_name(int status)
{
	if (status == RMA_INPROGRESS)
		return "INPROGRESS";
	if (status > 0 ||
	    -status >= (int)(sizeof(status_names) / sizeof(status_names[0])))
		return "UNKNOWN";
	return status_names[-status];
}

PyObject *
error_new(rma_state *st, int status, const char *detail)
{
	return PyObject_CallFunction(
	    st->errors_make, "isss", status, status_name(status),
	    rma_strerror((rma_status_t)status), detail ? detail : "");
}

PyObject *
error_raise(rma_state *st, int status, const char *detail)
{
	PyObject *exc = error_new(st, status, detail);

	if (exc != NULL) {
		PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
		Py_DECREF(exc);
	}
	return NULL;
}

/* rma.ClientClosed: a call on a Client after its close(), or on what it
 * made; no librma status stands for it (the handle is gone). */
PyObject *
error_closed(rma_state *st)
{
	PyErr_SetString(st->errors_closed, "rma client is closed");
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

unsigned rma_fork_generation;

static void
fork_child(void)
{
	rma_fork_generation++;
}

/* Once per process, however often the module is executed (each
 * interpreter, each re-import). */
static void
fork_register(void)
{
	/* without it a child is not told; the parent is fine */
	(void)pthread_atfork(NULL, NULL, fork_child);
}

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

/* Every object reference of the state, for traverse and clear. */
#define RMA_STATE_OBJECTS(X)                                                   \
	X(client_type)                                                         \
	X(region_type)                                                         \
	X(peer_type)                                                           \
	X(remote_type)                                                         \
	X(request_type)                                                        \
	X(waiter_type)                                                         \
	X(notification_type)                                                   \
	X(errors_make)                                                         \
	X(errors_closed)                                                       \
	X(resolve_threadsafe)                                                  \
	X(notify_iterate)                                                      \
	X(notify_deliver)                                                      \
	X(get_running_loop)                                                    \
	X(invalid_state)                                                       \
	X(cancelled_error)                                                     \
	X(str_set_result)                                                      \
	X(str_set_exception)                                                   \
	X(str_create_future)                                                   \
	X(str_await)                                                           \
	X(str_call_soon)                                                       \
	X(str_call_soon_threadsafe)                                            \
	X(str_thread_id)                                                       \
	X(str_blocking)                                                        \
	X(str_get_loop)                                                        \
	X(str_add_done_callback)                                               \
	X(kwnames_context_seen)                                                \
	X(future_type)                                                         \
	X(task_type)                                                           \
	X(future_set_result)                                                   \
	X(stock_create_future)                                                 \
	X(kwnames_loop)                                                        \
	X(kwnames_context)                                                     \
	X(loop_type_seen)

static int
mod_traverse(PyObject *m, visitproc visit, void *arg)
{
	rma_state *st = PyModule_GetState(m);

#define RMA_VISIT(f) Py_VISIT(st->f);
	RMA_STATE_OBJECTS(RMA_VISIT)
#undef RMA_VISIT
	return 0;
}

static int
mod_clear(PyObject *m)
{
	rma_state *st = PyModule_GetState(m);

#define RMA_CLEAR(f) Py_CLEAR(st->f);
	RMA_STATE_OBJECTS(RMA_CLEAR)
#undef RMA_CLEAR
	pool_drain(&st->request_pool);
	pool_drain(&st->waiter_pool);
	return 0;
}

static void
mod_free(void *m)
{
	mod_clear((PyObject *)m);
}

/* A heap type of the module, also its attribute @p name. */
static int
mod_add_type(PyObject *m, PyType_Spec *spec, const char *name,
	     PyTypeObject **type_p)
{
	PyObject *t = PyType_FromModuleAndSpec(m, spec, NULL);

	if (t == NULL)
		return -1;
	if (PyModule_AddObjectRef(m, name, t) < 0) {
		Py_DECREF(t);
		return -1;
	}
	*type_p = (PyTypeObject *)t;
	return 0;
}

static int
mod_add_types(PyObject *m, rma_state *st)
{
	if (mod_add_type(m, &client_spec, "Client", &st->client_type) < 0 ||
	    mod_add_type(m, &region_spec, "Region", &st->region_type) < 0 ||
	    mod_add_type(m, &peer_spec, "Peer", &st->peer_type) < 0 ||
	    mod_add_type(m, &remote_spec, "Remote", &st->remote_type) < 0 ||
	    mod_add_type(m, &request_spec, "Request", &st->request_type) < 0 ||
	    mod_add_type(m, &waiter_spec, "_Waiter", &st->waiter_type) < 0)
		return -1;
	st->notification_type = PyStructSequence_NewType(&notification_desc);
	if (st->notification_type == NULL)
		return -1;
	return PyModule_AddObjectRef(m, "Notification",
				     (PyObject *)st->notification_type);
}

/* What the module takes from asyncio. */
static int
mod_import_asyncio(rma_state *st)
{
	PyObject *mod = PyImport_ImportModule("asyncio"), *bel;

	if (mod == NULL)
		return -1;
	st->get_running_loop = PyObject_GetAttrString(mod, "_get_running_loop");
	st->future_type = PyObject_GetAttrString(mod, "Future");
	st->task_type = (PyTypeObject *)PyObject_GetAttrString(mod, "Task");
	st->future_set_result =
	    st->future_type
		? PyObject_GetAttrString(st->future_type, "set_result")
		: NULL;
	bel = PyObject_GetAttrString(mod, "BaseEventLoop");
	st->stock_create_future =
	    bel ? PyObject_GetAttrString(bel, "create_future") : NULL;
	Py_XDECREF(bel);
	st->cancelled_error = PyObject_GetAttrString(mod, "CancelledError");
	st->invalid_state = PyObject_GetAttrString(mod, "InvalidStateError");
	Py_DECREF(mod);
	if (st->get_running_loop == NULL || st->future_type == NULL ||
	    st->task_type == NULL || !PyType_Check(st->task_type) ||
	    st->future_set_result == NULL || st->stock_create_future == NULL ||
	    st->cancelled_error == NULL || st->invalid_state == NULL)
		return -1;
	return 0;
}

/* What it takes from the package's Python modules. */
static int
mod_import_rma(rma_state *st)
{
	PyObject *mod = PyImport_ImportModule("rma.errors");

	if (mod == NULL)
		return -1;
	st->errors_make = PyObject_GetAttrString(mod, "_make");
	st->errors_closed = PyObject_GetAttrString(mod, "ClientClosed");
	Py_DECREF(mod);
	if ((mod = PyImport_ImportModule("rma._resolve")) == NULL)
		return -1;
	st->resolve_threadsafe =
	    PyObject_GetAttrString(mod, "resolve_threadsafe");
	st->notify_iterate = PyObject_GetAttrString(mod, "notifications");
	st->notify_deliver = PyObject_GetAttrString(mod, "notify_deliver");
	Py_DECREF(mod);
	if (st->errors_make == NULL || st->errors_closed == NULL ||
	    st->resolve_threadsafe == NULL || st->notify_iterate == NULL ||
	    st->notify_deliver == NULL)
		return -1;
	return 0;
}

static int
mod_make_names(rma_state *st)
{
	st->str_set_result = PyUnicode_InternFromString("set_result");
	st->str_set_exception = PyUnicode_InternFromString("set_exception");
	st->str_create_future = PyUnicode_InternFromString("create_future");
	st->str_await = PyUnicode_InternFromString("__await__");
	st->str_call_soon = PyUnicode_InternFromString("call_soon");
	st->str_call_soon_threadsafe =
	    PyUnicode_InternFromString("call_soon_threadsafe");
	st->str_thread_id = PyUnicode_InternFromString("_thread_id");
	st->str_blocking =
	    PyUnicode_InternFromString("_asyncio_future_blocking");
	st->str_get_loop = PyUnicode_InternFromString("get_loop");
	st->str_add_done_callback =
	    PyUnicode_InternFromString("add_done_callback");
	st->kwnames_loop = Py_BuildValue("(s)", "loop");
	/* interned, as asyncio's own "context" keyword: compared by
	 * address first (waiter_add_done_callback) */
	st->kwnames_context =
	    Py_BuildValue("(N)", PyUnicode_InternFromString("context"));
	if (st->str_set_result == NULL || st->str_set_exception == NULL ||
	    st->str_create_future == NULL || st->str_await == NULL ||
	    st->str_call_soon == NULL || st->str_call_soon_threadsafe == NULL ||
	    st->str_thread_id == NULL || st->str_blocking == NULL ||
	    st->str_get_loop == NULL || st->str_add_done_callback == NULL ||
	    st->kwnames_loop == NULL || st->kwnames_context == NULL)
		return -1;
	return 0;
}

/* Py_mod_exec: a failure leaves what was set to mod_free. */
static int
mod_exec(PyObject *m)
{
	static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
	rma_state *st = PyModule_GetState(m);

	(void)pthread_once(&fork_once, fork_register);
	if (mod_add_types(m, st) < 0 || mod_import_rma(st) < 0 ||
	    mod_import_asyncio(st) < 0 || mod_make_names(st) < 0)
		return -1;
	for (int s = RMA_ERR_RESTARTED; s <= RMA_INPROGRESS; s++)
		if (PyModule_AddIntConstant(m, status_name(s), s) < 0)
			return -1;
	return 0;
}

static PyModuleDef_Slot mod_slots[] = {{Py_mod_exec, mod_exec}, {0, NULL}};

static struct PyModuleDef rma_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "rma._rma",
    .m_doc = "The C part of the rma package.",
    .m_size = sizeof(rma_state),
    .m_methods = mod_methods,
    .m_slots = mod_slots,
    .m_traverse = mod_traverse,
    .m_clear = mod_clear,
    .m_free = mod_free,
};

PyMODINIT_FUNC
PyInit__rma(void)
{
	return PyModuleDef_Init(&rma_module);
}
