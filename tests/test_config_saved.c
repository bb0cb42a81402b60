/* SPDX-License-Identifier: BSD-2-Clause */
/* Unit: daemon/config_saved.c's encoding alone. What a start saves is
 * what a later start runs on: every option back as it was, the cluster
 * key without its file, this start's take_over and fds kept; an option
 * a newer rmad saved is skipped, a damaged blob refused. */
#include <check.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "config_saved.h"
#include "daemon.h"

/* config_print's text of cfg (free it). */
static char *
printed(const struct config *cfg)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	ck_assert_ptr_nonnull(f);
	config_print(f, cfg);
	ck_assert_int_eq(fclose(f), 0);
	return text;
}

static void
set(struct config *cfg, const char *name, const char *value)
{
	char err[256];

	ck_assert_msg(config_set(cfg, name, value, err, sizeof(err)) == 0,
		      "%s = %s: %s", name, value, err);
}

START_TEST(test_round_trip)
{
	struct config cfg, back;
	struct config_saved s = {0};
	char err[256], *a, *b;

	config_defaults(&cfg);
	set(&cfg, "listen", "[::1]:14001");
	set(&cfg, "peer_allow", "10.1.0.0/24,fd00::/8");
	set(&cfg, "allow_users", "0");
	set(&cfg, "op_timeout", "2.5");
	set(&cfg, "max_regions", "7");
	set(&cfg, "net_devices", "lo");
	set(&cfg, "peer_key_file", "/nowhere/key");
	cfg.peer_key_set = true;
	memset(cfg.peer_key, 0xa5, sizeof(cfg.peer_key));
	cfg.take_over = true; /* how that process started: not saved */
	ck_assert_int_eq(config_saved_encode(&cfg, &s), 0);

	config_defaults(&back);
	back.ready_fd = 9;
	ck_assert_int_eq(
	    config_saved_decode(s.blob, s.len, &back, err, sizeof(err)), 0);
	cfg.take_over = false;
	a = printed(&cfg);
	b = printed(&back);
	ck_assert_str_eq(a, b);
	/* the key without reading its file, which does not exist */
	ck_assert(back.peer_key_set);
	ck_assert_int_eq(
	    memcmp(back.peer_key, cfg.peer_key, sizeof(cfg.peer_key)), 0);
	/* this start's: not the saved process's */
	ck_assert_int_eq(back.ready_fd, 9);
	ck_assert(!back.take_over);
	free(a);
	free(b);
	config_saved_free(&s);
}
END_TEST

/* Two encodings of one configuration are the same bytes: a restart on
 * an unchanged file stores nothing new. */
START_TEST(test_encoding_is_stable)
{
	struct config cfg, back;
	struct config_saved s1 = {0}, s2 = {0};
	char err[256];

	config_defaults(&cfg);
	set(&cfg, "peer_allow", "192.168.0.0/16");
	set(&cfg, "shutdown_timeout", "0.25");
	ck_assert_int_eq(config_saved_encode(&cfg, &s1), 0);
	config_defaults(&back);
	ck_assert_int_eq(
	    config_saved_decode(s1.blob, s1.len, &back, err, sizeof(err)), 0);
	ck_assert_int_eq(config_saved_encode(&back, &s2), 0);
	ck_assert_uint_eq(s1.len, s2.len);
	ck_assert_int_eq(memcmp(s1.blob, s2.blob, s1.len), 0);
	config_saved_free(&s1);
	config_saved_free(&s2);
}
END_TEST

/* A saved configuration with an option this rmad does not know (a newer
 * one saved it): skipped, the rest taken. A value it refuses, or a blob
 * cut short or not rmad's: refused whole. */
START_TEST(test_unknown_and_damaged)
{
	struct config cfg, back;
	struct config_saved s = {0};
	uint8_t *grown, *bad;
	size_t len;
	char err[256];
	const char extra[] = "from_the_future = 1\n";

	config_defaults(&cfg);
	set(&cfg, "max_regions", "7");
	ck_assert_int_eq(config_saved_encode(&cfg, &s), 0);
	/* the text is last: append a line, and fix the length in the
	 * header (its third word) */
	len = s.len + strlen(extra);
	grown = malloc(len);
	ck_assert_ptr_nonnull(grown);
	memcpy(grown, s.blob, s.len);
	memcpy(grown + s.len, extra, strlen(extra));
	{
		uint32_t text_len;
		memcpy(&text_len, grown + 8, sizeof(text_len));
		text_len += (uint32_t)strlen(extra);
		memcpy(grown + 8, &text_len, sizeof(text_len));
	}
	config_defaults(&back);
	ck_assert_int_eq(
	    config_saved_decode(grown, len, &back, err, sizeof(err)), 0);
	ck_assert_uint_eq(back.max_regions, 7);

	bad = malloc(len + 32);
	ck_assert_ptr_nonnull(bad);
	memcpy(bad, grown, len);
	memcpy(bad + len, "max_regions = none\n", 19);
	{
		uint32_t text_len;
		memcpy(&text_len, bad + 8, sizeof(text_len));
		text_len += 19;
		memcpy(bad + 8, &text_len, sizeof(text_len));
	}
	ck_assert_int_eq(
	    config_saved_decode(bad, len + 19, &back, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "max_regions"));
	ck_assert_int_eq(
	    config_saved_decode(s.blob, s.len - 1, &back, err, sizeof(err)),
	    -1);
	ck_assert_int_eq(
	    config_saved_decode(s.blob, 8, &back, err, sizeof(err)), -1);
	s.blob[0] ^= 1;
	ck_assert_int_eq(
	    config_saved_decode(s.blob, s.len, &back, err, sizeof(err)), -1);
	free(bad);
	free(grown);
	config_saved_free(&s);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("config_saved");
	TCase *tc = tcase_create("encoding");

	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_encoding_is_stable);
	tcase_add_test(tc, test_unknown_and_damaged);
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
