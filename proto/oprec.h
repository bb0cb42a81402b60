/* SPDX-License-Identifier: BSD-2-Clause */
/* Operations and completions as fixed-layout records: Submit.packed and
 * Completions.packed carry arrays of them, so the common case costs no
 * protobuf decoding per operation (protobuf-c spent two thirds of the
 * daemon's time on 8-byte operations). Little-endian, whatever the host.
 *
 * Operation, 64 bytes: op_id, region_id, offset, remote_id,
 * remote_offset, length (8 each), kind, flags, peer_id, reserved (4 each;
 * reserved is 0). An ATOMIC operation has no local region and no peer:
 * its record carries operand at 8, compare at 16 and atomic_op at 56
 * instead (the rest as above, length = the word's width). A PUT with
 * OP_FLAG_NOTIFY carries notify_value at 56 (peer id and reserved).
 * Completion, 24 bytes: op_id, bytes (8 each), status
 * (wire Status, 4), reserved (4, 0). A completion with a detail text goes
 * or a value (an atomic's old value other than 0) goes as a Completion
 * message instead.
 * Notification, 40 bytes: region_id, offset, length, value (8 each),
 * sender (4: an index into Notifications.daemon_ids), reserved (4, 0). */
#ifndef RMA_OPREC_H
#define RMA_OPREC_H

#include <stddef.h>
#include <stdint.h>

#include "rma.pb-c.h"

#define OPREC_SIZE 64
#define COMPREC_SIZE 24
#define NOTIFREC_SIZE 40

void oprec_encode(uint8_t *p, const Rma__V1__Op *op);
/* Fills op (initialised here); -1 if reserved bytes are not 0. */
int oprec_decode(const uint8_t *p, Rma__V1__Op *op);

struct comprec {
	uint64_t op_id;
	uint64_t bytes;
	int32_t status; /* Rma__V1__Status */
};

void comprec_encode(uint8_t *p, const struct comprec *c);
void comprec_decode(const uint8_t *p, struct comprec *c);

struct notifrec {
	uint64_t region_id;
	uint64_t offset;
	uint64_t length;
	uint64_t value;
	uint32_t sender; /* index into Notifications.daemon_ids */
};

void notifrec_encode(uint8_t *p, const struct notifrec *n);
/* -1 if reserved bytes are not 0. */
int notifrec_decode(const uint8_t *p, struct notifrec *n);

#endif
