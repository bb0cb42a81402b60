/* SPDX-License-Identifier: BSD-2-Clause */
/* Registered regions: a file a client sends becomes a region only if
 * nothing its owner can still do to it makes the daemon's accesses
 * fault. A write into a mapped page past the end of a file is SIGBUS,
 * so the file must not shrink: F_SEAL_SHRINK, which only memfds can
 * carry (tmpfs files and POSIX shm objects are born with F_SEAL_SEAL and
 * refuse every seal). A hole punched into a memfd refills with zeroes on
 * the next touch; one punched into hugetlbfs needs a page from the pool,
 * which may be empty (SIGBUS again): there the daemon adds
 * F_SEAL_FUTURE_WRITE once it has mapped, which forbids the punch and
 * new writable mappings while those that exist keep writing, and then
 * faults every page in (a punch before the seal took its reservation).
 * Network, device, proc and sysfs files fault or block at the
 * filesystem's will and are refused by type. The size is read once the
 * seal is seen: before it, the file could still shrink. */
#include "region_fd.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

static const char *
region_fd_kind(mode_t mode)
{
	if (S_ISSOCK(mode))
		return "a socket";
	if (S_ISFIFO(mode))
		return "a pipe";
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISBLK(mode))
		return "a block device";
	return "not a regular file";
}

/* What the file is and may become: a sealed memory file, read-write.
 * *align_p: the page size its mapping is made of. */
static wire_status_t
region_fd_check(int fd, const struct stat *st, size_t *align_p, bool *huge_p,
		char *detail, size_t detail_len)
{
	struct statfs fs;
	int fl, seals;

	if (!S_ISREG(st->st_mode)) {
		snprintf(detail, detail_len,
			 "the file descriptor is %s: only a memory file "
			 "(memfd_create) can be registered",
			 region_fd_kind(st->st_mode));
		return RMA__V1__STATUS__ERR_INVALID;
	}
	if (fstatfs(fd, &fs) < 0 ||
	    ((unsigned long)fs.f_type != TMPFS_MAGIC &&
	     (unsigned long)fs.f_type != HUGETLBFS_MAGIC)) {
		snprintf(detail, detail_len,
			 "the file is on a filesystem of type 0x%lx: only "
			 "memory files (memfd_create, tmpfs, hugetlbfs) can "
			 "be registered",
			 (unsigned long)fs.f_type);
		return RMA__V1__STATUS__ERR_INVALID;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || (fl & O_ACCMODE) != O_RDWR || (fl & O_PATH)) {
		snprintf(detail, detail_len,
			 "the file descriptor is not open for reading and "
			 "writing: a region is written by gets and puts");
		return RMA__V1__STATUS__ERR_PERMISSION;
	}
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		snprintf(
		    detail, detail_len,
		    "the file can still shrink under the daemon's "
		    "mapping: make it with memfd_create(MFD_ALLOW_SEALING) "
		    "and seal it with fcntl(F_ADD_SEALS, F_SEAL_SHRINK) "
		    "(a POSIX shm_open object cannot be sealed)");
		return RMA__V1__STATUS__ERR_INVALID;
	}
	*huge_p = (unsigned long)fs.f_type == HUGETLBFS_MAGIC;
	if (*huge_p && (seals & F_SEAL_SEAL)) {
		snprintf(detail, detail_len,
			 "a hugetlbfs file must take F_SEAL_FUTURE_WRITE from "
			 "the daemon (so that no hole can be punched into it): "
			 "do not add F_SEAL_SEAL");
		return RMA__V1__STATUS__ERR_INVALID;
	}
	*align_p = *huge_p ? (size_t)st->st_blksize : (size_t)getpagesize();
	return RMA__V1__STATUS__OK;
}

static wire_status_t
region_fd_range(const struct stat *st, size_t align, bool huge, uint64_t offset,
		uint64_t length, char *detail, size_t detail_len)
{
	if (length == 0 || offset % align != 0 || (huge && length % align)) {
		snprintf(detail, detail_len,
			 "offset %llu and length %llu: the length must not be "
			 "0, the offset%s a multiple of %zu",
			 (unsigned long long)offset, (unsigned long long)length,
			 huge ? " and length" : "", align);
		return RMA__V1__STATUS__ERR_INVALID;
	}
	if (offset > (uint64_t)st->st_size ||
	    length > (uint64_t)st->st_size - offset) {
		snprintf(detail, detail_len,
			 "offset %llu + length %llu is past the end of the "
			 "file (%lld bytes)",
			 (unsigned long long)offset, (unsigned long long)length,
			 (long long)st->st_size);
		return RMA__V1__STATUS__ERR_OUT_OF_BOUNDS;
	}
	return RMA__V1__STATUS__OK;
}

wire_status_t
region_fd_map(int fd, uint64_t offset, uint64_t length, void **addr_p,
	      char *detail, size_t detail_len)
{
	wire_status_t status;
	struct stat st;
	size_t align;
	bool huge;
	void *addr;

	if (fstat(fd, &st) < 0) {
		snprintf(detail, detail_len, "fstat: %s", strerror(errno));
		return RMA__V1__STATUS__ERR_INVALID;
	}
	status = region_fd_check(fd, &st, &align, &huge, detail, detail_len);
	if (status != RMA__V1__STATUS__OK)
		return status;
	/* The size again, now that F_SEAL_SHRINK is seen: from here on it
	 * only grows. The one read before the seals may be gone already
	 * (the owner shrinks, then seals), and a mapping past the end of
	 * the file is SIGBUS at the first put. */
	if (fstat(fd, &st) < 0) {
		snprintf(detail, detail_len, "fstat: %s", strerror(errno));
		return RMA__V1__STATUS__ERR_INVALID;
	}
	status = region_fd_range(&st, align, huge, offset, length, detail,
				 detail_len);
	if (status != RMA__V1__STATUS__OK)
		return status;
	addr = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		    (off_t)offset);
	if (addr == MAP_FAILED && errno == EPERM) {
		snprintf(detail, detail_len,
			 "the file is sealed against writes (F_SEAL_WRITE or "
			 "F_SEAL_FUTURE_WRITE): a region is written by gets "
			 "and puts");
		return RMA__V1__STATUS__ERR_PERMISSION;
	}
	if (addr == MAP_FAILED) {
		snprintf(detail, detail_len, "mmap of the file: %s",
			 strerror(errno));
		return errno == ENOMEM ? RMA__V1__STATUS__ERR_NO_MEMORY
				       : RMA__V1__STATUS__ERR_INVALID;
	}
	/* Mapped first: the seal leaves the mappings that exist writable. */
	if (huge && fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE) < 0) {
		snprintf(detail, detail_len,
			 "F_SEAL_FUTURE_WRITE on the hugetlbfs file: %s",
			 strerror(errno));
		munmap(addr, length);
		return RMA__V1__STATUS__ERR_INVALID;
	}
	/* Until the seal, the owner could punch pages out, and a punch
	 * takes the range's reservation with it: our first touch would
	 * need a page from a pool the owner may have emptied (SIGBUS).
	 * Every page faulted in now, with the seal on, is ours for good;
	 * one that cannot be had fails here (EFAULT), not in a put. */
	if (huge && madvise(addr, length, MADV_POPULATE_WRITE) < 0) {
		snprintf(detail, detail_len,
			 "the hugetlbfs file's pages (%s): a hole was punched "
			 "into it while it was registered, and the huge page "
			 "pool has no page for it",
			 strerror(errno));
		munmap(addr, length);
		return RMA__V1__STATUS__ERR_NO_MEMORY;
	}
	*addr_p = addr;
	return RMA__V1__STATUS__OK;
}
