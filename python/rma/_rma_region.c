/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rma.Region: memory librma maps, shared with the daemon, with the
 * buffer protocol. While views exist its native free (and the client's
 * disconnect) waits for the last one (see _rma.h).
 */
#include "_rma.h"

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
	PyTypeObject *tp = Py_TYPE(r);

	PyObject_GC_UnTrack(r);
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
	tp->tp_free((PyObject *)r);
	Py_DECREF(tp);
}

/* No tp_clear: the client is what frees the native region (dealloc);
 * a cycle through a region is broken at the client's callbacks. */
static int
region_traverse(RegionObject *r, visitproc visit, void *arg)
{
	Py_VISIT(Py_TYPE(r));
	Py_VISIT(r->client);
	return 0;
}

int
region_usable(RegionObject *r)
{
	if (r->client->rc == NULL || r->client->closed) {
		error_closed(r->client->state);
		return 0;
	}
	if (r->rr == NULL || r->free_pending) {
		error_raise(r->client->state, RMA_ERR_NO_REGION,
			    "region freed");
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
		return error_raise(c->state, RMA_ERR_NO_REGION,
				   "region already freed");
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
		return error_raise(c->state, st, detail);
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

static PyMemberDef region_members[] = {{"__weaklistoffset__", T_PYSSIZET,
					offsetof(RegionObject, weakrefs),
					READONLY, NULL},
				       {NULL}};

static PyType_Slot region_slots[] = {
    {Py_tp_doc, "Memory shared with the daemon, from Client.alloc(). Supports "
		"the buffer protocol: memoryview(region) and "
		"numpy.frombuffer(region) are writable views, no copy; the "
		"memory stays valid while any view exists. len(region) is its "
		"length."},
    {Py_tp_dealloc, region_dealloc},
    {Py_tp_traverse, region_traverse},
    {Py_sq_length, region_len},
    {Py_bf_getbuffer, region_getbuffer},
    {Py_bf_releasebuffer, region_releasebuffer},
    {Py_tp_methods, region_methods},
    {Py_tp_getset, region_getset},
    {Py_tp_members, region_members},
    {0, NULL}};

PyType_Spec region_spec = {
    .name = "rma.Region",
    .basicsize = sizeof(RegionObject),
    .flags = RMA_TPFLAGS | Py_TPFLAGS_HAVE_GC,
    .slots = region_slots,
};
