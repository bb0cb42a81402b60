/* SPDX-License-Identifier: BSD-2-Clause */
/* The end of every Check suite's main(): run, report, exit status. */
#ifndef RMA_TEST_CHECK_MAIN_H
#define RMA_TEST_CHECK_MAIN_H

#include <check.h>

static inline int
check_main_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

#endif
