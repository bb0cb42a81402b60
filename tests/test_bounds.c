/* SPDX-License-Identifier: BSD-2-Clause */
/* Unit: the range check made before any byte moves (daemon/bounds.h). */
#include <check.h>
#include <stdint.h>

#include "bounds.h"
#include "check_main.h"

START_TEST(test_edges)
{
	ck_assert(bounds_within(0, 1, 1));
	ck_assert(bounds_within(0, 0, 0));
	ck_assert(bounds_within(4095, 1, 4096));
	ck_assert(!bounds_within(4095, 2, 4096));
	ck_assert(!bounds_within(4097, 0, 4096));
	ck_assert(bounds_within(4096, 0, 4096)); /* empty, at the end */
}
END_TEST

/* Sums that wrap around 2^64 must not pass for small ones. */
START_TEST(test_no_overflow)
{
	ck_assert(!bounds_within(1, UINT64_MAX, 4096));
	ck_assert(!bounds_within(UINT64_MAX, 2, 4096));
	ck_assert(!bounds_within(2, UINT64_MAX - 1, UINT64_MAX));
	ck_assert(bounds_within(1, UINT64_MAX - 1, UINT64_MAX));
	ck_assert(bounds_within(0, UINT64_MAX, UINT64_MAX));
	ck_assert(!bounds_within(UINT64_MAX, UINT64_MAX, UINT64_MAX));
}
END_TEST

/* Against the plain definition in wider arithmetic, for every small
 * input and for inputs next to 2^64. */
START_TEST(test_matches_definition)
{
	static const uint64_t big[] = {0,
				       1,
				       2,
				       UINT64_MAX / 2,
				       UINT64_MAX / 2 + 1,
				       UINT64_MAX - 2,
				       UINT64_MAX - 1,
				       UINT64_MAX};
	enum { NBIG = sizeof(big) / sizeof(big[0]) };

	for (uint64_t size = 0; size < 24; size++)
		for (uint64_t off = 0; off < 24; off++)
			for (uint64_t len = 0; len < 24; len++)
				ck_assert_int_eq(bounds_within(off, len, size),
						 off + len <= size);
	for (int i = 0; i < NBIG; i++)
		for (int j = 0; j < NBIG; j++)
			for (int k = 0; k < NBIG; k++) {
				unsigned __int128 end =
				    (unsigned __int128)big[i] + big[j];
				ck_assert_int_eq(
				    bounds_within(big[i], big[j], big[k]),
				    end <= big[k]);
			}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("bounds");
	TCase *tc = tcase_create("bounds");

	tcase_add_test(tc, test_edges);
	tcase_add_test(tc, test_no_overflow);
	tcase_add_test(tc, test_matches_definition);
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
