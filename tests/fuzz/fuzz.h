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
