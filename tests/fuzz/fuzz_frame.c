/* SPDX-License-Identifier: BSD-2-Clause */
/* Fuzz target: the frame reader (proto/frame.c) as the daemon drives it.
 *
 * Input: [flags][chunk][stream...] (see fuzz.h). flags & 3 picks the
 * maximum frame: the default (1 MiB), 16, 4096 or 65536 bytes. The stream
 * is received in chunks through frame_reader_space/commit, every whole
 * frame is taken with frame_reader_next, unpacked as rma.v1.Request,
 * packed again with frame_pack and freed. A plain reading of the whole stream
 * at once is the oracle: the reader must return exactly its frames, in order,
 * and stop with FRAME_OVERSIZE exactly where it finds a length above the
 * maximum. Any disagreement aborts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "fuzz.h"
#include "rma.pb-c.h"

static void
fuzz_fail(const char *what, size_t at)
{
	fprintf(stderr, "fuzz_frame: %s (stream offset %zu)\n", what, at);
	abort();
}

static uint32_t
get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

/* What a reader with the whole stream in hand finds at off: 1 = a whole
 * frame of *len bytes, 0 = need more, -1 = oversize. */
static int
reference_frame(const uint8_t *s, size_t n, size_t off, uint32_t max,
		uint32_t *len)
{
	if (n - off < FRAME_HEADER_SIZE)
		return 0;
	*len = get_be32(s + off);
	if (*len > max)
		return -1;
	return n - off - FRAME_HEADER_SIZE >= *len;
}

static void
check_request(const uint8_t *payload, size_t len)
{
	Rma__V1__Request *req;
	uint8_t *buf;
	size_t n;

	req = rma__v1__request__unpack(NULL, len, payload);
	if (req == NULL)
		return;
	/* frame_pack's header must say what it packed. (Unpacking that
	 * again is protobuf-c's business, and it does not always work: it
	 * accepts an overlong tag of field 0, 80 80 00, as an unknown field
	 * but writes it back as 00, which it then refuses.) */
	n = frame_packed_size(&req->base);
	buf = malloc(n);
	if (buf == NULL)
		abort();
	frame_pack(&req->base, buf);
	if (get_be32(buf) != n - FRAME_HEADER_SIZE)
		fuzz_fail("frame_pack header disagrees with its size", 0);
	rma__v1__request__free_unpacked(req, NULL);
	free(buf);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint32_t maxes[] = {0, 16, 4096, 65536};
	struct frame_reader r;
	struct fuzz_chunker ch;
	const uint8_t *s;
	size_t n, fed = 0, ref = 0; /* ref: start of the next frame */
	uint32_t max;
	int rc = FRAME_MORE;

	if (size < 2)
		return 0;
	frame_reader_init(&r, maxes[data[0] & 3]);
	max = r.max_frame;
	fuzz_chunker_init(&ch, data[1]);
	s = data + 2;
	n = size - 2;

	while (fed < n && rc != FRAME_OVERSIZE) {
		uint8_t *p;
		size_t avail, k;
		uint32_t len;

		rc = frame_reader_space(&r, &p, &avail);
		if (rc == FRAME_OVERSIZE) {
			if (reference_frame(s, fed, ref, max, &len) != -1)
				fuzz_fail("space: oversize the stream does "
					  "not have",
					  fed);
			break;
		}
		if (rc < 0)
			fuzz_fail("space: out of memory", fed);
		if (avail == 0)
			fuzz_fail("space: no room", fed);
		k = fuzz_chunker_next(&ch, n - fed);
		if (k > avail)
			k = avail;
		memcpy(p, s + fed, k);
		frame_reader_commit(&r, k);
		fed += k;
		for (;;) {
			const uint8_t *payload;
			size_t plen;
			int want = reference_frame(s, fed, ref, max, &len);

			rc = frame_reader_next(&r, &payload, &plen);
			if (rc == FRAME_MORE) {
				if (want != 0)
					fuzz_fail("next: more, but the stream "
						  "has a frame or an oversize",
						  ref);
				break;
			}
			if (rc == FRAME_OVERSIZE) {
				if (want != -1)
					fuzz_fail("next: oversize the stream "
						  "does not have",
						  ref);
				break;
			}
			if (rc != FRAME_READY)
				fuzz_fail("next: unexpected result", ref);
			if (want != 1 || plen != len ||
			    memcmp(payload, s + ref + FRAME_HEADER_SIZE, len) !=
				0)
				fuzz_fail("next: frame differs from the stream",
					  ref);
			ref += FRAME_HEADER_SIZE + len;
			check_request(payload, plen);
		}
	}
	if (rc != FRAME_OVERSIZE && frame_reader_pending(&r) != fed - ref)
		fuzz_fail("pending bytes disagree with the stream", ref);
	frame_reader_cleanup(&r);
	return 0;
}
