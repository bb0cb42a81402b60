/* SPDX-License-Identifier: BSD-2-Clause */
#include "socket_path.h"

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ${TMPDIR:-/tmp}/rmad-UID: the per-user directory. A bare name in the
 * sticky /tmp could be created first by any local user, and a client
 * would then talk to whoever did; a directory only the user controls
 * cannot be taken over that way (tmux keeps its sockets the same way). */
static int
socket_path_user_dir(char *buf, size_t len)
{
	const char *tmp = getenv("TMPDIR");
	int n;

	if (tmp == NULL || tmp[0] != '/')
		tmp = "/tmp";
	n = snprintf(buf, len, "%s/rmad-%u", tmp, (unsigned)getuid());
	if (n < 0 || (size_t)n >= len)
		return -1;
	return 0;
}

int
socket_path_default(char *buf, size_t len)
{
	char dir[4096];
	const char *env;
	int n;

	env = getenv("RMAD_SOCKET");
	if (env != NULL && env[0] != '\0') {
		n = snprintf(buf, len, "%s", env);
	} else {
		env = getenv("XDG_RUNTIME_DIR");
		if (env != NULL && env[0] != '\0')
			n = snprintf(buf, len, "%s/rmad.sock", env);
		else if (socket_path_user_dir(dir, sizeof(dir)) == 0)
			n = snprintf(buf, len, "%s/rmad.sock", dir);
		else
			n = -1;
	}
	if (n < 0 || (size_t)n >= len)
		return -1;
	return 0;
}

int
socket_path_client(char *buf, size_t len)
{
	const char *env = getenv("RMAD_SOCKET");
	struct stat st;
	char err[8];

	if (socket_path_default(buf, len) < 0)
		return -1;
	/* A daemon of the user's own comes first, then the system service.
	 * A per-user directory that is not the user's does not hide the
	 * system service (connecting there would only be refused). */
	if (env != NULL && env[0] != '\0')
		return 0;
	if (stat(buf, &st) == 0 && socket_path_check_dir(buf, err, 0) == 0)
		return 0;
	if (stat(SOCKET_PATH_SYSTEM, &st) == 0 && S_ISSOCK(st.st_mode))
		snprintf(buf, len, "%s", SOCKET_PATH_SYSTEM);
	return 0;
}

/* Writes the per-user directory to dir when path lies directly in it. */
static bool
socket_path_in_user_dir(const char *path, char *dir, size_t len)
{
	size_t n;

	if (socket_path_user_dir(dir, len) < 0)
		return false;
	n = strlen(dir);
	return strncmp(path, dir, n) == 0 && path[n] == '/' &&
	       path[n + 1] != '\0' && strchr(path + n + 1, '/') == NULL;
}

static int socket_path_refuse(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
socket_path_refuse(char *err, size_t err_len, const char *fmt, ...)
{
	va_list ap;

	if (err_len > 0) {
		va_start(ap, fmt);
		vsnprintf(err, err_len, fmt, ap);
		va_end(ap);
	}
	errno = EPERM;
	return -1;
}

static int
socket_path_check(const char *dir, char *err, size_t err_len)
{
	struct stat st;

	if (lstat(dir, &st) < 0) {
		if (errno == ENOENT)
			return -1;
		return socket_path_refuse(err, err_len, "%s: %s", dir,
					  strerror(errno));
	}
	if (!S_ISDIR(st.st_mode))
		return socket_path_refuse(err, err_len,
					  "%s is not a directory (a symlink "
					  "or a file): not using it",
					  dir);
	if (st.st_uid != getuid())
		return socket_path_refuse(err, err_len,
					  "%s belongs to uid %u, not to uid "
					  "%u: not using it",
					  dir, (unsigned)st.st_uid,
					  (unsigned)getuid());
	if ((st.st_mode & 077) != 0)
		return socket_path_refuse(err, err_len,
					  "%s has mode %04o, not 0700: not "
					  "using it",
					  dir, (unsigned)(st.st_mode & 07777));
	return 0;
}

int
socket_path_check_dir(const char *path, char *err, size_t err_len)
{
	char dir[4096];

	if (!socket_path_in_user_dir(path, dir, sizeof(dir)))
		return 0;
	return socket_path_check(dir, err, err_len);
}

int
socket_path_make_dir(const char *path, char *err, size_t err_len)
{
	char dir[4096];

	if (!socket_path_in_user_dir(path, dir, sizeof(dir)))
		return 0;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return socket_path_refuse(err, err_len, "cannot create %s: %s",
					  dir, strerror(errno));
	return socket_path_check(dir, err, err_len);
}

/* A group whose members are me or root (a user private group: with umask
 * 002 every directory a user makes is group-writable) lets nobody else
 * write. Its members: whoever has it as primary group, and whoever it
 * lists; a group without any may be a setgid program's, and is not ours.
 * Debian's OpenSSH allows a group-writable ~/.ssh on the same rule. */
static bool
socket_path_group_is_mine(gid_t gid)
{
	uid_t me = geteuid();
	struct passwd *pw;
	struct group *gr;
	bool mine = false;

	gr = getgrgid(gid);
	if (gr == NULL)
		return false;
	for (char **m = gr->gr_mem; *m != NULL; m++) {
		pw = getpwnam(*m);
		if (pw == NULL || (pw->pw_uid != me && pw->pw_uid != 0))
			return false;
		mine = true;
	}
	setpwent();
	while ((pw = getpwent()) != NULL) {
		if (pw->pw_gid != gid)
			continue;
		if (pw->pw_uid != me && pw->pw_uid != 0) {
			mine = false;
			break;
		}
		mine = true;
	}
	endpwent();
	return mine;
}

/* Who besides its owner may write a directory: "" if nobody. */
static void
socket_path_writers(const struct stat *st, char *out, size_t len)
{
	struct group *gr;

	out[0] = '\0';
	if (st->st_mode & S_IWOTH) {
		snprintf(out, len, "all users");
	} else if ((st->st_mode & S_IWGRP) &&
		   !socket_path_group_is_mine(st->st_gid)) {
		gr = getgrgid(st->st_gid);
		snprintf(out, len,
			 "group %s (gid %u), which has members besides uid %u "
			 "and root",
			 gr != NULL ? gr->gr_name : "?", (unsigned)st->st_gid,
			 (unsigned)geteuid());
	}
}

/* dir's parent, in place; false at "/". */
static bool
socket_path_up(char *dir)
{
	char *slash = strrchr(dir, '/');

	if (slash == NULL || strcmp(dir, "/") == 0)
		return false;
	if (slash == dir)
		slash[1] = '\0';
	else
		*slash = '\0';
	return true;
}

/* The directory at real (symlinks resolved): 0 if nobody but me and
 * root can put a name in it (holding: the socket's own directory) or move
 * what lies below it (a directory above). */
static int
socket_path_check_one(const char *real, bool holding, char *err, size_t err_len)
{
	uid_t me = geteuid();
	char writers[160];
	struct stat st;

	if (stat(real, &st) < 0) {
		int err_no = errno;

		if (err_len > 0)
			snprintf(err, err_len, "%s: %s", real,
				 strerror(err_no));
		errno = err_no;
		return -1;
	}
	if (st.st_uid != me && st.st_uid != 0)
		return socket_path_refuse(err, err_len,
					  "%s belongs to uid %u, not to uid %u "
					  "or root: that user may replace "
					  "whatever lies in it",
					  real, (unsigned)st.st_uid,
					  (unsigned)me);
	socket_path_writers(&st, writers, sizeof(writers));
	if (writers[0] == '\0')
		return 0;
	if (holding)
		return socket_path_refuse(
		    err, err_len,
		    "%s, the socket's directory, is writable by %s (mode "
		    "%04o): another user may create the names rmad uses "
		    "there (the socket, its .takeover) first and pose as rmad",
		    real, writers, (unsigned)(st.st_mode & 07777));
	if ((st.st_mode & S_ISVTX) == 0)
		return socket_path_refuse(
		    err, err_len,
		    "%s is writable by %s and not sticky (mode %04o): another "
		    "user may move the socket's directory away and put one of "
		    "theirs in its place",
		    real, writers, (unsigned)(st.st_mode & 07777));
	return 0; /* sticky: nobody else renames our directory in it */
}

int
socket_path_check_private(const char *path, char *err, size_t err_len)
{
	const char *slash = strrchr(path, '/');
	char dir[4096], real[PATH_MAX];

	if (slash == NULL)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (realpath(dir, real) == NULL) {
		int err_no = errno;

		if (err_no == ENOENT || err_no == ENOTDIR)
			return 0;
		if (err_len > 0)
			snprintf(err, err_len, "%s: %s", dir, strerror(err_no));
		errno = err_no;
		return -1;
	}
	for (bool holding = true;; holding = false) {
		if (socket_path_check_one(real, holding, err, err_len) < 0)
			return -1;
		if (!socket_path_up(real))
			return 0;
	}
}
