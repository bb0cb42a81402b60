/* SPDX-License-Identifier: BSD-2-Clause */
/* rmactl's file handling: whole reads, atomic writes, descriptor files. */
#include "rmactl.h"
#include "descriptor.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sysexits.h>
#include <unistd.h>

/* A descriptor line is short; anything longer is not one. */
#define RMACTL_DESCRIPTOR_MAX 4096

/* Read an fd to its end into a malloc'd buffer. */
int
rmactl_file_read_fd(int fd, uint8_t **buf_p, size_t *len_p)
{
	size_t cap = 64 * 1024, len = 0;
	struct stat st;
	uint8_t *buf, *nbuf;
	ssize_t n;

	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
		cap = (size_t)st.st_size + 1;
	buf = malloc(cap);
	if (buf == NULL)
		return -1;
	for (;;) {
		if (len == cap) {
			nbuf = realloc(buf, cap * 2);
			if (nbuf == NULL) {
				errno = ENOMEM;
				goto err_free;
			}
			buf = nbuf;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto err_free;
		if (n == 0)
			break;
		len += (size_t)n;
	}
	*buf_p = buf;
	*len_p = len;
	return 0;

err_free:
	n = errno;
	free(buf);
	errno = (int)n;
	return -1;
}

/* Open an input file the user named. A name that cannot be opened, or a
 * directory, is EX_NOINPUT (sysexits: "an input file did not exist or was
 * not readable"); the error is printed. */
int
rmactl_file_open_input(const char *cmd, const char *path, int *fd_p)
{
	struct stat st;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		goto err;
	if (fstat(fd, &st) < 0)
		goto err_close;
	if (S_ISDIR(st.st_mode)) {
		errno = EISDIR;
		goto err_close;
	}
	*fd_p = fd;
	return 0;

err_close:
	close(fd);
err:
	return rmactl_errx(EX_NOINPUT, cmd, "cannot open %s: %s", path,
			   strerror(errno));
}

/* Read a whole file (or stream) into a malloc'd buffer; prints the error
 * and returns an exit code: EX_NOINPUT if it cannot be opened, EX_IOERR if
 * reading it fails. */
int
rmactl_file_read(const char *cmd, const char *path, uint8_t **buf_p,
		 size_t *len_p)
{
	int fd, rc;

	rc = rmactl_file_open_input(cmd, path, &fd);
	if (rc != 0)
		return rc;
	if (rmactl_file_read_fd(fd, buf_p, len_p) < 0)
		rc = rmactl_errx(EX_IOERR, cmd, "cannot read %s: %s", path,
				 strerror(errno));
	close(fd);
	return rc;
}

/* Exactly len bytes; a file that shrank meanwhile is an error. */
int
rmactl_file_read_exact(int fd, void *dst, size_t len)
{
	uint8_t *p = dst;
	ssize_t n;

	while (len > 0) {
		n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0) {
			errno = EIO;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int
rmactl_file_write_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;
	ssize_t w;

	while (n > 0) {
		w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Write a file under a temporary name in its directory and rename it into
 * place, so a reader waiting for it never sees half of it. */
int
rmactl_file_write_atomic(const char *path, const void *p, size_t n)
{
	char *tmp;
	int fd, err;

	if (asprintf(&tmp, "%s.XXXXXX", path) < 0)
		return -1;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		goto err_free;
	/* mkostemp makes it 0600 and it stays so: a descriptor is a
	 * capability (whoever reads it may write the region) and a dump is
	 * the region's bytes; share either with chmod or a copy on purpose. */
	if (rmactl_file_write_all(fd, p, n) < 0)
		goto err_unlink;
	if (close(fd) < 0) {
		fd = -1;
		goto err_unlink;
	}
	if (rename(tmp, path) < 0) {
		fd = -1;
		goto err_unlink;
	}
	free(tmp);
	return 0;

err_unlink:
	err = errno;
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	errno = err;
err_free:
	err = errno;
	free(tmp);
	errno = err;
	return -1;
}

/* The first line of the file, trimmed, checked as a descriptor. */
int
rmactl_file_read_descriptor(const char *cmd, const char *path, char **desc_p)
{
	struct descriptor d;
	uint8_t *buf;
	size_t len, start, end;
	char *desc;
	int rc;

	rc = rmactl_file_read(cmd, path, &buf, &len);
	if (rc != 0)
		return rc;
	for (end = 0; end < len && buf[end] != '\n'; end++)
		;
	for (start = 0;
	     start < end && (buf[start] == ' ' || buf[start] == '\t'); start++)
		;
	while (end > start && (buf[end - 1] == '\r' || buf[end - 1] == ' ' ||
			       buf[end - 1] == '\t'))
		end--;
	if (end == start || end - start > RMACTL_DESCRIPTOR_MAX ||
	    memchr(buf + start, '\0', end - start) != NULL ||
	    descriptor_parse((const char *)buf + start, end - start, &d) < 0) {
		free(buf);
		return rmactl_errx(EX_DATAERR, cmd,
				   "bad descriptor: %s does not start with "
				   "a valid descriptor line",
				   path);
	}
	desc = strndup((const char *)buf + start, end - start);
	free(buf);
	if (desc == NULL)
		return rmactl_errx(EX_SOFTWARE, cmd, "out of memory");
	*desc_p = desc;
	return 0;
}
