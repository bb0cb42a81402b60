/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Client's operations: what makes a Region (alloc, register), Peer or
 * Remote, and what
 * submits a Request (put, get, atomic, putv, getv, flush). put and get
 * are called once per operation and have a fast path for positional
 * calls (client_transfer_fast).
 */
#include "_rma.h"

#include <sys/stat.h>

/* A Region object for rr, which the client owns until the Region
 * takes it. */
static PyObject *
client_region_wrap(ClientObject *c, rma_region_t *rr, Py_ssize_t size)
{
	RegionObject *r;

	r = PyObject_GC_New(RegionObject, c->state->region_type);
	if (r == NULL) {
		/* ownership of rr stays with the client: freed at close */
		return NULL;
	}
	r->client = (ClientObject *)Py_NewRef(c);
	r->rr = rr;
	r->ptr = rma_region_ptr(rr);
	r->length = size;
	r->exports = 0;
	r->free_pending = 0;
	r->weakrefs = NULL;
	PyObject_GC_Track(r);
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

PyObject *
client_alloc(ClientObject *c, PyObject *args)
{
	unsigned long long size;
	rma_region_t *rr;
	rma_status_t st;
	char detail[512];
	PyThreadState *ts;

	if (!PyArg_ParseTuple(args, "O&:alloc", u64_arg, &size))
		return NULL;
	if (size == 0)
		return error_raise(c->state, RMA_ERR_INVALID,
				   "size must be positive");
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
		return error_raise(c->state, st, detail);
	return client_region_wrap(c, rr, (Py_ssize_t)size);
}

/* register's first argument: an fd (an int or an object with fileno()).
 * A buffer without one (mmap.mmap has none: Python does not expose the
 * fd a mapping was made from) gets a TypeError that says what to pass. */
static int
client_register_fd_arg(PyObject *obj, int *fd_p)
{
	if (!PyLong_Check(obj) && PyObject_CheckBuffer(obj) &&
	    !PyObject_HasAttrString(obj, "fileno")) {
		PyErr_Format(
		    PyExc_TypeError,
		    "register() needs a file descriptor, not a %.100s: "
		    "Python does not tell which file a mapping or "
		    "buffer was made from; pass register(fd, offset, "
		    "length) with the sealed memfd it maps",
		    Py_TYPE(obj)->tp_name);
		return 0;
	}
	*fd_p = PyObject_AsFileDescriptor(obj);
	return *fd_p >= 0;
}

PyObject *
client_register(ClientObject *c, PyObject *args)
{
	unsigned long long offset = 0, length = 0;
	PyObject *fd_obj, *length_obj = Py_None;
	rma_region_t *rr;
	rma_status_t st;
	char detail[512];
	PyThreadState *ts;
	struct stat sb;
	int fd;

	if (!PyArg_ParseTuple(args, "O|O&O:register", &fd_obj, u64_arg, &offset,
			      &length_obj))
		return NULL;
	if (!client_register_fd_arg(fd_obj, &fd))
		return NULL;
	if (length_obj != Py_None) {
		if (!u64_arg(length_obj, &length))
			return NULL;
	} else if (fstat(fd, &sb) < 0) {
		return PyErr_SetFromErrno(PyExc_OSError);
	} else if ((uint64_t)sb.st_size > offset) {
		length = (uint64_t)sb.st_size - offset; /* the rest of it */
	}
	if (length == 0)
		return error_raise(c->state, RMA_ERR_INVALID,
				   "length must be positive (the file's size "
				   "past offset, when not given)");
	if (length > PY_SSIZE_T_MAX)
		return PyErr_Format(PyExc_OverflowError,
				    "length %llu over a buffer's limit",
				    length);
	if (!client_enter(c))
		return NULL;
	ts = PyEval_SaveThread();
	st = rma_region_register_fd(c->rc, fd, offset, (size_t)length, &rr);
	PyEval_RestoreThread(ts);
	snprintf(detail, sizeof(detail), "%s", rma_last_error(c->rc));
	client_leave(c);
	if (st != RMA_OK)
		return error_raise(c->state, st, detail);
	return client_region_wrap(c, rr, (Py_ssize_t)length);
}

PyObject *
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
		return error_raise(c->state, st, detail);
	p = PyObject_GC_New(PeerObject, c->state->peer_type);
	if (p == NULL)
		return NULL;
	p->client = (ClientObject *)Py_NewRef(c);
	p->rp = rp;
	p->address = PyUnicode_FromString(addr);
	PyObject_GC_Track(p);
	if (p->address == NULL) {
		Py_DECREF(p);
		return NULL;
	}
	return (PyObject *)p;
}

PyObject *
client_import_remote(ClientObject *c, PyObject *args)
{
	PeerObject *p;
	const char *desc;
	rma_remote_t *rr;
	rma_status_t st;
	RemoteObject *r;
	char detail[512];
	PyThreadState *ts;

	if (!PyArg_ParseTuple(args, "O!s:import_remote", c->state->peer_type,
			      &p, &desc))
		return NULL;
	if (p->client != c)
		return error_raise(c->state, RMA_ERR_INVALID,
				   "peer of another client");
	if (!client_enter(c))
		return NULL;
	ts = PyEval_SaveThread();
	st = rma_remote_import(c->rc, p->rp, desc, &rr);
	PyEval_RestoreThread(ts);
	snprintf(detail, sizeof(detail), "%s", rma_last_error(c->rc));
	client_leave(c);
	if (st != RMA_OK)
		return error_raise(c->state, st, detail);
	r = PyObject_GC_New(RemoteObject, c->state->remote_type);
	if (r == NULL)
		return NULL;
	r->client = (ClientObject *)Py_NewRef(c);
	r->peer = (PeerObject *)Py_NewRef(p);
	r->rr = rr;
	PyObject_GC_Track(r);
	return (PyObject *)r;
}

/* put and get share their arguments and submission. */
/* The end of every submission, under the client's lock: the request is
 * in librma's hands, or the error (read before the lock goes: another
 * thread may set the next one) is raised and the request released.
 * Returns r or NULL. */
static PyObject *
client_submitted(ClientObject *c, RequestObject *r, rma_status_t st)
{
	char detail[512];

	if (st == RMA_OK)
		request_submitted(r);
	else
		snprintf(detail, sizeof(detail), "%s", rma_last_error(c->rc));
	client_leave(c);
	if (st != RMA_OK) {
		error_raise(c->state, st, detail);
		Py_DECREF(r);
		return NULL;
	}
	return (PyObject *)r;
}

static inline PyObject *
transfer_submit(ClientObject *c, RegionObject *reg, unsigned long long off,
		RemoteObject *rem, unsigned long long roff,
		unsigned long long len, PyObject *cb, PyObject *ud,
		int remote_completion, int is_put, PyObject *notify)
    __attribute__((always_inline));

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
		kwlist, c->state->region_type, &reg, u64_arg, &off,
		c->state->remote_type, &rem, u64_arg, &roff, u64_arg, &len, &cb,
		&ud, &remote_completion, &notify))
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

/* The submission of a parsed put or get. Inlined into each caller: its
 * eleven arguments cost more to pass than its checks (an awaited 8-byte
 * put's call was 50 instructions). */
static inline PyObject *
transfer_submit(ClientObject *c, RegionObject *reg, unsigned long long off,
		RemoteObject *rem, unsigned long long roff,
		unsigned long long len, PyObject *cb, PyObject *ud,
		int remote_completion, int is_put, PyObject *notify)
{
	RequestObject *r;
	rma_status_t st;
	unsigned long long value = 0;

	if (notify != NULL && !u64_arg(notify, &value))
		return NULL;

	if (reg->client != c || rem->client != c)
		return error_raise(c->state, RMA_ERR_INVALID,
				   "region or remote of another client");
	if (!region_usable(reg))
		return NULL;
	if (rem->rr == NULL)
		return error_raise(c->state, RMA_ERR_NO_PEER,
				   "remote released");
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
	return client_submitted(c, r, st);

err_request:
	Py_DECREF(r);
	return NULL;
}

/* put(obj, remote, remote_offset) and get(obj, ...): any object with the
 * buffer protocol, through librma's staging area (rma_put_buf,
 * rma_get_buf). The view is the request's while librma may use it. */
static PyObject *
buffer_submit(ClientObject *c, PyObject *obj, RemoteObject *rem,
	      unsigned long long roff, PyObject *cb, PyObject *ud,
	      int remote_completion, int is_put)
{
	int want = PyBUF_C_CONTIGUOUS | (is_put ? 0 : PyBUF_WRITABLE);
	const char *name = is_put ? "put" : "get";
	RequestObject *r;
	rma_status_t st;

	if (rem->client != c)
		return error_raise(c->state, RMA_ERR_INVALID,
				   "remote of another client");
	if (rem->rr == NULL)
		return error_raise(c->state, RMA_ERR_NO_PEER,
				   "remote released");
	r = request_new(c, cb, ud);
	if (r == NULL)
		return NULL;
	if (PyObject_GetBuffer(obj, &r->view, want) < 0) {
		/* numpy says ValueError where memoryview says BufferError */
		if (PyErr_ExceptionMatches(PyExc_BufferError) ||
		    PyErr_ExceptionMatches(PyExc_ValueError)) {
			PyObject *et, *ev, *tb;

			PyErr_Fetch(&et, &ev, &tb);
			PyErr_Format(PyExc_BufferError,
				     "%s() needs a C-contiguous%s buffer; "
				     "this %.200s is not (%S)",
				     name, is_put ? "" : ", writable",
				     Py_TYPE(obj)->tp_name,
				     ev != NULL ? ev : Py_None);
			Py_XDECREF(et);
			Py_XDECREF(ev);
			Py_XDECREF(tb);
		} else if (PyErr_ExceptionMatches(PyExc_TypeError)) {
			PyErr_Clear();
			PyErr_Format(PyExc_TypeError,
				     "%s() takes a Region or an object with "
				     "the buffer protocol (bytearray, "
				     "memoryview, array, numpy array, "
				     "mmap%s), not %.200s",
				     name, is_put ? ", bytes" : "",
				     Py_TYPE(obj)->tp_name);
		}
		goto err_request;
	}
	r->has_view = 1;
	if (!client_enter(c))
		goto err_request;
	if (is_put)
		st = rma_put_buf(
		    c->rc, r->view.buf, (size_t)r->view.len, rem->rr, roff,
		    remote_completion ? RMA_FLAG_REMOTE_COMPLETION : 0,
		    request_on_complete, r, &r->req);
	else
		st =
		    rma_get_buf(c->rc, r->view.buf, (size_t)r->view.len,
				rem->rr, roff, request_on_complete, r, &r->req);
	if (client_submitted(c, r, st) == NULL)
		return NULL;
	/* librma copied a small put before it returned (rma.h) */
	if (is_put && r->view.len <= RMA_BUF_COPY_MAX)
		request_release_view(r);
	return (PyObject *)r;

err_request:
	Py_DECREF(r);
	return NULL;
}

/* The buffer forms' arguments; a Region there is a put or get of all of
 * it, with no copy. */
static PyObject *
client_transfer_buf(ClientObject *c, PyObject *args, PyObject *kw, int is_put)
{
	static char *kwlist[] = {"buffer",   "remote",	  "remote_offset",
				 "callback", "user_data", "remote_completion",
				 NULL};
	PyObject *obj, *cb = Py_None, *ud = Py_None;
	unsigned long long roff;
	int remote_completion = 0;
	RemoteObject *rem;

	if (!PyArg_ParseTupleAndKeywords(
		args, kw, is_put ? "OO!O&|OO$p:put" : "OO!O&|OO:get", kwlist,
		&obj, c->state->remote_type, &rem, u64_arg, &roff, &cb, &ud,
		&remote_completion))
		return NULL;
	if (Py_IS_TYPE(obj, c->state->region_type))
		return transfer_submit(
		    c, (RegionObject *)obj, 0, rem, roff,
		    (unsigned long long)((RegionObject *)obj)->length, cb, ud,
		    remote_completion, is_put, NULL);
	return buffer_submit(c, obj, rem, roff, cb, ud, remote_completion,
			     is_put);
}

/* Whether a call is the buffer form: a Remote second, or the keyword
 * buffer. */
static int
transfer_is_buf(ClientObject *c, PyObject *const *args, Py_ssize_t nargs,
		PyObject *kwnames)
{
	if (nargs >= 2)
		return Py_IS_TYPE(args[1], c->state->remote_type);
	for (Py_ssize_t i = 0; kwnames != NULL && i < PyTuple_GET_SIZE(kwnames);
	     i++)
		if (PyUnicode_CompareWithASCIIString(
			PyTuple_GET_ITEM(kwnames, i), "buffer") == 0)
			return 1;
	return 0;
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
	int buf = transfer_is_buf(c, args, nargs, kwnames);

	if (kwnames == NULL && nargs >= 5 && nargs <= 7 &&
	    Py_IS_TYPE(args[0], c->state->region_type) &&
	    PyLong_CheckExact(args[1]) &&
	    Py_IS_TYPE(args[2], c->state->remote_type) &&
	    PyLong_CheckExact(args[3]) && PyLong_CheckExact(args[4])) {
		/* as the general parser's u64_arg */
		if (!u64_arg(args[1], &off) || !u64_arg(args[3], &roff) ||
		    !u64_arg(args[4], &len))
			return NULL;
		return transfer_submit(
		    c, (RegionObject *)args[0], off, (RemoteObject *)args[2],
		    roff, len, nargs > 5 ? args[5] : Py_None,
		    nargs > 6 ? args[6] : Py_None, 0, is_put, NULL);
	}
	if (buf && kwnames == NULL && nargs >= 3 && nargs <= 5 &&
	    !Py_IS_TYPE(args[0], c->state->region_type) &&
	    PyLong_CheckExact(args[2])) {
		if (!u64_arg(args[2], &roff))
			return NULL;
		return buffer_submit(c, args[0], (RemoteObject *)args[1], roff,
				     nargs > 3 ? args[3] : Py_None,
				     nargs > 4 ? args[4] : Py_None, 0, is_put);
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
	res = buf ? client_transfer_buf(c, tuple, kw, is_put)
		  : client_transfer(c, tuple, kw, is_put);
	Py_DECREF(tuple);
	Py_XDECREF(kw);
	return res;

out:
	Py_DECREF(tuple);
	Py_XDECREF(kw);
	return NULL;
}

PyObject *
client_put(ClientObject *c, PyObject *const *args, size_t nargsf,
	   PyObject *kwnames)
{
	return client_transfer_fast(c, args, PyVectorcall_NARGS(nargsf),
				    kwnames, 1);
}

PyObject *
client_get(ClientObject *c, PyObject *const *args, size_t nargsf,
	   PyObject *kwnames)
{
	return client_transfer_fast(c, args, PyVectorcall_NARGS(nargsf),
				    kwnames, 0);
}

PyObject *
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

	if (!PyArg_ParseTupleAndKeywords(
		args, kw, "O!O&sO|OiOO:atomic", kwlist, c->state->remote_type,
		&rem, u64_arg, &off, &opname, &vo, &co, &width, &cb, &ud))
		return NULL;
	if (!atomic_op_parse(opname, &op))
		return error_raise(c->state, RMA_ERR_INVALID,
				   "unknown atomic op (add, fetch-add, swap, "
				   "cswap, and, or, xor, fetch-and, fetch-or, "
				   "fetch-xor)");
	if (width != 32 && width != 64)
		return error_raise(c->state, RMA_ERR_INVALID,
				   "width must be 32 or 64");
	if (op == RMA_ATOMIC_CSWAP && co == Py_None)
		return error_raise(c->state, RMA_ERR_INVALID,
				   "cswap needs compare");
	if (!word_from(vo, &value) ||
	    (co != Py_None && !word_from(co, &compare)))
		return NULL;
	if (rem->client != c)
		return error_raise(c->state, RMA_ERR_INVALID,
				   "remote of another client");
	if (rem->rr == NULL)
		return error_raise(c->state, RMA_ERR_NO_PEER,
				   "remote released");
	r = request_new(c, cb, ud);
	if (r == NULL)
		return NULL;
	r->is_atomic = 1;
	if (!client_enter(c))
		goto err_request;
	st = rma_atomic(c->rc, rem->rr, off, op, (unsigned)width / 8, value,
			compare, request_on_complete, r, &r->req);
	return client_submitted(c, r, st);

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

	if (!PyArg_ParseTupleAndKeywords(
		args, kw, is_put ? "O!O!O|OO$p:putv" : "O!O!O|OO:getv", kwlist,
		c->state->region_type, &reg, c->state->remote_type, &rem,
		&pieces, &cb, &ud, &remote_completion))
		return NULL;
	if (reg->client != c || rem->client != c)
		return error_raise(c->state, RMA_ERR_INVALID,
				   "region or remote of another client");
	if (!region_usable(reg))
		return NULL;
	if (rem->rr == NULL)
		return error_raise(c->state, RMA_ERR_NO_PEER,
				   "remote released");
	seq = PySequence_Fast(pieces, "pieces must be a sequence of "
				      "(offset, remote_offset, length)");
	if (seq == NULL)
		return NULL;
	n = PySequence_Fast_GET_SIZE(seq);
	if (n == 0 || n > RMA_IOV_MAX) {
		error_raise(c->state, RMA_ERR_INVALID, "1 to 1024 pieces");
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
	/* r, or NULL with the error raised (and r released) */
	r = (RequestObject *)client_submitted(c, r, st);
	goto out;

err_request:
	Py_CLEAR(r);
out:
	PyMem_Free(iov);
	Py_XDECREF(seq);
	return (PyObject *)r;
}

PyObject *
client_putv(ClientObject *c, PyObject *args, PyObject *kw)
{
	return client_vector(c, args, kw, 1);
}

PyObject *
client_getv(ClientObject *c, PyObject *args, PyObject *kw)
{
	return client_vector(c, args, kw, 0);
}

PyObject *
client_flush(ClientObject *c, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"peer", "callback", "user_data", NULL};
	PyObject *peer = Py_None, *cb = Py_None, *ud = Py_None;
	RequestObject *r;
	rma_status_t st;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOO:flush", kwlist, &peer,
					 &cb, &ud))
		return NULL;
	if (peer != Py_None &&
	    (!PyObject_TypeCheck(peer, c->state->peer_type) ||
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
	return client_submitted(c, r, st);

err_request:
	Py_DECREF(r);
	return NULL;
}
