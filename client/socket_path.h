/* Where the daemon listens and clients connect, by default. Shared with the
 * daemon (compiled into both), so the rule lives in one place. */
#ifndef RMA_SOCKET_PATH_H
#define RMA_SOCKET_PATH_H

#include <stddef.h>

/* $RMAD_SOCKET if set and not empty, else $XDG_RUNTIME_DIR/rmad.sock if
 * XDG_RUNTIME_DIR is set and not empty, else /tmp/rmad-UID.sock.
 * Returns 0, or -1 (buf holds a truncated path) when it does not fit. */
int socket_path_default(char *buf, size_t len);

/* The system service's socket. */
#define SOCKET_PATH_SYSTEM "/run/rmad/rmad.sock"

/* Where a client connects by default: as socket_path_default(), except
 * that when no socket is there but the system service's is, that one. */
int socket_path_client(char *buf, size_t len);

#endif
