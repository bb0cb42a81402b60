/* SPDX-License-Identifier: BSD-2-Clause */
/* Frames built and read by hand, for tests that speak the client protocol
 * on a raw socket instead of through librma (test_protocol,
 * test_faults_clients, fuzz_dispatch, make_corpus): a 4-byte big-endian
 * length, then one protobuf message, as proto/frame.h packs them. No
 * Check here: the fuzzers link it too. */
#ifndef RMA_TEST_RAW_FRAME_H
#define RMA_TEST_RAW_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "rma.pb-c.h"

/* msg (a Request or a DaemonMessage) as one frame, to free; NULL when out
 * of memory. */
uint8_t *raw_frame_pack(const ProtobufCMessage *msg, size_t *len_p);

/* A Hello request of the current protocol version as one frame, to free;
 * NULL when out of memory. */
uint8_t *raw_frame_hello(uint64_t id, const char *client_name, size_t *len_p);

/* Waits until fd is readable (or at EOF); 0 when it gave up. The caller
 * owns the deadline: test_protocol's wait runs the daemon's event loop
 * meanwhile, at most 5 s. */
typedef int (*raw_frame_wait_fn)(int fd, void *arg);

/* Reads one DaemonMessage frame from fd, calling wait(fd, arg) before
 * each read. *fd_p (if not NULL) gets a descriptor passed with the
 * header, or -1. Returns 1 with *m_p set (free with
 * rma__v1__daemon_message__free_unpacked), 0 on EOF before the header,
 * -1 when wait gave up, the stream ended mid-frame or the frame does not
 * unpack. */
int raw_frame_recv(int fd, raw_frame_wait_fn wait, void *arg, int *fd_p,
		   Rma__V1__DaemonMessage **m_p);

#endif
