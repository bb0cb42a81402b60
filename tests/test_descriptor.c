/* SPDX-License-Identifier: BSD-2-Clause */
/* Unit: descriptor encoding (proto/descriptor.c) and sizes
 * (proto/size.c). Bounds and the id map: test_bounds.c, test_idmap.c. */
#include <check.h>

#include "check_main.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "descriptor.h"
#include "size.h"

static struct descriptor
sample(void)
{
	struct descriptor d;

	memset(&d, 0, sizeof(d));
	for (int i = 0; i < DAEMON_ID_SIZE; i++)
		d.daemon_id[i] = (uint8_t)(i * 17 + 3);
	d.region_id = 42;
	d.generation = 7;
	d.length = (1u << 20) + 3;
	return d;
}

START_TEST(test_roundtrip)
{
	struct descriptor in = sample(), out;
	char text[DESCRIPTOR_TEXT_SIZE];

	descriptor_format(&in, text);
	ck_assert_uint_eq(strlen(text), DESCRIPTOR_TEXT_SIZE - 1);
	ck_assert_int_eq(strncmp(text, "rma1:", 5), 0);
	ck_assert_int_eq(descriptor_parse(text, strlen(text), &out), 0);
	ck_assert_int_eq(memcmp(&in, &out, sizeof(in)), 0);
}
END_TEST

START_TEST(test_whitespace_accepted)
{
	struct descriptor in = sample(), out;
	char text[DESCRIPTOR_TEXT_SIZE], padded[DESCRIPTOR_TEXT_SIZE + 8];

	descriptor_format(&in, text);
	snprintf(padded, sizeof(padded), "  %s\n", text);
	ck_assert_int_eq(descriptor_parse(padded, strlen(padded), &out), 0);
	ck_assert_uint_eq(out.region_id, 42);
}
END_TEST

START_TEST(test_every_single_corruption_refused)
{
	struct descriptor in = sample(), out;
	char text[DESCRIPTOR_TEXT_SIZE];

	descriptor_format(&in, text);
	/* Any one hex digit changed breaks the checksum. */
	for (size_t i = 5; i < strlen(text); i++) {
		char saved = text[i];
		text[i] = saved == '0' ? '1' : '0';
		ck_assert_int_eq(descriptor_parse(text, strlen(text), &out),
				 -1);
		text[i] = saved;
	}
}
END_TEST

START_TEST(test_malformed_refused)
{
	struct descriptor in = sample(), out;
	char text[DESCRIPTOR_TEXT_SIZE];

	descriptor_format(&in, text);
	ck_assert_int_eq(descriptor_parse(text, strlen(text) - 1, &out), -1);
	ck_assert_int_eq(descriptor_parse("", 0, &out), -1);
	ck_assert_int_eq(descriptor_parse("rma1:", 5, &out), -1);
	text[3] = '2'; /* "rma2:" - another version */
	ck_assert_int_eq(descriptor_parse(text, strlen(text), &out), -1);
	text[3] = '1';
	text[10] = 'g';
	ck_assert_int_eq(descriptor_parse(text, strlen(text), &out), -1);
}
END_TEST

START_TEST(test_size_parse)
{
	uint64_t v;

	ck_assert_int_eq(size_parse("0", &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(size_parse("4096", &v), 0);
	ck_assert_uint_eq(v, 4096);
	ck_assert_int_eq(size_parse("1K", &v), 0);
	ck_assert_uint_eq(v, 1024);
	ck_assert_int_eq(size_parse("16M", &v), 0);
	ck_assert_uint_eq(v, 16u << 20);
	ck_assert_int_eq(size_parse("2GiB", &v), 0);
	ck_assert_uint_eq(v, 2ull << 30);
	ck_assert_int_eq(size_parse("1tb", &v), -1);
	ck_assert_int_eq(size_parse("3T", &v), 0);
	ck_assert_uint_eq(v, 3ull << 40);
	ck_assert_int_eq(size_parse("-1", &v), -1);
	ck_assert_int_eq(size_parse("", &v), -1);
	ck_assert_int_eq(size_parse("1X", &v), -1);
	ck_assert_int_eq(size_parse("1 K", &v), -1);
	ck_assert_int_eq(size_parse("16777216T", &v), -1); /* over 2^64 */
	ck_assert_int_eq(size_parse("99999999999999999999", &v), -1);
}
END_TEST

/* A read-only descriptor round-trips with its mode; its mode cannot be
 * changed by editing the prefix alone, either way. */
START_TEST(test_read_only_mode)
{
	struct descriptor in = sample(), out;
	char text[DESCRIPTOR_TEXT_SIZE], full[DESCRIPTOR_TEXT_SIZE];

	descriptor_format(&in, full);
	in.read_only = 1;
	descriptor_format(&in, text);
	ck_assert_uint_eq(strlen(text), DESCRIPTOR_TEXT_SIZE - 1);
	ck_assert_int_eq(strncmp(text, "rmar:", 5), 0);
	ck_assert_int_eq(descriptor_parse(text, strlen(text), &out), 0);
	ck_assert_int_eq(out.read_only, 1);
	ck_assert_int_eq(memcmp(&in, &out, sizeof(in)), 0);
	/* the same body, other checksum */
	ck_assert_int_eq(strncmp(text + 5, full + 5, 2 * (DAEMON_ID_SIZE + 24)),
			 0);
	ck_assert_str_ne(text + 5, full + 5);
	memcpy(text, "rma1:", 5);
	ck_assert_int_eq(descriptor_parse(text, strlen(text), &out), -1);
	memcpy(full, "rmar:", 5);
	ck_assert_int_eq(descriptor_parse(full, strlen(full), &out), -1);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("descriptor");
	TCase *tc = tcase_create("descriptor");

	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_whitespace_accepted);
	tcase_add_test(tc, test_every_single_corruption_refused);
	tcase_add_test(tc, test_malformed_refused);
	tcase_add_test(tc, test_size_parse);
	tcase_add_test(tc, test_read_only_mode);
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
