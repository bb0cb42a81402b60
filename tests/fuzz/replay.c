/* SPDX-License-Identifier: BSD-2-Clause */
/* Replays inputs through a fuzz target without libFuzzer: every file of
 * the directories (or the files) named on the command line, in name
 * order, each in a buffer of exactly its size (so that the sanitizers see
 * reads past the end). Built with any compiler into the normal test
 * suite; a crash, abort or sanitizer report fails the test. Fails too
 * when no input was found, so that a missing corpus does not pass. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int
replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long size;

	if (f == NULL || fseek(f, 0, SEEK_END) < 0 || (size = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	buf = malloc(size > 0 ? (size_t)size : 1);
	if (buf == NULL || fread(buf, 1, (size_t)size, f) != (size_t)size) {
		fprintf(stderr, "replay: %s: cannot read\n", path);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)size);
	free(buf);
	return 0;
}

static int
replay_dir(const char *dir, int *count)
{
	struct dirent **names;
	int n = scandir(dir, &names, NULL, alphasort);
	int rc = 0;

	if (n < 0) {
		fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		char path[4096];
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
		if (names[i]->d_name[0] != '.' && stat(path, &st) == 0 &&
		    S_ISREG(st.st_mode)) {
			if (replay_file(path) < 0)
				rc = -1;
			else
				(*count)++;
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

int
main(int argc, char **argv)
{
	int count = 0, rc = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
			if (replay_dir(argv[i], &count) < 0)
				rc = 1;
		} else if (replay_file(argv[i]) < 0) {
			rc = 1;
		} else {
			count++;
		}
	}
	printf("replay: %d inputs\n", count);
	if (count == 0) {
		fprintf(stderr, "replay: no inputs\n");
		return 1;
	}
	return rc;
}
