/* SPDX-License-Identifier: BSD-2-Clause */
/* Passed fds waiting for the frame they came with (conn_fds.h). */
#include "conn_fds.h"

#include <string.h>
#include <unistd.h>

static void
conn_fds_remove(struct conn_fds *f, size_t i)
{
	f->n--;
	memmove(&f->held[i], &f->held[i + 1], (f->n - i) * sizeof(f->held[0]));
}

int
conn_fds_receive(struct conn_fds *f, struct msghdr *mh, size_t n)
{
	uint64_t from = f->received;
	int rc = 0;

	f->received += n;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm != NULL;
	     cm = CMSG_NXTHDR(mh, cm)) {
		size_t nfds;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		nfds = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < nfds; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int),
			       sizeof(int));
			if (f->n == CONN_FDS_MAX) {
				close(fd);
				rc = -1;
				continue;
			}
			f->held[f->n].fd = fd;
			f->held[f->n].from = from;
			f->held[f->n].to = f->received;
			f->n++;
		}
	}
	return rc;
}

size_t
conn_fds_take(struct conn_fds *f, int *fd_p)
{
	size_t taken = 0, i = 0;

	*fd_p = -1;
	while (i < f->n) {
		if (f->held[i].from > f->frame_at ||
		    f->frame_at >= f->held[i].to) {
			i++;
			continue;
		}
		if (taken++ == 0)
			*fd_p = f->held[i].fd;
		else
			close(f->held[i].fd);
		conn_fds_remove(f, i);
	}
	return taken;
}

size_t
conn_fds_drop_stale(struct conn_fds *f, uint64_t next_frame_at)
{
	size_t dropped = 0, i = 0;

	while (i < f->n) {
		if (f->held[i].to > next_frame_at) {
			i++;
			continue;
		}
		close(f->held[i].fd);
		conn_fds_remove(f, i);
		dropped++;
	}
	return dropped;
}

void
conn_fds_close_all(struct conn_fds *f)
{
	for (size_t i = 0; i < f->n; i++)
		close(f->held[i].fd);
	f->n = 0;
}
