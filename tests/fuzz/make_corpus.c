/* SPDX-License-Identifier: BSD-2-Clause */
/* Writes the fuzzers' seed corpora: make_corpus DIR writes DIR/frame,
 * DIR/descriptor, DIR/dispatch and DIR/peer (the directories must exist). The
 * committed tests/fuzz/corpus was made with
 *   build/tests/fuzz/make_corpus tests/fuzz/corpus
 * Stream inputs are [flags][chunk][stream...] (fuzz.h); for dispatch,
 * flags & 1 = the target sends a Hello first. Peer inputs are records
 * of daemon-to-daemon messages (fuzz.h, fuzz_peer.c). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "am.h"
#include "descriptor.h"
#include "oprec.h"
#include "frame.h"
#include "fuzz.h"
#include "raw_frame.h"
#include "rma.pb-c.h"

struct buf {
	uint8_t data[65536];
	size_t len;
};

static const char *outdir;

static void
buf_bytes(struct buf *b, const void *p, size_t n)
{
	if (b->len + n > sizeof(b->data)) {
		fprintf(stderr, "make_corpus: input too big\n");
		exit(1);
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

static void
buf_request(struct buf *b, Rma__V1__Request *req)
{
	size_t n;
	uint8_t *frame = raw_frame_pack(&req->base, &n);

	if (frame == NULL) {
		fprintf(stderr, "make_corpus: out of memory\n");
		exit(1);
	}
	buf_bytes(b, frame, n);
	free(frame);
}

static void
write_file(const char *target, const char *name, const void *p, size_t n)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/%s", outdir, target, name);
	f = fopen(path, "wb");
	if (f == NULL || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

/* A stream input: [flags][chunk] then the stream. */
static void
write_stream(const char *target, const char *name, uint8_t flags, uint8_t chunk,
	     const struct buf *stream)
{
	struct buf in = {.len = 0};

	buf_bytes(&in, &flags, 1);
	buf_bytes(&in, &chunk, 1);
	buf_bytes(&in, stream->data, stream->len);
	write_file(target, name, in.data, in.len);
}

/* ---- requests ------------------------------------------------------------ */

static void
req_hello(struct buf *b, uint64_t id, uint32_t version)
{
	Rma__V1__Hello h = RMA__V1__HELLO__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;

	h.protocol_version = version;
	h.client_name = "corpus";
	req.id = id;
	req.body_case = RMA__V1__REQUEST__BODY_HELLO;
	req.hello = &h;
	buf_request(b, &req);
}

static void
req_status(struct buf *b, uint64_t id)
{
	Rma__V1__StatusRequest s = RMA__V1__STATUS_REQUEST__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;

	req.id = id;
	req.body_case = RMA__V1__REQUEST__BODY_STATUS;
	req.status = &s;
	buf_request(b, &req);
}

static void
req_region_alloc(struct buf *b, uint64_t id, uint64_t length)
{
	Rma__V1__RegionAlloc ra = RMA__V1__REGION_ALLOC__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;

	ra.length = length;
	req.id = id;
	req.body_case = RMA__V1__REQUEST__BODY_REGION_ALLOC;
	req.region_alloc = &ra;
	buf_request(b, &req);
}

static void
req_region_register(struct buf *b, uint64_t id, uint64_t offset,
		    uint64_t length)
{
	Rma__V1__RegionRegister rr = RMA__V1__REGION_REGISTER__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;

	rr.offset = offset;
	rr.length = length;
	req.id = id;
	req.body_case = RMA__V1__REQUEST__BODY_REGION_REGISTER;
	req.region_register = &rr;
	buf_request(b, &req);
}

static void
req_region_free(struct buf *b, uint64_t id, uint64_t region)
{
	Rma__V1__RegionFree rf = RMA__V1__REGION_FREE__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;

	rf.region_id = region;
	req.id = id;
	req.body_case = RMA__V1__REQUEST__BODY_REGION_FREE;
	req.region_free = &rf;
	buf_request(b, &req);
}

static void
req_peer_connect(struct buf *b, uint64_t id, const char *address)
{
	Rma__V1__PeerConnect pc = RMA__V1__PEER_CONNECT__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;

	pc.address = (char *)address;
	req.id = id;
	req.body_case = RMA__V1__REQUEST__BODY_PEER_CONNECT;
	req.peer_connect = &pc;
	buf_request(b, &req);
}

static void
req_remote_import(struct buf *b, uint64_t id, uint32_t peer,
		  const char *descriptor)
{
	Rma__V1__RemoteImport ri = RMA__V1__REMOTE_IMPORT__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;

	ri.peer_id = peer;
	ri.descriptor = (char *)descriptor;
	req.id = id;
	req.body_case = RMA__V1__REQUEST__BODY_REMOTE_IMPORT;
	req.remote_import = &ri;
	buf_request(b, &req);
}

static void
req_remote_release(struct buf *b, uint64_t id, uint64_t remote)
{
	Rma__V1__RemoteRelease rr = RMA__V1__REMOTE_RELEASE__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;

	rr.remote_id = remote;
	req.id = id;
	req.body_case = RMA__V1__REQUEST__BODY_REMOTE_RELEASE;
	req.remote_release = &rr;
	buf_request(b, &req);
}

static void
req_submit(struct buf *b, Rma__V1__Op *ops, size_t n)
{
	Rma__V1__Op *ptrs[64];
	Rma__V1__Submit s = RMA__V1__SUBMIT__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;

	for (size_t i = 0; i < n; i++)
		ptrs[i] = &ops[i];
	s.n_ops = n;
	s.ops = ptrs;
	req.body_case = RMA__V1__REQUEST__BODY_SUBMIT;
	req.submit = &s;
	buf_request(b, &req);
}

/* The same operations as records (what librma sends); torn cuts the
 * array in the middle of the last record. */
static void
req_submit_packed(struct buf *b, const Rma__V1__Op *ops, size_t n, bool torn)
{
	uint8_t packed[64 * OPREC_SIZE];
	Rma__V1__Submit s = RMA__V1__SUBMIT__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;

	for (size_t i = 0; i < n; i++)
		oprec_encode(packed + i * OPREC_SIZE, &ops[i]);
	s.packed.data = packed;
	s.packed.len = n * OPREC_SIZE - (torn ? OPREC_SIZE / 2 : 0);
	req.body_case = RMA__V1__REQUEST__BODY_SUBMIT;
	req.submit = &s;
	buf_request(b, &req);
}

static Rma__V1__Op
op(uint64_t op_id, Rma__V1__OpKind kind, uint64_t region, uint64_t offset,
   uint64_t remote, uint64_t remote_offset, uint64_t length, uint32_t flags)
{
	Rma__V1__Op o = RMA__V1__OP__INIT;

	o.op_id = op_id;
	o.kind = kind;
	o.region_id = region;
	o.offset = offset;
	o.remote_id = remote;
	o.remote_offset = remote_offset;
	o.length = length;
	o.flags = flags;
	return o;
}

/* The descriptor fuzz_dispatch's daemon gives region id, generation.
 * There the k-th region of an input has generation k | 1 (region.c:
 * getrandom, which fuzz_dispatch counts, with the low bit set). */
static void
fuzz_descriptor(uint64_t id, uint64_t generation, uint64_t length, char *text)
{
	struct descriptor d;

	memcpy(d.daemon_id, FUZZ_DAEMON_ID, DAEMON_ID_SIZE);
	d.region_id = id;
	d.generation = generation;
	d.length = length;
	descriptor_format(&d, text);
}

/* ---- corpora ------------------------------------------------------------ */

/* fuzz_dispatch's ring steps (flags 3): a record into the submission
 * ring; the submission or completion counter set; the completions taken
 * and bytes written to the socket (at most 63 per step). */
static void
ring_record(struct buf *b, const Rma__V1__Op *o)
{
	uint8_t ctl = 0, rec[OPREC_SIZE];

	oprec_encode(rec, o);
	buf_bytes(b, &ctl, 1);
	buf_bytes(b, rec, sizeof(rec));
}

static void
ring_counter(struct buf *b, uint8_t which, uint32_t value)
{
	buf_bytes(b, &which, 1);
	buf_bytes(b, &value, sizeof(value));
}

static void
ring_socket(struct buf *b, const struct buf *frames)
{
	for (size_t at = 0; at < frames->len; at += 63) {
		size_t n = frames->len - at < 63 ? frames->len - at : 63;
		uint8_t ctl = (uint8_t)(3 | n << 2);

		buf_bytes(b, &ctl, 1);
		buf_bytes(b, frames->data + at, n);
	}
}

static void
make_dispatch_ring(const char *desc)
{
	struct buf b, frames;
	Rma__V1__Op o;
	uint8_t garbage[1 + OPREC_SIZE];

	/* local copies through the ring, the regions made over the socket */
	b.len = frames.len = 0;
	req_region_alloc(&frames, 10, 4096);
	req_region_alloc(&frames, 11, 4096);
	req_peer_connect(&frames, 12, "127.0.0.1:1");
	req_remote_import(&frames, 13, 1, desc);
	ring_socket(&b, &frames);
	o = op(1, RMA__V1__OP_KIND__PUT, 1, 0, 1, 100, 64, 0);
	ring_record(&b, &o);
	o = op(2, RMA__V1__OP_KIND__GET, 1, 4000, 1, 0, 96, 0);
	ring_record(&b, &o);
	o = op(3, RMA__V1__OP_KIND__FLUSH, 0, 0, 0, 0, 0, 0);
	ring_record(&b, &o);
	o = op(4, 42, 1, 0, 1, 0, 8, 0);
	ring_record(&b, &o);
	frames.len = 0;
	ring_socket(&b, &frames); /* completions taken */
	write_stream("dispatch", "ring_local_copy", 3, 0, &b);

	/* garbage records, then a record naming no region of this client */
	b.len = 0;
	for (int i = 0; i < 8; i++) {
		garbage[0] = 0;
		for (size_t k = 1; k < sizeof(garbage); k++)
			garbage[k] = (uint8_t)(i * 31 + k * 7);
		buf_bytes(&b, garbage, sizeof(garbage));
	}
	o = op(9, RMA__V1__OP_KIND__PUT, 77, 0, 1, 0, 8, 0);
	ring_record(&b, &o);
	write_stream("dispatch", "ring_garbage", 3, 0, &b);

	/* counters the daemon never published */
	b.len = 0;
	ring_counter(&b, 1, 0x7fffff00u);
	write_stream("dispatch", "ring_wild_tail", 3, 0, &b);
	b.len = 0;
	ring_counter(&b, 2, 123456);
	o = op(1, RMA__V1__OP_KIND__PUT, 5, 0, 1, 0, 8, 0);
	ring_record(&b, &o);
	write_stream("dispatch", "ring_wild_head", 3, 0, &b);
}

static void
make_dispatch(void)
{
	static const uint8_t truncated[] = {0, 0, 0, 100, 8, 1};
	static const uint8_t oversize[] = {0xff, 0xff, 0xff, 0xff, 1, 2, 3};
	/* clang-format off */
	static const uint8_t garbage[] = {0, 0, 0, 6, 0xff, 0xff, 0xff, 0xff,
					  0xff, 0xff};
	/* clang-format on */
	/* field 15, unknown to rma.v1.Request: no body */
	static const uint8_t unknown[] = {0, 0, 0, 4, 0x08, 0x09, 0x78, 0x01};
	static const uint8_t empty[] = {0, 0, 0, 0};
	char desc[DESCRIPTOR_TEXT_SIZE];
	struct buf b;
	Rma__V1__Op ops[8];

	b.len = 0;
	req_hello(&b, 1, RMA_PROTOCOL_VERSION);
	req_status(&b, 2);
	write_stream("dispatch", "hello_status", 0, 0, &b);

	b.len = 0;
	req_status(&b, 2);
	write_stream("dispatch", "status_bytewise", 1, 0x08, &b);

	b.len = 0;
	req_hello(&b, 1, RMA_PROTOCOL_VERSION + 1);
	write_stream("dispatch", "hello_wrong_version", 0, 0, &b);

	b.len = 0;
	req_status(&b, 5);
	write_stream("dispatch", "status_before_hello", 0, 0, &b);

	b.len = 0;
	req_region_alloc(&b, 10, 4096);
	req_region_alloc(&b, 11, 0);
	req_region_free(&b, 12, 1);
	req_region_free(&b, 13, 1);
	req_region_free(&b, 14, 99);
	write_stream("dispatch", "region_alloc_free", 1, 0, &b);

	/* A register per chunk with the memfd fuzz_dispatch sends along
	 * (flags & 4), then the same without any fd, and misaligned,
	 * empty and out-of-range ones. */
	b.len = 0;
	req_region_register(&b, 10, 0, 4096);
	write_stream("dispatch", "region_register", 1 | 4, 0, &b);
	b.len = 0;
	req_region_register(&b, 10, 0, 4096);
	req_region_register(&b, 11, 4096, 61440);
	req_region_register(&b, 12, 1, 4096);
	req_region_register(&b, 13, 0, 0);
	req_region_register(&b, 14, 65536, 4096);
	req_region_register(&b, 15, 0, UINT64_MAX);
	req_status(&b, 16);
	req_region_free(&b, 17, 1);
	write_stream("dispatch", "region_register_chunks", 1 | 4, 0x05, &b);
	write_stream("dispatch", "region_register_no_fd", 1, 0, &b);

	/* Two regions, the second imported through a peer that is only
	 * connecting (local descriptors do not need it up), then copies
	 * between them and operations that must fail. */
	b.len = 0;
	req_region_alloc(&b, 10, 4096);
	req_region_alloc(&b, 11, 4096);
	req_peer_connect(&b, 12, "127.0.0.1:1");
	fuzz_descriptor(2, 2 | 1, 4096, desc);
	req_remote_import(&b, 13, 1, desc);
	ops[0] = op(1, RMA__V1__OP_KIND__PUT, 1, 0, 1, 100, 64, 0);
	ops[1] = op(2, RMA__V1__OP_KIND__GET, 1, 4000, 1, 0, 96, 0);
	ops[2] = op(3, RMA__V1__OP_KIND__PUT, 1, 0, 1, 4090, 64, 1);
	ops[3] = op(4, RMA__V1__OP_KIND__FLUSH, 0, 0, 0, 0, 0, 0);
	ops[4] = op(5, RMA__V1__OP_KIND__GET, 2, 0, 1, 0, 8, 0);
	ops[5] = op(6, 42, 1, 0, 1, 0, 8, 0);
	req_submit(&b, ops, 6);
	req_remote_release(&b, 14, 1);
	req_remote_release(&b, 15, 1);
	req_status(&b, 16);
	write_stream("dispatch", "local_copy", 1, 0, &b);

	b.len = 0;
	ops[0] = op(1, RMA__V1__OP_KIND__PUT, 7, 0, 0, 0, 8, 0);
	ops[1] = op(2, RMA__V1__OP_KIND__GET, 0, 0, 3, 0, 0, 0);
	ops[2] = op(3, RMA__V1__OP_KIND__FLUSH, 0, 0, 0, 0, 0, 0);
	ops[3] = op(4, RMA__V1__OP_KIND__FLUSH, 0, 0, 0, 0, 0, 0);
	ops[3].peer_id = 12345;
	req_submit(&b, ops, 4);
	write_stream("dispatch", "submit_errors", 1, 0x1b, &b);

	/* The local copies again, as records, then a torn record array. */
	b.len = 0;
	req_region_alloc(&b, 10, 4096);
	req_region_alloc(&b, 11, 4096);
	req_peer_connect(&b, 12, "127.0.0.1:1");
	req_remote_import(&b, 13, 1, desc);
	ops[0] = op(1, RMA__V1__OP_KIND__PUT, 1, 0, 1, 100, 64, 0);
	ops[1] = op(2, RMA__V1__OP_KIND__GET, 1, 4000, 1, 0, 96, 0);
	ops[2] = op(3, RMA__V1__OP_KIND__FLUSH, 0, 0, 0, 0, 0, 0);
	ops[3] = op(4, 42, 1, 0, 1, 0, 8, 0);
	req_submit_packed(&b, ops, 4, false);
	req_submit_packed(&b, ops, 2, true);
	write_stream("dispatch", "local_copy_packed", 1, 0, &b);

	b.len = 0;
	req_peer_connect(&b, 20, "nonsense");
	req_peer_connect(&b, 21, "[::1]:x");
	req_peer_connect(&b, 22, "localhost:13337");
	req_remote_import(&b, 23, 1, "rma1:00");
	req_remote_import(&b, 24, 9, desc);
	write_stream("dispatch", "peer_errors", 1, 0, &b);

	b.len = 0;
	buf_bytes(&b, truncated, sizeof(truncated));
	write_stream("dispatch", "truncated_frame", 1, 0, &b);

	b.len = 0;
	buf_bytes(&b, oversize, sizeof(oversize));
	write_stream("dispatch", "oversize_length", 1, 0, &b);

	b.len = 0;
	buf_bytes(&b, garbage, sizeof(garbage));
	write_stream("dispatch", "garbage", 1, 0x02, &b);

	b.len = 0;
	buf_bytes(&b, unknown, sizeof(unknown));
	buf_bytes(&b, empty, sizeof(empty));
	req_status(&b, 3);
	write_stream("dispatch", "unknown_and_empty", 1, 0, &b);

	b.len = 0;
	for (int i = 0; i < 40; i++)
		req_status(&b, 100 + i);
	write_stream("dispatch", "many_small_chunks", 1, 0x13, &b);

	make_dispatch_ring(desc);
}

static void
make_frame(void)
{
	static const uint8_t oversize[] = {0, 0, 0, 20, 1, 2, 3};
	/* clang-format off */
	static const uint8_t garbage[] = {0, 0, 0, 6, 0xff, 0xff, 0xff, 0xff,
					  0xff, 0xff, 0, 0, 0, 0};
	/* clang-format on */
	uint8_t max16[4 + 16] = {0, 0, 0, 16};
	struct buf b;
	Rma__V1__Op ops[3];

	b.len = 0;
	req_hello(&b, 1, RMA_PROTOCOL_VERSION);
	req_status(&b, 2);
	write_stream("frame", "hello_status_bytewise", 0, 0x08, &b);

	b.len = 0;
	req_region_alloc(&b, 10, 1 << 20);
	ops[0] = op(1, RMA__V1__OP_KIND__PUT, 1, 0, 1, 0, 8, 1);
	ops[1] = op(2, RMA__V1__OP_KIND__GET, 1, 8, 1, 8, 8, 0);
	ops[2] = op(3, RMA__V1__OP_KIND__FLUSH, 0, 0, 0, 0, 0, 0);
	req_submit(&b, ops, 3);
	req_remote_import(&b, 11, 1, "rma1:00");
	write_stream("frame", "alloc_submit_import", 2, 0x25, &b);

	b.len = 0;
	req_status(&b, 3);
	b.len -= 1; /* the last byte never comes */
	write_stream("frame", "truncated", 0, 0, &b);

	b.len = 0;
	buf_bytes(&b, oversize, sizeof(oversize));
	write_stream("frame", "oversize_max16", 1, 0, &b);

	b.len = 0;
	buf_bytes(&b, max16, sizeof(max16));
	req_status(&b, 4);
	write_stream("frame", "exactly_max16", 1, 0x01, &b);

	b.len = 0;
	buf_bytes(&b, garbage, sizeof(garbage));
	write_stream("frame", "garbage_and_empty", 0, 0x03, &b);
}

static void
make_descriptor(void)
{
	char text[DESCRIPTOR_TEXT_SIZE], other[DESCRIPTOR_TEXT_SIZE + 8];
	struct descriptor d;
	size_t n;

	fuzz_descriptor(1, 1, 4096, text);
	n = strlen(text);
	write_file("descriptor", "valid", text, n);

	memset(d.daemon_id, 0xff, DAEMON_ID_SIZE);
	d.region_id = UINT64_MAX;
	d.generation = 1ull << 63;
	d.length = 1ull << 40;
	descriptor_format(&d, other);
	write_file("descriptor", "valid_extremes", other, strlen(other));

	snprintf(other, sizeof(other), " \t%s\n", text);
	write_file("descriptor", "valid_spaces", other, strlen(other));

	memcpy(other, text, n + 1);
	for (size_t i = strlen(DESCRIPTOR_PREFIX); i < n; i++)
		if (other[i] >= 'a' && other[i] <= 'f')
			other[i] -= 'a' - 'A';
	write_file("descriptor", "valid_upper", other, n);

	memcpy(other, text, n + 1);
	other[n - 1] = other[n - 1] == '0' ? '1' : '0';
	write_file("descriptor", "bad_crc", other, n);

	write_file("descriptor", "truncated", text, n - 1);

	memcpy(other, text, n + 1);
	other[3] = '2';
	write_file("descriptor", "wrong_version", other, n);

	memcpy(other, text, n + 1);
	other[10] = 'g';
	write_file("descriptor", "not_hex", other, n);

	write_file("descriptor", "garbage", "rma1:nonsense", 13);
	write_file("descriptor", "empty", "", 0);
}

/* ---- peer: daemon-to-daemon messages ------------------------------------ */

static void
peer_rec(struct buf *b, uint8_t flags, unsigned id, const void *header,
	 size_t hlen, const void *data, size_t dlen)
{
	uint8_t head[6] = {
	    flags,	   (uint8_t)(id & 0xff),   (uint8_t)(id >> 8),
	    (uint8_t)hlen, (uint8_t)(dlen & 0xff), (uint8_t)(dlen >> 8)};

	buf_bytes(b, head, sizeof(head));
	buf_bytes(b, header, hlen);
	buf_bytes(b, data, dlen);
}

static struct am_hello
peer_hello(uint16_t lane, uint64_t epoch)
{
	struct am_hello h;

	memset(&h, 0, sizeof(h));
	h.magic = AM_MAGIC;
	h.version = AM_VERSION;
	h.token = 7;
	memcpy(h.daemon_id, FUZZ_FAR_ID, DAEMON_ID_SIZE);
	h.epoch = epoch;
	h.lane = lane;
	h.listen_port = FUZZ_FAR_PORT;
	return h;
}

static struct am_rma
peer_rma(uint32_t kind, uint64_t region, uint64_t gen, uint64_t off,
	 uint64_t len)
{
	struct am_rma h = {.magic = AM_MAGIC,
			   .kind = kind,
			   .token = 99,
			   .region_id = region,
			   .generation = gen,
			   .offset = off,
			   .length = len};
	return h;
}

static struct am_resolve
peer_resolve(const char *daemon_id, uint64_t region, uint64_t gen)
{
	struct am_resolve r;

	memset(&r, 0, sizeof(r));
	r.magic = AM_MAGIC;
	r.token = 5;
	memcpy(r.daemon_id, daemon_id, DAEMON_ID_SIZE);
	r.region_id = region;
	r.generation = gen;
	return r;
}

static void
peer_put(struct buf *b, uint8_t flags, uint64_t region, uint64_t gen,
	 uint64_t off, uint64_t len, size_t send_len)
{
	struct am_rma h = peer_rma(AM_PUT, region, gen, off, len);
	uint8_t data[256];

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(0xa0 + i);
	peer_rec(b, flags, AM_PUT, &h, sizeof(h), data, send_len);
}

static void
peer_get(struct buf *b, uint8_t flags, uint64_t region, uint64_t gen,
	 uint64_t off, uint64_t len)
{
	struct am_rma h = peer_rma(AM_GET, region, gen, off, len);

	peer_rec(b, flags, AM_GET, &h, sizeof(h), NULL, 0);
}

static void
write_peer(const char *name, const struct buf *b)
{
	write_file("peer", name, b->data, b->len);
}

static void
make_peer(void)
{
	const uint8_t A = FUZZ_PEER_A, B = FUZZ_PEER_B, C = FUZZ_PEER_C;
	const uint8_t FRESH = FUZZ_PEER_B_FRESH;
	const uint8_t CC = FUZZ_PEER_C_CONNECTING;
	const uint64_t g1 = FUZZ_PEER_R1_GEN, g2 = FUZZ_PEER_R2_GEN;
	struct am_hello hello = peer_hello(1, 5);
	struct am_hello_reply reply;
	struct am_hello_proof proof;
	struct am_resolve res;
	struct am_resolve_reply rr;
	struct am_freed freed;
	struct am_rma_answer ans = {.magic = AM_MAGIC, .token = 99};
	struct buf b;
	uint8_t batch[4096];
	size_t n;

	/* the handshake on a fresh inbound endpoint, then requests on it */
	b.len = 0;
	peer_rec(&b, FRESH, AM_HELLO, NULL, 0, &hello, sizeof(hello));
	res = peer_resolve(FUZZ_DAEMON_ID, 1, g1);
	peer_rec(&b, B, AM_RESOLVE, NULL, 0, &res, sizeof(res));
	peer_put(&b, B, 1, g1, 8, 8, 8);
	write_peer("hello_then_requests", &b);

	b.len = 0;
	hello.version = 1;
	peer_rec(&b, FRESH, AM_HELLO, NULL, 0, &hello, sizeof(hello));
	write_peer("hello_old_version", &b);
	hello = peer_hello(0, UINT64_MAX); /* takes A's place */
	b.len = 0;
	peer_rec(&b, FRESH, AM_HELLO, NULL, 0, &hello, sizeof(hello));
	peer_put(&b, A, 1, g1, 0, 4, 4);
	write_peer("hello_newer_epoch", &b);
	hello = peer_hello(1, 6); /* another lane: its retire mark closes A */
	hello.flags = AM_HELLO_RETIRE;
	hello.retire = UINT64_MAX;
	b.len = 0;
	peer_rec(&b, FRESH, AM_HELLO, NULL, 0, &hello, sizeof(hello));
	peer_put(&b, A, 1, g1, 0, 4, 4);
	write_peer("hello_retire", &b);
	/* a successor's: its floor closes A on any lane and address */
	hello = peer_hello(2, 7);
	hello.flags = AM_HELLO_RETIRE | AM_HELLO_FLOOR;
	hello.dialed.port ^= 1;
	hello.floor = UINT64_MAX;
	b.len = 0;
	peer_rec(&b, FRESH, AM_HELLO, NULL, 0, &hello, sizeof(hello));
	peer_put(&b, A, 1, g1, 0, 4, 4);
	write_peer("hello_floor", &b);
	/* claims the floor, ends before it */
	b.len = 0;
	peer_rec(&b, FRESH, AM_HELLO, NULL, 0, &hello, AM_HELLO_SIZE_V4);
	write_peer("hello_floor_short", &b);
	hello = peer_hello(2, 1);
	hello.flags = AM_HELLO_KEYED;
	b.len = 0;
	peer_rec(&b, FRESH, AM_HELLO, NULL, 0, &hello, sizeof(hello));
	write_peer("hello_keyed", &b);
	b.len = 0;
	peer_rec(&b, FRESH, AM_HELLO, NULL, 0, &hello, AM_HELLO_SIZE_V3 - 1);
	write_peer("hello_short", &b);

	memset(&proof, 0, sizeof(proof));
	proof.magic = AM_MAGIC;
	b.len = 0;
	peer_rec(&b, FRESH | FUZZ_PEER_TOKEN, AM_HELLO_PROOF, NULL, 0, &proof,
		 sizeof(proof));
	write_peer("hello_proof_unasked", &b);

	/* a request before the handshake: the endpoint is closed */
	b.len = 0;
	peer_put(&b, FRESH, 1, g1, 0, 8, 8);
	peer_put(&b, B, 1, g1, 0, 8, 8);
	write_peer("put_before_hello", &b);

	/* resolves */
	b.len = 0;
	res = peer_resolve(FUZZ_DAEMON_ID, 1, g1);
	peer_rec(&b, A, AM_RESOLVE, NULL, 0, &res, sizeof(res));
	res = peer_resolve(FUZZ_DAEMON_ID, 2, g1);
	peer_rec(&b, A, AM_RESOLVE, NULL, 0, &res, sizeof(res));
	res = peer_resolve(FUZZ_FAR_ID, 1, g1);
	peer_rec(&b, A, AM_RESOLVE, NULL, 0, &res, sizeof(res));
	peer_rec(&b, A, AM_RESOLVE, NULL, 0, &res, sizeof(res) - 1);
	write_peer("resolve", &b);

	/* puts: good, at the very end, out of bounds, stale, wrong length */
	b.len = 0;
	peer_put(&b, A, 1, g1, 100, 16, 16);
	peer_put(&b, A, 2, g2, 90, 10, 10);
	peer_put(&b, A, 2, g2, 91, 10, 10);
	peer_put(&b, A, 2, g2, UINT64_MAX, 2, 2);
	peer_put(&b, A, 1, g2, 0, 8, 8);
	peer_put(&b, A, 1, g1, 0, 8, 7);
	peer_put(&b, A, 3, g1, 0, 8, 8);
	write_peer("put", &b);
	b.len = 0;
	peer_put(&b, A | FUZZ_PEER_RNDV, 1, g1, 0, 16, 16);
	peer_put(&b, FUZZ_PEER_BOGUS_EP, 1, g1, 0, 16, 16);
	peer_put(&b, FUZZ_PEER_NO_REPLY_EP, 1, g1, 0, 16, 16);
	peer_put(&b, FUZZ_PEER_FAR_EP, 1, g1, 0, 16, 16);
	peer_put(&b, C, 1, g1, 0, 16, 16);
	write_peer("put_refused", &b);

	/* gets */
	b.len = 0;
	peer_get(&b, A, 1, g1, 0, 4096);
	peer_get(&b, A, 2, g2, 50, 50);
	peer_get(&b, A, 2, g2, 50, 51);
	peer_get(&b, A, 1, g1, 4096, 0);
	peer_get(&b, A, 1, g1 + 1, 0, 1);
	write_peer("get", &b);

	/* a batch: puts and gets, then one too big, then garbage */
	n = 0;
	{
		struct am_rma h = peer_rma(AM_PUT, 1, g1, 200, 32);
		memcpy(batch + n, &h, sizeof(h));
		n += sizeof(h);
		memset(batch + n, 0x5a, 32);
		n += 32;
		h = peer_rma(AM_GET, 1, g1, 0, 64);
		memcpy(batch + n, &h, sizeof(h));
		n += sizeof(h);
		h = peer_rma(AM_PUT, 2, g2, 99, 1);
		memcpy(batch + n, &h, sizeof(h));
		n += sizeof(h);
		batch[n++] = 0x77;
		h = peer_rma(AM_GET, 2, g2, 0, AM_BATCH_SMALL + 1);
		memcpy(batch + n, &h, sizeof(h));
		n += sizeof(h);
		h = peer_rma(AM_PUT, 1, g1, 0, 1000);
		memcpy(batch + n, &h, sizeof(h));
		n += sizeof(h);
	}
	b.len = 0;
	peer_rec(&b, A, AM_BATCH, NULL, 0, batch, n);
	peer_rec(&b, A, AM_BATCH, NULL, 0, batch, n - 5);
	peer_rec(&b, A | FUZZ_PEER_RNDV, AM_BATCH, NULL, 0, batch, n);
	write_peer("batch", &b);

	/* answers over the outbound endpoint: nothing waits for them */
	b.len = 0;
	memset(&rr, 0, sizeof(rr));
	rr.magic = AM_MAGIC;
	rr.token = 1;
	rr.length = 64;
	peer_rec(&b, C, AM_RESOLVE_REPLY, NULL, 0, &rr, sizeof(rr));
	memset(&freed, 0, sizeof(freed));
	freed.magic = AM_MAGIC;
	memcpy(freed.daemon_id, FUZZ_FAR_ID, DAEMON_ID_SIZE);
	freed.region_id = 1;
	peer_rec(&b, C, AM_FREED, NULL, 0, &freed, sizeof(freed));
	peer_rec(&b, C, AM_PUT_ACK, &ans, sizeof(ans), NULL, 0);
	{
		/* one answer for several put pieces: none asked for, one
		 * counting past the largest token, one with no pieces */
		struct am_rma_answer_range rg = {
		    .magic = AM_MAGIC, .token = 99, .count = 8};
		peer_rec(&b, C, AM_PUT_ACK, &rg, sizeof(rg), NULL, 0);
		rg.token = UINT64_MAX - 2;
		peer_rec(&b, C, AM_PUT_ACK, &rg, sizeof(rg), NULL, 0);
		rg.count = 0;
		peer_rec(&b, C, AM_PUT_ACK, &rg, sizeof(rg), NULL, 0);
	}
	peer_rec(&b, C, AM_GET_REPLY, &ans, sizeof(ans), "abcd", 4);
	{
		uint8_t rep[sizeof(ans) + 8 + 4];
		uint64_t len = 4;
		memcpy(rep, &ans, sizeof(ans));
		memcpy(rep + sizeof(ans), &len, 8);
		memcpy(rep + sizeof(ans) + 8, "wxyz", 4);
		peer_rec(&b, C, AM_BATCH_REPLY, NULL, 0, rep, sizeof(rep));
	}
	/* and over the inbound one: the wrong direction */
	peer_rec(&b, A, AM_PUT_ACK, &ans, sizeof(ans), NULL, 0);
	write_peer("answers", &b);

	/* the outbound handshake: far's reply, with the daemon's token */
	memset(&reply, 0, sizeof(reply));
	reply.magic = AM_MAGIC;
	reply.status = 0;
	memcpy(reply.daemon_id, FUZZ_FAR_ID, DAEMON_ID_SIZE);
	b.len = 0;
	peer_rec(&b, CC | FUZZ_PEER_TOKEN, AM_HELLO_REPLY, NULL, 0, &reply,
		 sizeof(reply));
	peer_rec(&b, C, AM_PUT_ACK, &ans, sizeof(ans), NULL, 0);
	write_peer("hello_reply", &b);
	b.len = 0;
	reply.status = 1;
	peer_rec(&b, CC | FUZZ_PEER_TOKEN, AM_HELLO_REPLY, NULL, 0, &reply,
		 sizeof(reply));
	reply.status = 0;
	reply.flags = AM_HELLO_KEYED;
	peer_rec(&b, CC | FUZZ_PEER_TOKEN, AM_HELLO_REPLY, NULL, 0, &reply,
		 sizeof(reply));
	peer_rec(&b, CC | FUZZ_PEER_TOKEN, AM_HELLO_DONE, NULL, 0, &reply,
		 sizeof(reply));
	peer_rec(&b, CC, AM_HELLO_REPLY, NULL, 0, &reply, sizeof(reply));
	write_peer("hello_reply_refused", &b);

	/* ids past rmad's, rendezvous */
	b.len = 0;
	peer_rec(&b, A, 0, NULL, 0, NULL, 0);
	peer_rec(&b, A, 14, NULL, 0, "x", 1);
	peer_rec(&b, A, AM_ID_LIMIT - 1, NULL, 0, NULL, 0);
	peer_rec(&b, A, AM_ID_LIMIT, NULL, 0, NULL, 0);
	peer_rec(&b, A, 1000, &ans, sizeof(ans), NULL, 0);
	peer_rec(&b, A | FUZZ_PEER_RNDV, 65535, NULL, 0, "rndv", 4);
	peer_rec(&b, FRESH | FUZZ_PEER_RNDV, AM_HELLO, NULL, 0, &hello,
		 sizeof(hello));
	write_peer("ids", &b);
}

int
main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: make_corpus DIR\n");
		return 64;
	}
	outdir = argv[1];
	make_frame();
	make_descriptor();
	make_dispatch();
	make_peer();
	return 0;
}
