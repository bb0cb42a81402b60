/* SPDX-License-Identifier: BSD-2-Clause */
/* common/socket_path.c: socket_path_check_private, the daemon's rule for
 * the directory its socket (and "<socket>.takeover") lives in: nobody but
 * its user and root may add a name there, nor move it from above. */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_main.h"
#include "socket_path.h"

static char top[32], dir[64], sock[96], err[512];

static void
setup(void)
{
	snprintf(top, sizeof(top), "/tmp/rmad-sockpath.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(top));
	snprintf(dir, sizeof(dir), "%s/d", top);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	snprintf(sock, sizeof(sock), "%s/rmad.sock", dir);
}

static void
teardown(void)
{
	char cmd[64];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	ck_assert_int_eq(system(cmd), 0);
}

/* -1 with EPERM and want in the reason. */
static void
refused(const char *path, const char *want)
{
	err[0] = '\0';
	errno = 0;
	ck_assert_int_eq(socket_path_check_private(path, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EPERM);
	ck_assert_msg(strstr(err, want) != NULL, "'%s' lacks '%s'", err, want);
}

START_TEST(test_modes_of_the_directory)
{
	ck_assert_int_eq(socket_path_check_private(sock, err, sizeof(err)), 0);
	ck_assert_int_eq(chmod(dir, 0755), 0); /* others read, not write */
	ck_assert_int_eq(socket_path_check_private(sock, err, sizeof(err)), 0);
	ck_assert_int_eq(chmod(dir, 0702), 0);
	refused(sock, "writable by all users (mode 0702)");
	/* sticky protects names that exist, not the free .takeover */
	ck_assert_int_eq(chmod(dir, 01777), 0);
	refused(sock, "the socket's directory, is writable by all users (mode "
		      "1777)");
}
END_TEST

/* Group write: refused for a group with members besides us and root,
 * allowed for a user private group (umask 002 makes every directory
 * group-writable). Groups of root's choosing only. */
START_TEST(test_group_members)
{
	if (geteuid() != 0) {
		fprintf(stderr, "socket_path: groups skipped: needs root\n");
		return;
	}
	ck_assert_int_eq(chmod(dir, 0770), 0);
	/* nogroup: the primary group of sync and nobody */
	ck_assert_int_eq(chown(dir, 0, 65534), 0);
	refused(sock, "writable by group nogroup (gid 65534), which has "
		      "members besides uid 0 and root (mode 0770)");
	/* root's own: root alone */
	ck_assert_int_eq(chown(dir, 0, 0), 0);
	ck_assert_int_eq(socket_path_check_private(sock, err, sizeof(err)), 0);
	/* above ours, the same */
	ck_assert_int_eq(chmod(dir, 0700), 0);
	ck_assert_int_eq(chmod(top, 0770), 0);
	ck_assert_int_eq(socket_path_check_private(sock, err, sizeof(err)), 0);
	ck_assert_int_eq(chown(top, 0, 65534), 0);
	refused(sock, "not sticky");
}
END_TEST

START_TEST(test_directories_above)
{
	/* one anyone may write above ours: sticky is enough, else not */
	ck_assert_int_eq(chmod(top, 01777), 0);
	ck_assert_int_eq(socket_path_check_private(sock, err, sizeof(err)), 0);
	ck_assert_int_eq(chmod(top, 0777), 0);
	refused(sock, "not sticky");
	ck_assert_ptr_nonnull(strstr(err, top));
	ck_assert_int_eq(chmod(top, 0700), 0);
}
END_TEST

START_TEST(test_relative_and_symlinked_paths)
{
	char cwd[PATH_MAX], link[96], via[128];

	/* a bare name is in the working directory */
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	ck_assert_int_eq(chdir(dir), 0);
	ck_assert_int_eq(
	    socket_path_check_private("rmad.sock", err, sizeof(err)), 0);
	ck_assert_int_eq(chmod(dir, 0777), 0);
	refused("rmad.sock", dir);
	ck_assert_int_eq(chdir(cwd), 0);
	/* a symlink is judged by where it leads */
	snprintf(link, sizeof(link), "%s/link", top);
	ck_assert_int_eq(symlink(dir, link), 0);
	snprintf(via, sizeof(via), "%s/rmad.sock", link);
	refused(via, dir);
	ck_assert_int_eq(chmod(dir, 0700), 0);
	ck_assert_int_eq(socket_path_check_private(via, err, sizeof(err)), 0);
}
END_TEST

START_TEST(test_missing_directory_and_root)
{
	char missing[128];

	/* nothing to check: bind or connect there fails on its own */
	snprintf(missing, sizeof(missing), "%s/no/such/rmad.sock", top);
	ck_assert_int_eq(socket_path_check_private(missing, err, sizeof(err)),
			 0);
	/* "/" holds /x.sock; root's, not writable by others */
	ck_assert_int_eq(socket_path_check_private("/x.sock", err, sizeof(err)),
			 0);
}
END_TEST

START_TEST(test_another_users_directory)
{
	if (geteuid() != 0) {
		fprintf(stderr, "socket_path: owner skipped: needs root\n");
		return;
	}
	ck_assert_int_eq(chown(dir, 65534, 65534), 0);
	refused(sock, "belongs to uid 65534");
	ck_assert_int_eq(chown(dir, 0, 0), 0);
	/* above ours, too: that user may rename ours away */
	ck_assert_int_eq(chown(top, 65534, 65534), 0);
	refused(sock, "belongs to uid 65534");
	ck_assert_ptr_nonnull(strstr(err, top));
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("socket_path");
	TCase *tc = tcase_create("check_private");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_modes_of_the_directory);
	tcase_add_test(tc, test_group_members);
	tcase_add_test(tc, test_directories_above);
	tcase_add_test(tc, test_relative_and_symlinked_paths);
	tcase_add_test(tc, test_missing_directory_and_root);
	tcase_add_test(tc, test_another_users_directory);
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
