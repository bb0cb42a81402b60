/* Writes the fuzzers' seed corpora: make_corpus DIR writes DIR/frame,
 * DIR/descriptor and DIR/dispatch (the directories must exist). The
 * committed tests/fuzz/corpus was made with
 *   build/tests/fuzz/make_corpus tests/fuzz/corpus
 * Stream inputs are [flags][chunk][stream...] (fuzz.h); for dispatch,
 * flags & 1 = the target sends a Hello first. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "descriptor.h"
#include "oprec.h"
#include "frame.h"
#include "fuzz.h"
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
	uint8_t frame[4096];

	if (frame_packed_size(&req->base) > sizeof(frame)) {
		fprintf(stderr, "make_corpus: request too big\n");
		exit(1);
	}
	frame_pack(&req->base, frame);
	buf_bytes(b, frame, frame_packed_size(&req->base));
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
	return 0;
}
