/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rma._rma: the CPython binding of librma (client/rma.h). Private header
 * of the extension's files, one per object:
 *
 *   _rma_module.c        module state, multi-phase init, errors, fork
 *   _rma_client.c        Client: lock, completions, connect, close
 *   _rma_client_ops.c    Client's operations (put, get, atomic, ...)
 *   _rma_request.c       Request, and the await path through _Waiter
 *   _rma_waiter.c        _Waiter: what awaiting a Request yields
 *   _rma_region.c        Region (buffer protocol)
 *   _rma_remote.c        Peer and Remote
 *   _rma_notification.c  Notification and the client's notify queue
 *   _rma_args.c          argument converters
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
 *
 * Module state: every type is a heap type of the module and none can be
 * subclassed, so an object reaches the state through its own type
 * (PyType_GetModuleState(Py_TYPE(o)): 3.10 has no PyType_GetModuleByDef).
 * A Client keeps that pointer (client->state) for the paths run per
 * operation; its type, and so the module, lives as long as it does.
 */
#ifndef RMA_PY_RMA_H
#define RMA_PY_RMA_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <pthread.h>

#include "rma.h"

typedef struct pyrequest RequestObject;
typedef struct waiter WaiterObject;

/* Memory of freed objects of one type, kept for the next (a Request
 * and a _Waiter are made and freed per awaited operation): untracked,
 * with no references, freed with the module. */
#define RMA_POOL_MAX 64
struct rma_pool {
	PyObject *items[RMA_POOL_MAX];
	int n;
};

typedef struct rma_state {
	PyTypeObject *client_type, *region_type, *peer_type, *remote_type,
	    *request_type, *waiter_type, *notification_type;
	/* rma.errors._make and .ClientClosed */
	PyObject *errors_make, *errors_closed;
	/* rma._resolve.resolve_threadsafe, .notifications, .notify_deliver */
	PyObject *resolve_threadsafe, *notify_iterate, *notify_deliver;
	/* asyncio._get_running_loop, .InvalidStateError, .CancelledError */
	PyObject *get_running_loop, *invalid_state, *cancelled_error;
	PyObject *str_set_result, *str_set_exception, *str_create_future,
	    *str_await, *str_call_soon, *str_call_soon_threadsafe,
	    *str_thread_id, *str_blocking, *str_get_loop,
	    *str_add_done_callback;
	/* The await path, per operation, without Python-level calls where
	 * asyncio has C ones: asyncio.Future (the C _asyncio.Future), its
	 * set_result descriptor, BaseEventLoop.create_future (a loop whose
	 * type still has it gets Future(loop=loop) directly), ("loop",) and
	 * ("context",) as kwnames. */
	PyObject *future_type, *future_set_result, *stock_create_future,
	    *kwnames_loop, *kwnames_context;
	PyTypeObject *task_type; /* asyncio.Task */
	/* its wakeup's PyMethodDef, once one was seen (waiter_run) */
	PyMethodDef *task_wakeup_def;
	/* the kwnames of the last add_done_callback(fn, context=ctx) */
	PyObject *kwnames_context_seen;
	struct rma_pool request_pool, waiter_pool;
	/* The last loop type asked about, and whether its create_future is
	 * the stock one. */
	PyObject *loop_type_seen;
	int loop_type_stock;
} rma_state;

typedef struct {
	PyObject_HEAD rma_client_t *rc; /* NULL once disconnected */
	rma_state *state;		/* its type's module's */
	pthread_mutex_t *lock;		/* client_lock_new() */
	int closed;	   /* close() ran: the Python API refuses calls */
	Py_ssize_t pinned; /* buffer views on this client's regions */
	int fd;
	/* Threads in Request.wait() poll fd without the lock; one of them may
	 * read the completion another waits for. wake_fd (an eventfd
	 * semaphore) then gets one token per waiter, so none sleeps on an
	 * fd that will not turn readable for it. */
	int wake_fd;
	int waiters;
	PyObject *loop;		 /* event loop watching fd, or NULL */
	PyObject *loop_ok;	 /* a finished Future on loop (None), or NULL */
	PyObject *loop_get_loop; /* loop_ok.get_loop, or NULL */
	unsigned loop_generation; /* rma_fork_generation when loop was set */
	RequestObject *done;	  /* completed natively, not yet finished */
	RequestObject **done_tail;
	RequestObject *live;	/* submitted, not finished (doubly linked) */
	unsigned long finishes; /* native completions client_leave handled */
	rma_region_t **dead;	/* native frees deferred to the next call */
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
	unsigned fork_generation; /* rma_fork_generation when connected */
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
	/* put(obj, ...) and get(obj, ...): the caller's buffer, held while
	 * librma may read or write it (to its native completion; a small
	 * put's only until the call returned: librma copied it) */
	Py_buffer view;
	int has_view;
};

enum { WAITER_PENDING, WAITER_DONE, WAITER_CANCELLED };

struct waiter {
	PyObject_HEAD rma_state *st; /* its type's module's */
	vectorcallfunc add_call;     /* calling w: w.add_done_callback */
	PyObject *loop;
	PyObject *result, *exception, *cancel_msg;
	PyObject *cb0, *ctx0; /* the first callback inline: the usual one */
	PyObject *more;	      /* list of (fn, ctx) for the others */
	PyObject *get_loop;   /* what w.get_loop gives, or NULL: a method */
	int state, blocking, yielded;
};

/* The flags of every type here: none is subclassed or made from Python
 * (as the static types were), and none is changed after creation. */
#define RMA_TPFLAGS                                                            \
	(Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE |                       \
	 Py_TPFLAGS_DISALLOW_INSTANTIATION)

/* _rma_module.c */
/* Bumped in a fork()'s child (pthread_atfork): process-wide, as the fork
 * is; not module state. */
extern unsigned rma_fork_generation;
/* The running loop of this thread while client_leave finishes requests,
 * asked once per batch of completions rather than once per request:
 * state of the thread, not of the module. */
extern __thread PyObject *rma_leave_running;
PyObject *running_loop(rma_state *st);
PyObject *pool_take(struct rma_pool *p, PyTypeObject *tp);
int pool_give(struct rma_pool *p, PyObject *o);
void callback_report(ClientObject *c, PyObject *cb, const char *message,
		     const char *key, PyObject *obj);
PyObject *error_new(rma_state *st, int status, const char *detail);
PyObject *error_raise(rma_state *st, int status, const char *detail);
PyObject *error_closed(rma_state *st);
const char *status_name(int status);

/* _rma_args.c */
/* An exact int from 0 to 2**60 - 1 in *v_p, read from its digits: an
 * awaited 8-byte put passes three, and PyLong_AsUnsignedLongLong's call
 * and checks were a tenth of the binding's instructions per put. 0 for
 * any other int (the general way then). */
static inline int
u64_small(PyObject *o, unsigned long long *v_p)
{
#if PY_VERSION_HEX >= 0x030C0000
	Py_ssize_t v;

	if (!PyUnstable_Long_IsCompact((PyLongObject *)o))
		return 0;
	v = PyUnstable_Long_CompactValue((PyLongObject *)o);
	if (v < 0)
		return 0;
	*v_p = (unsigned long long)v;
	return 1;
#else
	/* before 3.12: the digits' count in ob_size, negative for a
	 * negative int */
	const digit *d = ((PyLongObject *)o)->ob_digit;

	switch (Py_SIZE(o)) {
	case 0:
		*v_p = 0;
		return 1;
	case 1:
		*v_p = d[0];
		return 1;
	case 2:
		*v_p = d[0] | (unsigned long long)d[1] << PyLong_SHIFT;
		return 1;
	default:
		return 0;
	}
#endif
}

int u64_arg_slow(PyObject *o, void *p);
/* An offset, length, count or notification value: an int (or what has
 * __index__) from 0 to 2**64 - 1. Others raise OverflowError, negative
 * ones too, instead of wrapping ("K" masked: 2**64 + 8 was 8). An O&
 * converter. Inline: three per put, most of them small. */
static inline int
u64_arg(PyObject *o, void *p)
{
	if (PyLong_CheckExact(o) && u64_small(o, p))
		return 1;
	return u64_arg_slow(o, p);
}
int word_from(PyObject *o, unsigned long long *w_p);
int atomic_op_parse(const char *name, rma_atomic_op_t *op_p);
double mono_now(void);

/* _rma_client.c */
extern PyType_Spec client_spec;
void client_fork_adopt(ClientObject *c);
void client_lock(ClientObject *c);
void client_reap_dead(ClientObject *c);
int client_enter(ClientObject *c);
void client_leave(ClientObject *c);
void client_unwatch(ClientObject *c);
int client_watch(ClientObject *c, PyObject *loop);
void client_disconnect(ClientObject *c);
int client_progress_once(ClientObject *c, int *gone_p);

/* _rma_client_ops.c: Client's methods that make the other objects */
PyObject *client_alloc(ClientObject *c, PyObject *args);
PyObject *client_register(ClientObject *c, PyObject *args);
PyObject *client_peer(ClientObject *c, PyObject *args);
PyObject *client_import_remote(ClientObject *c, PyObject *args);
PyObject *client_put(ClientObject *c, PyObject *const *args, size_t nargsf,
		     PyObject *kwnames);
PyObject *client_get(ClientObject *c, PyObject *const *args, size_t nargsf,
		     PyObject *kwnames);
PyObject *client_atomic(ClientObject *c, PyObject *args, PyObject *kw);
PyObject *client_putv(ClientObject *c, PyObject *args, PyObject *kw);
PyObject *client_getv(ClientObject *c, PyObject *args, PyObject *kw);
PyObject *client_flush(ClientObject *c, PyObject *args, PyObject *kw);

/* _rma_request.c */
extern PyType_Spec request_spec;
RequestObject *request_new(ClientObject *c, PyObject *callback,
			   PyObject *user_data);
void request_submitted(RequestObject *r);
void request_on_complete(rma_request_t *req, rma_status_t status,
			 void *user_data);
void request_finish(RequestObject *r, int status, unsigned long long bytes,
		    char *detail);
void request_release_view(RequestObject *r);

/* _rma_waiter.c */
extern PyType_Spec waiter_spec;
/* Set while this thread runs the loop's reader of a client: no Task is
 * running, so Task wakeups may run directly. */
extern __thread int waiter_direct_ok;
WaiterObject *waiter_new(rma_state *st, PyObject *loop, PyObject *get_loop);
void waiter_complete(WaiterObject *w, PyObject *value, PyObject *exc,
		     PyObject *running, PyObject *ok);

/* _rma_region.c */
extern PyType_Spec region_spec;
int region_usable(RegionObject *r);

/* _rma_remote.c */
extern PyType_Spec peer_spec, remote_spec;

/* _rma_notification.c */
extern PyStructSequence_Desc notification_desc;
void notify_on_native(rma_client_t *rc, const rma_notification_t *n, void *ud);
void notify_dispatch(ClientObject *c, rma_notification_t *nq, size_t nnq,
		     int resolve);
PyObject *client_on_notification(ClientObject *c, PyObject *cb);
PyObject *client_notify_next(ClientObject *c, PyObject *unused);
PyObject *client_notify_wait(ClientObject *c, PyObject *unused);
PyObject *client_notify_unget(ClientObject *c, PyObject *n);
PyObject *client_notifications(ClientObject *c, PyObject *unused);

#endif
