/* SPDX-License-Identifier: BSD-2-Clause */
/* copycount: an LD_PRELOAD library for bench/copy_budget. It counts the
 * memcpy and memmove calls a process makes through the dynamic linker
 * (rmad's, librma's and UCX's copies of data: region copies, UCX's bcopy
 * pack and unpack) and the bytes they move, in a file the script reads
 * while the process runs: COPYCOUNT_DIR/<pid>, struct copycount_file.
 *
 * What it cannot see: copies the compiler inlined (fixed-size struct
 * copies) and UCX's "rep movsb" copies between UCX_BUILTIN_MEMCPY_MIN and
 * _MAX (the script sets UCX_BUILTIN_MEMCPY_MAX=0 so that UCX calls memcpy
 * for every copy: the same copies, through another routine). A child
 * after fork() shares its parent's counters. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* Copies of at least this many bytes are data, not records or headers. */
#define COPYCOUNT_BIG 4096

struct copycount_file {
	uint64_t calls;
	uint64_t bytes;
	uint64_t big_calls; /* >= COPYCOUNT_BIG bytes */
	uint64_t big_bytes;
};

typedef void *(*copy_fn)(void *, const void *, size_t);

static copy_fn real_memcpy, real_memmove;
static struct copycount_file *counts;

/* Before the real routines are known (the dynamic linker's own copies):
 * byte by byte, backwards when the ranges overlap that way. volatile, or
 * the compiler makes the loop a call to memcpy: this one. */
static void *
copycount_slow(void *dst, const void *src, size_t n)
{
	volatile unsigned char *d = dst;
	const unsigned char *s = src;

	if (d > s && d < s + n) {
		while (n-- > 0)
			d[n] = s[n];
	} else {
		for (size_t i = 0; i < n; i++)
			d[i] = s[i];
	}
	return dst;
}

static void
copycount_add(size_t n)
{
	if (counts == NULL)
		return;
	__atomic_fetch_add(&counts->calls, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&counts->bytes, n, __ATOMIC_RELAXED);
	if (n >= COPYCOUNT_BIG) {
		__atomic_fetch_add(&counts->big_calls, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&counts->big_bytes, n, __ATOMIC_RELAXED);
	}
}

__attribute__((constructor)) static void
copycount_init(void)
{
	const char *dir = getenv("COPYCOUNT_DIR");
	char path[4096];
	void *m;
	int fd;

	real_memcpy = (copy_fn)dlsym(RTLD_NEXT, "memcpy");
	real_memmove = (copy_fn)dlsym(RTLD_NEXT, "memmove");
	if (dir == NULL)
		return;
	snprintf(path, sizeof(path), "%s/%d", dir, (int)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (ftruncate(fd, sizeof(*counts)) == 0) {
		m = mmap(NULL, sizeof(*counts), PROT_READ | PROT_WRITE,
			 MAP_SHARED, fd, 0);
		if (m != MAP_FAILED)
			counts = m;
	}
	close(fd);
}

void *
memcpy(void *dst, const void *src, size_t n)
{
	copycount_add(n);
	return (real_memcpy != NULL ? real_memcpy : copycount_slow)(dst, src,
								    n);
}

void *
memmove(void *dst, const void *src, size_t n)
{
	copycount_add(n);
	return (real_memmove != NULL ? real_memmove : copycount_slow)(dst, src,
								      n);
}

void *
__memcpy_chk(void *dst, const void *src, size_t n, size_t dstlen)
{
	if (n > dstlen)
		abort();
	return memcpy(dst, src, n);
}

void *
__memmove_chk(void *dst, const void *src, size_t n, size_t dstlen)
{
	if (n > dstlen)
		abort();
	return memmove(dst, src, n);
}
