/* SPDX-License-Identifier: BSD-2-Clause */
/* Regions of memory a client already has: a memory file it sends
 * (RegionRegister), checked so that its owner cannot crash the daemon,
 * and mapped; region_register() makes it a region like any other. */
#ifndef RMAD_REGION_FD_H
#define RMAD_REGION_FD_H

#include "daemon.h"

/* Checks @fd (a sealed memory file, read-write, the range within it)
 * and maps [offset, offset + length) of it shared at *addr_p. @fd stays
 * the caller's. Calls no other daemon file: region.c makes the region. */
wire_status_t region_fd_map(int fd, uint64_t offset, uint64_t length,
			    void **addr_p, char *detail, size_t detail_len);

#endif
