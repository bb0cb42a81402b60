/* SPDX-License-Identifier: BSD-2-Clause */
#include "socket_path.h"

#include <errno.h>
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
