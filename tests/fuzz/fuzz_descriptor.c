/* SPDX-License-Identifier: BSD-2-Clause */
/* Fuzz target: descriptor_parse (proto/descriptor.c).
 *
 * The input is the text, not NUL-terminated. When it parses, formatting
 * the result must give back the same text (less the surrounding
 * whitespace, with hex digits in lower case) and that must parse to the
 * same descriptor. The other way round too: the input's first 40 bytes
 * taken as a descriptor must format into text that parses back to it.
 * Any difference aborts. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "descriptor.h"
#include "fuzz.h"

static void
fuzz_fail(const char *what)
{
	fprintf(stderr, "fuzz_descriptor: %s\n", what);
	abort();
}

static int
descriptor_equal(const struct descriptor *a, const struct descriptor *b)
{
	return memcmp(a->daemon_id, b->daemon_id, DAEMON_ID_SIZE) == 0 &&
	       a->region_id == b->region_id && a->generation == b->generation &&
	       a->length == b->length;
}

static void
check_format_parse(const struct descriptor *d)
{
	char text[DESCRIPTOR_TEXT_SIZE];
	struct descriptor back;

	memset(text, 'X', sizeof(text));
	descriptor_format(d, text);
	if (text[DESCRIPTOR_TEXT_SIZE - 1] != '\0' ||
	    strlen(text) != DESCRIPTOR_TEXT_SIZE - 1)
		fuzz_fail("format: wrong length or not terminated");
	if (descriptor_parse(text, strlen(text), &back) != 0)
		fuzz_fail("format: its text does not parse");
	if (!descriptor_equal(d, &back))
		fuzz_fail("format then parse changed the descriptor");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	char formatted[DESCRIPTOR_TEXT_SIZE];
	struct descriptor d;

	if (descriptor_parse(text, size, &d) == 0) {
		size_t len = size;

		while (len > 0 && isspace((unsigned char)text[0])) {
			text++;
			len--;
		}
		while (len > 0 && isspace((unsigned char)text[len - 1]))
			len--;
		descriptor_format(&d, formatted);
		if (len != strlen(formatted))
			fuzz_fail(
			    "parsed text and its format differ in length");
		for (size_t i = 0; i < len; i++) {
			if (tolower((unsigned char)text[i]) != formatted[i])
				fuzz_fail("parsed text and its format differ");
		}
		check_format_parse(&d);
	}
	if (size >= DAEMON_ID_SIZE + 3 * 8) {
		memcpy(d.daemon_id, data, DAEMON_ID_SIZE);
		memcpy(&d.region_id, data + DAEMON_ID_SIZE, 8);
		memcpy(&d.generation, data + DAEMON_ID_SIZE + 8, 8);
		memcpy(&d.length, data + DAEMON_ID_SIZE + 16, 8);
		check_format_parse(&d);
	}
	return 0;
}
