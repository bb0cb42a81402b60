/* Daemon-to-daemon messages: UCX active messages with fixed structs,
 * always sent with a reply endpoint. Every struct starts with the magic,
 * so a stray or foreign message is dropped. */
#ifndef RMAD_AM_H
#define RMAD_AM_H

#include <stdint.h>

#include "descriptor.h"

enum am_id {
	AM_HELLO = 1,	      /* am_hello: are you an rmad, who are you */
	AM_HELLO_REPLY = 2,   /* am_hello */
	AM_RESOLVE = 3,	      /* am_resolve: describe one of your regions */
	AM_RESOLVE_REPLY = 4, /* am_resolve_reply [+ packed rkey] */
	AM_FREED = 5,	      /* am_freed: a region you resolved is gone */
	AM_PUT = 6,	      /* header am_rma, data: the bytes to write */
	AM_PUT_ACK = 7,	      /* header am_rma_answer: written (or refused) */
	AM_GET = 8,	      /* header am_rma: send me these bytes */
	AM_GET_REPLY = 9,     /* header am_rma_answer, data: the bytes */
	AM_BATCH = 10,        /* data: am_rma records (kind in pad), put
				 records followed by their bytes */
	AM_BATCH_REPLY = 11,  /* data: am_rma_answer + uint64 length + bytes,
				 one per record, in order */
};

/* Ids below this have a handler (unknown ones drop the message). */
#define AM_ID_LIMIT 64

/* Puts and gets up to this size travel in batches: one message per peer
 * per client frame, one answer per batch. */
#define AM_BATCH_SMALL 8192
#define AM_BATCH_BYTES (64 * 1024)

#define AM_MAGIC 0x726d6164u /* "rmad" */
#define AM_VERSION 1
#define AM_RKEY_MAX 4096

struct am_hello {
	uint32_t magic;
	uint32_t version;
	uint64_t token;
	uint8_t daemon_id[DAEMON_ID_SIZE];
};

struct am_resolve {
	uint32_t magic;
	uint32_t pad;
	uint64_t token;
	uint8_t daemon_id[DAEMON_ID_SIZE];
	uint64_t region_id;
	uint64_t generation;
};

struct am_resolve_reply {
	uint32_t magic;
	int32_t status; /* wire status */
	uint64_t token;
	uint64_t addr; /* 0 unless UCX-native RMA is offered */
	uint64_t length;
	uint32_t rkey_len; /* 0: use AM_PUT/AM_GET */
	uint32_t pad;
	/* rkey_len bytes of packed rkey follow */
};

struct am_freed {
	uint32_t magic;
	uint32_t pad;
	uint8_t daemon_id[DAEMON_ID_SIZE];
	uint64_t region_id;
	uint64_t generation;
};

/* A put or get named by region, never by address: the target checks it
 * against its own region table before touching memory. */
struct am_rma {
	uint32_t magic;
	uint32_t pad;
	uint64_t token;
	uint64_t region_id;
	uint64_t generation;
	uint64_t offset;
	uint64_t length;
};

struct am_rma_answer {
	uint32_t magic;
	int32_t status; /* wire status */
	uint64_t token;
};

#endif
