/* SPDX-License-Identifier: BSD-2-Clause */
/* Shared by the fuzz targets: the libFuzzer entry point, and how a target
 * cuts its input into the chunks it feeds a reader, so that the fuzzer
 * also explores how a stream is split across reads.
 *
 * Stream targets take [flags byte][chunk byte][stream...]: the chunk byte
 * seeds the sizes (0 = the whole stream at once, else 1 to 2^(1 + (b & 7))
 * bytes each, from a generator seeded with b). */
#ifndef RMA_FUZZ_H
#define RMA_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* fuzz_dispatch's daemon identity (DAEMON_ID_SIZE bytes), so that the
 * corpus can hold descriptors of its regions. */
#define FUZZ_DAEMON_ID "rmad-fuzz-daemon"

/* fuzz_peer's records (see fuzz_peer.c): [flags][id lo][id hi][hlen]
 * [dlen lo][dlen hi][header][data]. flags & 7 picks the endpoint. */
enum fuzz_peer_sel {
	FUZZ_PEER_A,		/* inbound, handshake done */
	FUZZ_PEER_B,		/* inbound, any state but down */
	FUZZ_PEER_C,		/* outbound, any state but down */
	FUZZ_PEER_C_CONNECTING, /* outbound, its hello not answered */
	FUZZ_PEER_BOGUS_EP,	/* an endpoint pointer nobody made */
	FUZZ_PEER_NO_REPLY_EP,	/* no UCP_AM_RECV_ATTR_FIELD_REPLY_EP */
	FUZZ_PEER_FAR_EP,	/* a real endpoint, far's own */
	FUZZ_PEER_B_FRESH,	/* inbound, just accepted, nothing said */
};
#define FUZZ_PEER_RNDV 0x08  /* UCP_AM_RECV_ATTR_FLAG_RNDV */
#define FUZZ_PEER_TOKEN 0x10 /* the peer's hello token at data + 8 */
#define FUZZ_PEER_DLEN_REST 0xffff
/* fuzz_peer's victim regions: ids 1 and 2, these lengths and
 * generations. */
#define FUZZ_PEER_R1_LEN 4096
#define FUZZ_PEER_R1_GEN 0x5eed0001u
#define FUZZ_PEER_R2_LEN 100
#define FUZZ_PEER_R2_GEN 0x5eed1001u
/* The far daemon's identity (DAEMON_ID_SIZE bytes), and the listen port
 * A's hello names (its origin: a hello from the same port, lane and id
 * with a higher epoch replaces A). */
#define FUZZ_FAR_ID "fuzz-far-daemon!"
#define FUZZ_FAR_PORT 4242

struct fuzz_chunker {
	uint32_t state;
	uint32_t max;
};

static inline void
fuzz_chunker_init(struct fuzz_chunker *ch, uint8_t b)
{
	ch->state = b ? 0x9e3779b9u * b : 0;
	ch->max = b ? 2u << (b & 7) : 0;
}

/* Size of the next chunk, at most left; all of it for chunk byte 0. */
static inline size_t
fuzz_chunker_next(struct fuzz_chunker *ch, size_t left)
{
	size_t n;

	if (ch->max == 0)
		return left;
	/* xorshift32 */
	ch->state ^= ch->state << 13;
	ch->state ^= ch->state >> 17;
	ch->state ^= ch->state << 5;
	n = 1 + ch->state % ch->max;
	return n < left ? n : left;
}

#endif
