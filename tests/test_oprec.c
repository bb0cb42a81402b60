/* SPDX-License-Identifier: BSD-2-Clause */
/* Unit: the fixed-layout operation, completion and notification records
 * (proto/oprec.c), byte by byte: little-endian whatever the host, the
 * reserved words written as 0 and refused when they are not. What the
 * daemon does with a refused record is test_protocol's test_packed_records. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "check_main.h"
#include "oprec.h"

/* Every field at a value whose bytes all differ, so that a swapped field
 * or byte order shows. */
static Rma__V1__Op
sample_op(void)
{
	Rma__V1__Op op = RMA__V1__OP__INIT;

	op.op_id = 0x0102030405060708ull;
	op.region_id = 0x1112131415161718ull;
	op.offset = 0x2122232425262728ull;
	op.remote_id = 0x3132333435363738ull;
	op.remote_offset = 0x4142434445464748ull;
	op.length = 0x5152535455565758ull;
	op.kind = RMA__V1__OP_KIND__GET;
	op.flags = 0x61626364u;
	op.peer_id = 0x71727374u;
	return op;
}

static uint64_t
le64_at(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint32_t
le32_at(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

START_TEST(test_op_layout)
{
	Rma__V1__Op op = sample_op();
	uint8_t p[OPREC_SIZE];

	memset(p, 0xee, sizeof(p));
	oprec_encode(p, &op);
	ck_assert_uint_eq(le64_at(p), op.op_id);
	ck_assert_uint_eq(le64_at(p + 8), op.region_id);
	ck_assert_uint_eq(le64_at(p + 16), op.offset);
	ck_assert_uint_eq(le64_at(p + 24), op.remote_id);
	ck_assert_uint_eq(le64_at(p + 32), op.remote_offset);
	ck_assert_uint_eq(le64_at(p + 40), op.length);
	ck_assert_uint_eq(le32_at(p + 48), (uint32_t)op.kind);
	ck_assert_uint_eq(le32_at(p + 52), op.flags);
	ck_assert_uint_eq(le32_at(p + 56), op.peer_id);
	ck_assert_uint_eq(le32_at(p + 60), 0); /* reserved */
}
END_TEST

START_TEST(test_op_roundtrip)
{
	Rma__V1__Op in = sample_op(), out;
	uint8_t p[OPREC_SIZE];

	oprec_encode(p, &in);
	memset(&out, 0xee, sizeof(out));
	ck_assert_int_eq(oprec_decode(p, &out), 0);
	ck_assert_uint_eq(out.op_id, in.op_id);
	ck_assert_uint_eq(out.region_id, in.region_id);
	ck_assert_uint_eq(out.offset, in.offset);
	ck_assert_uint_eq(out.remote_id, in.remote_id);
	ck_assert_uint_eq(out.remote_offset, in.remote_offset);
	ck_assert_uint_eq(out.length, in.length);
	ck_assert_int_eq(out.kind, in.kind);
	ck_assert_uint_eq(out.flags, in.flags);
	ck_assert_uint_eq(out.peer_id, in.peer_id);
	/* Initialised as a message: nothing the record does not carry. */
	ck_assert_ptr_eq(out.base.descriptor, &rma__v1__op__descriptor);
}
END_TEST

/* Any one reserved byte set refuses the record, and only those bytes. */
START_TEST(test_op_reserved_refused)
{
	Rma__V1__Op in = sample_op(), out;
	uint8_t p[OPREC_SIZE];

	oprec_encode(p, &in);
	for (int i = 60; i < OPREC_SIZE; i++) {
		p[i] = 0x01;
		ck_assert_int_eq(oprec_decode(p, &out), -1);
		p[i] = 0x80;
		ck_assert_int_eq(oprec_decode(p, &out), -1);
		p[i] = 0;
	}
	for (int i = 0; i < 60; i++) {
		p[i] ^= 0xff;
		ck_assert_int_eq(oprec_decode(p, &out), 0);
		p[i] ^= 0xff;
	}
}
END_TEST

/* A notifying put carries its 64-bit value where a put has no peer id
 * (56) and the reserved word (60); it decodes back whole. */
START_TEST(test_op_notify_value)
{
	Rma__V1__Op op = sample_op(), back;
	uint8_t p[OPREC_SIZE];

	op.kind = RMA__V1__OP_KIND__PUT;
	op.flags = RMA__V1__OP_FLAG__OP_FLAG_NOTIFY;
	op.peer_id = 0;
	op.notify_value = 0x8182838485868788ull;
	oprec_encode(p, &op);
	ck_assert_uint_eq(le64_at(p + 56), op.notify_value);
	ck_assert_int_eq(oprec_decode(p, &back), 0);
	ck_assert_uint_eq(back.notify_value, op.notify_value);
	ck_assert_uint_eq(back.peer_id, 0);
	ck_assert_uint_eq(back.region_id, op.region_id);
	ck_assert_uint_eq(back.length, op.length);
	/* without the flag those bytes are the peer id and reserved */
	op.flags = 0;
	oprec_encode(p, &op);
	ck_assert_int_eq(oprec_decode(p, &back), 0);
	ck_assert_uint_eq(back.notify_value, 0);
}
END_TEST

START_TEST(test_comprec_layout_and_roundtrip)
{
	struct comprec in = {0x8182838485868788ull, 0x9192939495969798ull,
			     RMA__V1__STATUS__ERR_PROTOCOL};
	struct comprec neg = {1, 0, -2}, out;
	uint8_t p[COMPREC_SIZE];

	memset(p, 0xee, sizeof(p));
	comprec_encode(p, &in);
	ck_assert_uint_eq(le64_at(p), in.op_id);
	ck_assert_uint_eq(le64_at(p + 8), in.bytes);
	ck_assert_uint_eq(le32_at(p + 16), (uint32_t)in.status);
	ck_assert_uint_eq(le32_at(p + 20), 0); /* reserved */
	comprec_decode(p, &out);
	ck_assert_uint_eq(out.op_id, in.op_id);
	ck_assert_uint_eq(out.bytes, in.bytes);
	ck_assert_int_eq(out.status, in.status);
	/* A status outside the enum comes back as it went. */
	comprec_encode(p, &neg);
	comprec_decode(p, &out);
	ck_assert_int_eq(out.status, -2);
}
END_TEST

START_TEST(test_notifrec_layout_and_roundtrip)
{
	struct notifrec in = {0x0102030405060708ull, 0x1112131415161718ull,
			      0x2122232425262728ull, 0x3132333435363738ull,
			      0x41424344u},
			out;
	uint8_t p[NOTIFREC_SIZE];

	memset(p, 0xee, sizeof(p));
	notifrec_encode(p, &in);
	ck_assert_uint_eq(le64_at(p), in.region_id);
	ck_assert_uint_eq(le64_at(p + 8), in.offset);
	ck_assert_uint_eq(le64_at(p + 16), in.length);
	ck_assert_uint_eq(le64_at(p + 24), in.value);
	ck_assert_uint_eq(le32_at(p + 32), in.sender);
	ck_assert_uint_eq(le32_at(p + 36), 0); /* reserved */
	ck_assert_int_eq(notifrec_decode(p, &out), 0);
	ck_assert_uint_eq(out.region_id, in.region_id);
	ck_assert_uint_eq(out.offset, in.offset);
	ck_assert_uint_eq(out.length, in.length);
	ck_assert_uint_eq(out.value, in.value);
	ck_assert_uint_eq(out.sender, in.sender);
	/* reserved bytes not 0: said so, the fields still read */
	p[39] = 1;
	ck_assert_int_eq(notifrec_decode(p, &out), -1);
	ck_assert_uint_eq(out.value, in.value);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("oprec");
	TCase *tc = tcase_create("oprec");

	tcase_add_test(tc, test_op_layout);
	tcase_add_test(tc, test_op_roundtrip);
	tcase_add_test(tc, test_op_reserved_refused);
	tcase_add_test(tc, test_op_notify_value);
	tcase_add_test(tc, test_comprec_layout_and_roundtrip);
	tcase_add_test(tc, test_notifrec_layout_and_roundtrip);
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
