/* SPDX-License-Identifier: BSD-2-Clause */
/* common/ucx_defaults.c: the UCX settings rmad and bench/raw_ucx apply,
 * the environment's winning, and the RX segment that must not outgrow
 * what a zero-copy sender may put in one fragment. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "ucx_defaults.h"

static const struct ucx_default *
find(const char *env)
{
	for (const struct ucx_default *u = ucx_defaults; u->env; u++)
		if (strcmp(u->env, env) == 0)
			return u;
	ck_abort_msg("%s is not in the table", env);
	return NULL;
}

/* The value in force for env, and whether the environment set it. */
static void
in_force(const char *env, const char *want, int want_from_env)
{
	int from_env = -1;
	const char *v = ucx_defaults_effective(find(env), &from_env);

	ck_assert_str_eq(v, want);
	ck_assert_int_eq(from_env, want_from_env);
}

static void
clear(void)
{
	unsetenv("UCX_ZCOPY_THRESH");
	unsetenv("UCX_TCP_TX_SEG_SIZE");
	unsetenv("UCX_TCP_RX_SEG_SIZE");
}

START_TEST(test_rmad_values)
{
	in_force("UCX_ZCOPY_THRESH", "inf", 0);
	in_force("UCX_TCP_TX_SEG_SIZE", "64k", 0);
	in_force("UCX_TCP_RX_SEG_SIZE", "1m", 0);
	/* 64 KiB less UCX's 16 bytes and the header */
	ck_assert_uint_eq(ucx_defaults_am_fragment(48), 65536 - 16 - 48);
}
END_TEST

START_TEST(test_environment_wins)
{
	setenv("UCX_TCP_TX_SEG_SIZE", "32k", 1);
	setenv("UCX_TCP_RX_SEG_SIZE", "128k", 1);
	in_force("UCX_TCP_TX_SEG_SIZE", "32k", 1);
	in_force("UCX_TCP_RX_SEG_SIZE", "128k", 1);
	ck_assert_uint_eq(ucx_defaults_am_fragment(48), 32768 - 16 - 48);
	/* a size UCX would not parse: UCX's own 8 KiB fragment */
	setenv("UCX_TCP_TX_SEG_SIZE", "lots", 1);
	ck_assert_uint_eq(ucx_defaults_am_fragment(48), 8192 - 16 - 48);
	/* a header that leaves no room still gets a byte a piece */
	setenv("UCX_TCP_TX_SEG_SIZE", "64", 1);
	ck_assert_uint_eq(ucx_defaults_am_fragment(48), 1);
}
END_TEST

/* Zero-copy sends on: UCX bounds their fragments by the sender's RX
 * segment, so rmad's 1 MiB one would overrun a peer at 64 KiB. */
START_TEST(test_zero_copy_keeps_rx_at_tx)
{
	setenv("UCX_ZCOPY_THRESH", "16k", 1);
	in_force("UCX_ZCOPY_THRESH", "16k", 1);
	in_force("UCX_TCP_RX_SEG_SIZE", "64k", 0);
	setenv("UCX_TCP_TX_SEG_SIZE", "32k", 1);
	in_force("UCX_TCP_RX_SEG_SIZE", "32k", 0);
	/* unless the environment says which RX segment it wants */
	setenv("UCX_TCP_RX_SEG_SIZE", "256k", 1);
	in_force("UCX_TCP_RX_SEG_SIZE", "256k", 1);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("ucx_defaults");
	TCase *tc = tcase_create("effective");

	tcase_add_checked_fixture(tc, clear, clear);
	tcase_add_test(tc, test_rmad_values);
	tcase_add_test(tc, test_environment_wins);
	tcase_add_test(tc, test_zero_copy_keeps_rx_at_tx);
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
