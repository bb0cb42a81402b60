/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Argument converters: offsets, lengths and values as unsigned 64-bit
 * words that never wrap, atomic operands and op names.
 */
#include "_rma.h"

#include <string.h>
#include <time.h>

/* u64_arg's way for what u64_small does not take. */
int
u64_arg_slow(PyObject *o, void *p)
{
	PyObject *i;
	unsigned long long v;

	/* an int: no __index__ round trip; one out of range takes the way
	 * below for its message */
	if (PyLong_CheckExact(o)) {
		v = PyLong_AsUnsignedLongLong(o);
		if (v != (unsigned long long)-1 || !PyErr_Occurred()) {
			*(unsigned long long *)p = v;
			return 1;
		}
		PyErr_Clear();
	}
	i = PyNumber_Index(o);
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

int
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
int
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

/* Seconds on the monotonic clock, for wait() deadlines. */
double
mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
