/* SPDX-License-Identifier: BSD-2-Clause */
/* Unit: the id map (daemon/idmap.c), alone: the region, remote and peer
 * tables look ids up through it on every operation. */
#include <check.h>
#include <stdint.h>

#include "check_main.h"
#include "idmap.h"

enum { IDMAP_N = 10000 };

/* A map holding 1..IDMAP_N, each id mapped to twice itself. */
static void
idmap_filled(struct idmap *m)
{
	idmap_init(m);
	for (uintptr_t k = 1; k <= IDMAP_N; k++)
		ck_assert_int_eq(idmap_put(m, k, (void *)(k * 2)), 0);
	ck_assert_uint_eq(m->count, IDMAP_N);
}

START_TEST(test_put_get_remove)
{
	struct idmap m;

	idmap_filled(&m);
	for (uintptr_t k = 1; k <= IDMAP_N; k += 2)
		ck_assert_ptr_eq(idmap_remove(&m, k), (void *)(k * 2));
	ck_assert_ptr_null(idmap_remove(&m, 1));
	ck_assert_uint_eq(m.count, IDMAP_N / 2);
	for (uintptr_t k = 1; k <= IDMAP_N; k++)
		ck_assert_ptr_eq(idmap_get(&m, k),
				 k % 2 ? NULL : (void *)(k * 2));
	ck_assert_ptr_null(idmap_get(&m, IDMAP_N + 1));
	idmap_cleanup(&m);
}
END_TEST

/* A second put of the same id replaces the value, it adds no entry. */
START_TEST(test_put_replaces)
{
	struct idmap m;
	int a, b;

	idmap_init(&m);
	ck_assert_ptr_null(idmap_get(&m, 7)); /* empty: no table yet */
	ck_assert_ptr_null(idmap_remove(&m, 7));
	ck_assert_int_eq(idmap_put(&m, 7, &a), 0);
	ck_assert_int_eq(idmap_put(&m, 7, &b), 0);
	ck_assert_uint_eq(m.count, 1);
	ck_assert_ptr_eq(idmap_get(&m, 7), &b);
	ck_assert_ptr_eq(idmap_remove(&m, 7), &b);
	ck_assert_ptr_null(idmap_get(&m, 7));
	idmap_cleanup(&m);
}
END_TEST

/* 0 marks an empty slot and UINT64_MAX a removed one: neither is an id. */
START_TEST(test_reserved_keys_refused)
{
	struct idmap m;
	int a;

	idmap_init(&m);
	ck_assert_int_eq(idmap_put(&m, 0, &a), -1);
	ck_assert_int_eq(idmap_put(&m, UINT64_MAX, &a), -1);
	ck_assert_int_eq(idmap_put(&m, 1, &a), 0);
	ck_assert_ptr_null(idmap_get(&m, 0));
	ck_assert_ptr_null(idmap_get(&m, UINT64_MAX));
	ck_assert_ptr_null(idmap_remove(&m, 0));
	ck_assert_ptr_null(idmap_remove(&m, UINT64_MAX));
	ck_assert_uint_eq(m.count, 1);
	idmap_cleanup(&m);
}
END_TEST

/* The iteration sees each live value once, none of the removed ones. */
START_TEST(test_next_sees_live_values)
{
	struct idmap m;
	size_t pos = 0, seen = 0;
	void *v;

	idmap_filled(&m);
	for (uintptr_t k = 1; k <= IDMAP_N; k += 2)
		idmap_remove(&m, k);
	while (idmap_next(&m, &pos, &v)) {
		ck_assert_uint_eq((uintptr_t)v % 4, 0);
		seen++;
	}
	ck_assert_uint_eq(seen, IDMAP_N / 2);
	idmap_cleanup(&m);
}
END_TEST

/* Churn: removed slots are reused without growing forever. */
START_TEST(test_churn_bounded)
{
	struct idmap m;

	idmap_filled(&m);
	for (uintptr_t k = 1; k <= IDMAP_N; k += 2)
		idmap_remove(&m, k);
	for (uintptr_t k = 20000; k < 200000; k++) {
		idmap_put(&m, k, (void *)k);
		idmap_remove(&m, k);
	}
	ck_assert_uint_le(m.cap, 65536);
	ck_assert_uint_eq(m.count, IDMAP_N / 2);
	idmap_cleanup(&m);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("idmap");
	TCase *tc = tcase_create("idmap");

	tcase_add_test(tc, test_put_get_remove);
	tcase_add_test(tc, test_put_replaces);
	tcase_add_test(tc, test_reserved_keys_refused);
	tcase_add_test(tc, test_next_sees_live_values);
	tcase_add_test(tc, test_churn_bounded);
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
