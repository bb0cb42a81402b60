/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rma.Peer (another host's rmad) and rma.Remote (a region there, resolved
 * through a peer). Neither has a tp_clear: what they hold (their client,
 * the peer, an address string) is needed by their dealloc, and a cycle
 * through them is broken at the client's callbacks.
 */
#include "_rma.h"

static void
peer_dealloc(PeerObject *p)
{
	PyTypeObject *tp = Py_TYPE(p);

	PyObject_GC_UnTrack(p);
	Py_CLEAR(p->client);
	Py_CLEAR(p->address);
	tp->tp_free((PyObject *)p);
	Py_DECREF(tp);
}

static int
peer_traverse(PeerObject *p, visitproc visit, void *arg)
{
	Py_VISIT(Py_TYPE(p));
	Py_VISIT(p->client);
	Py_VISIT(p->address);
	return 0;
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

static PyType_Slot peer_slots[] = {
    {Py_tp_doc, "Another host's rmad, from Client.peer(address)."},
    {Py_tp_dealloc, peer_dealloc},
    {Py_tp_traverse, peer_traverse},
    {Py_tp_getset, peer_getset},
    {Py_tp_members, peer_members},
    {0, NULL}};

PyType_Spec peer_spec = {
    .name = "rma.Peer",
    .basicsize = sizeof(PeerObject),
    .flags = RMA_TPFLAGS | Py_TPFLAGS_HAVE_GC,
    .slots = peer_slots,
};

static void
remote_dealloc(RemoteObject *r)
{
	PyTypeObject *tp = Py_TYPE(r);
	ClientObject *c = r->client;
	rma_remote_t **dead;
	size_t cap;

	PyObject_GC_UnTrack(r);
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
	tp->tp_free((PyObject *)r);
	Py_DECREF(tp);
}

static int
remote_traverse(RemoteObject *r, visitproc visit, void *arg)
{
	Py_VISIT(Py_TYPE(r));
	Py_VISIT(r->client);
	Py_VISIT(r->peer);
	return 0;
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
		return error_closed(r->client->state);
	if (r->rr == NULL)
		return error_raise(r->client->state, RMA_ERR_NO_PEER,
				   "remote released");
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

static PyType_Slot remote_slots[] = {
    {Py_tp_doc, "A remote region resolved with its owner, from "
		"Client.import_remote()."},
    {Py_tp_dealloc, remote_dealloc},
    {Py_tp_traverse, remote_traverse},
    {Py_tp_methods, remote_methods},
    {Py_tp_getset, remote_getset},
    {Py_tp_members, remote_members},
    {0, NULL}};

PyType_Spec remote_spec = {
    .name = "rma.Remote",
    .basicsize = sizeof(RemoteObject),
    .flags = RMA_TPFLAGS | Py_TPFLAGS_HAVE_GC,
    .slots = remote_slots,
};
