/* SPDX-License-Identifier: BSD-2-Clause */
/* Shared by rmactl's files: one per command, plus files and JSON. */
#ifndef RMACTL_H
#define RMACTL_H

#include <stdint.h>
#include <stdio.h>

#include <protobuf-c/protobuf-c.h>

#include "rma.h"
#include "size.h"

enum {
	RMACTL_STATUS,
	RMACTL_EXPOSE,
	RMACTL_PUT,
	RMACTL_GET,
	RMACTL_BENCH,
	RMACTL_ATOMIC
};

/* --socket, or NULL for the default */
extern const char *rmactl_socket;
/* usage of each command, indexed by the enum above */
extern const char *const rmactl_cmd_usage[];

/* ---- rmactl.c: errors and arguments ---- */

int rmactl_exit_code(rma_status_t st);
/* Print "rmactl: CMD: ..." and return code. */
int rmactl_errx(int code, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* One line for a library failure, with rma_last_error(client). */
int rmactl_fail(const char *cmd, rma_status_t st, const rma_client_t *client);
/* The daemon's status (rma_daemon_status) unpacked into *status_p (free
 * with rma__v1__status_reply__free_unpacked(s, NULL)): 0, or the failure
 * printed and its exit code. */
struct Rma__V1__StatusReply;
int rmactl_status_get(const char *cmd, rma_client_t *client,
		      struct Rma__V1__StatusReply **status_p);
/* A usage error of command cmd (-1: none); returns EX_USAGE. */
int rmactl_usage_error(int cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

int rmactl_parse_timeout(const char *s, int *ms_p);
int rmactl_check_address(const char *addr);

/* ---- rmactl.c: text for the tables ---- */

/* v bytes as "512 B", "1.5 MiB", ... */
void rmactl_bytes(char *buf, size_t len, uint64_t v);
/* s, or "-" when it is NULL or empty */
const char *rmactl_or_dash(const char *s);
/* A PeerState as a word ("up"), the same as in JSON */
const char *rmactl_peer_state(int state);
/* p's last error with how long ago it happened, or "-". */
struct Rma__V1__PeerInfo;
void rmactl_peer_last_error(char *buf, size_t len,
			    const struct Rma__V1__PeerInfo *p);
/* An OpKind as a word ("put"), the same as in JSON */
const char *rmactl_op_kind(int kind);
/* rmactl_ops.c: the peers table of rmactl peers and status, each line
 * after indent: at most 100 columns, or with every detail (wide). */
struct Rma__V1__StatusReply;
/* What each local user holds against the per-uid limits, a line each. */
void rmactl_users_print(const struct Rma__V1__StatusReply *s,
			const char *indent);
void rmactl_peers_print(const struct Rma__V1__StatusReply *s, int wide,
			const char *indent);

/* ---- commands ---- */

int rmactl_status_run(int argc, char **argv);
int rmactl_expose_run(int argc, char **argv);
int rmactl_xfer_put(int argc, char **argv);
int rmactl_xfer_get(int argc, char **argv);
/* Connect, reach the peer and import the descriptor; prints the failure
 * and returns an exit code. */
int rmactl_xfer_connect(const char *cmd, const char *peer_address,
			const char *desc, rma_client_t **client_p,
			rma_remote_t **remote_p);
/* rmactl_atomic.c */
int rmactl_atomic_run(int argc, char **argv);
/* An atomic operation's name as on the command line, or -1. */
int rmactl_atomic_op_parse(const char *s);
/* rmactl_ops.c: parts of status, and ping */
int rmactl_ops_peers(int argc, char **argv);
int rmactl_ops_clients(int argc, char **argv);
int rmactl_ops_users(int argc, char **argv);
int rmactl_ops_regions(int argc, char **argv);
int rmactl_ops_ops(int argc, char **argv);
int rmactl_ops_ping(int argc, char **argv);
int rmactl_bench_run(int argc, char **argv);
int rmactl_top_run(int argc, char **argv);
/* rmactl_wait.c: readiness of the daemon, a peer, a file */
int rmactl_wait_run(int argc, char **argv);

/* ---- rmactl_file.c ---- */

int rmactl_file_read_fd(int fd, uint8_t **buf_p, size_t *len_p);
/* Input files print their error and return an exit code: EX_NOINPUT when
 * the file cannot be opened (or is a directory), EX_IOERR when reading
 * fails. Output files the user names that cannot be written are
 * EX_CANTCREAT; stdout is EX_IOERR. */
int rmactl_file_open_input(const char *cmd, const char *path, int *fd_p);
int rmactl_file_read(const char *cmd, const char *path, uint8_t **buf_p,
		     size_t *len_p);
int rmactl_file_read_exact(int fd, void *dst, size_t len);
int rmactl_file_write_all(int fd, const void *p, size_t n);
int rmactl_file_write_atomic(const char *path, const void *p, size_t n);
/* The first line of path, checked as a descriptor; prints the error and
 * returns an exit code on failure. */
int rmactl_file_read_descriptor(const char *cmd, const char *path,
				char **desc_p);

/* ---- rmactl_json.c ---- */

/* Version of the JSON documents rmactl prints, their first field
 * "schema_version": raised when a field changes meaning or goes away (new
 * fields may appear in any version). 1: 64-bit integers as strings, enums
 * as the tables' words. */
#define RMACTL_JSON_SCHEMA 1

/* Print msg as one JSON object, schema_version first: every field under its
 * .proto name (set or not), enums as words (rmactl_json_enum_word), 64-bit
 * integers as decimal strings (proto3 JSON mapping), bytes as hex. */
int rmactl_json_print(FILE *f, const ProtobufCMessage *msg);
/* The same for the named fields of msg only (NULL-terminated list). */
int rmactl_json_print_fields(FILE *f, const ProtobufCMessage *msg,
			     const char *const *names);
/* An enum value as a word: its .proto name without the prefix all values
 * share, in lower case (PEER_UP -> "up", PUT -> "put"); NULL when unknown. */
const char *rmactl_json_enum_word(const ProtobufCEnumDescriptor *desc,
				  int value);
/* s as a JSON string, escaped. */
void rmactl_json_quote(FILE *f, const char *s);

#endif
