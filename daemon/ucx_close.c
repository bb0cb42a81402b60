/* SPDX-License-Identifier: BSD-2-Clause */
/* close(), for everyone in rmad and UCX: the socket of a descriptor UCX
 * accepted (ucx_accept.c) is closed, but its number stays taken for a
 * while (fdhold.c says why and until when); every other descriptor is
 * closed as by libc's. Linked into rmad alone, like ucx_accept.c: the
 * executable's definition takes the place of libc's for UCX. */
#include "fdhold.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <unistd.h>

typedef int (*close_fn)(int);

int
close(int fd)
{
	static _Atomic(close_fn) real;
	close_fn f = atomic_load(&real);

	if (f == NULL) {
		f = (close_fn)dlsym(RTLD_NEXT, "close");
		if (f == NULL) {
			errno = ENOSYS;
			return -1;
		}
		atomic_store(&real, f);
	}
	if (fdhold_close(fd))
		return 0;
	return f(fd);
}
