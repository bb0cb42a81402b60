/* SPDX-License-Identifier: BSD-2-Clause */
/* Where the daemon listens and clients connect, by default, and the
 * per-user directory that holds the socket when there is no
 * XDG_RUNTIME_DIR. In common/ (librmacommon), linked into the daemon,
 * librma and rmactl alike, so the rule lives in one place. */
#ifndef RMA_SOCKET_PATH_H
#define RMA_SOCKET_PATH_H

#include <stddef.h>

/* The system service's socket. */
#define SOCKET_PATH_SYSTEM "/run/rmad/rmad.sock"

/* The user the packaged service runs as (systemd/sysusers.conf). */
#define SOCKET_PATH_SERVICE_USER "rmad"

/* $RMAD_SOCKET if set and not empty, else $XDG_RUNTIME_DIR/rmad.sock if
 * XDG_RUNTIME_DIR is set and not empty, else the per-user directory's
 * ${TMPDIR:-/tmp}/rmad-UID/rmad.sock.
 * Returns 0, or -1 (buf holds a truncated path) when it does not fit. */
int socket_path_default(char *buf, size_t len);

/* Where a client connects by default: as socket_path_default(), except
 * that when no socket is there but the system service's is, that one. */
int socket_path_client(char *buf, size_t len);

/* When path lies directly in the per-user directory: checks that the
 * directory is one only this user controls (a directory, not a symlink,
 * owned by getuid(), no group or other access). Returns 0 when it is, or
 * when path lies elsewhere; -1 with errno ENOENT when the directory does
 * not exist; -1 with errno EPERM and why in err otherwise. */
int socket_path_check_dir(const char *path, char *err, size_t err_len);

/* As socket_path_check_dir(), creating the directory (0700) first when it
 * does not exist: the daemon's side. */
int socket_path_make_dir(const char *path, char *err, size_t err_len);

/* The daemon's side: checks that nobody but geteuid() and root can put a
 * name beside path (a socket, or "<path>.takeover" before rmad binds it),
 * nor move the directories above it. The directory holding path (symlinks
 * resolved) must belong to geteuid() or root and be writable by no other
 * user (not by all, nor by a group with members besides geteuid() and root),
 * sticky or not: a sticky bit protects names that exist, not one still
 * free. Every directory above it must belong to geteuid() or root and be
 * either writable by no other user, or sticky (/tmp): nobody else may
 * then rename what lies below. Returns 0 (also
 * when the directory does not exist: binding or connecting there fails on
 * its own), or -1 with errno EPERM, or another errno, and why in err. */
int socket_path_check_private(const char *path, char *err, size_t err_len);

#endif
