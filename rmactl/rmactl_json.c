/* SPDX-License-Identifier: BSD-2-Clause */
/* JSON output of protobuf-c messages, driven by their descriptors, so that
 * `rmactl status --json` follows the .proto as it grows. The mapping is
 * proto3's JSON mapping where it matters to a reader: 64-bit integers are
 * strings, since ids and generations are random 64-bit values and common
 * readers (jq 1.6, JavaScript) hold numbers as doubles and round them. Enum
 * values are the words the tables print ("up", "put"), not the .proto names:
 * one vocabulary for people and scripts. */
#include "rmactl.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Enums whose words were built; the .proto has a handful. */
#define RMACTL_JSON_ENUMS_MAX 16

static void
rmactl_json_indent(FILE *f, int depth)
{
	for (int i = 0; i < depth; i++)
		fputs("  ", f);
}

/* Length of the valid UTF-8 sequence at p, or 0. */
static size_t
rmactl_json_utf8_len(const unsigned char *p)
{
	size_t n;
	uint32_t cp;

	if (p[0] < 0x80)
		return 1;
	if ((p[0] & 0xe0) == 0xc0) {
		n = 2;
		cp = p[0] & 0x1f;
	} else if ((p[0] & 0xf0) == 0xe0) {
		n = 3;
		cp = p[0] & 0x0f;
	} else if ((p[0] & 0xf8) == 0xf0) {
		n = 4;
		cp = p[0] & 0x07;
	} else {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	/* overlong forms, surrogates and beyond U+10FFFF are not UTF-8 */
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) ||
	    (n == 4 && cp < 0x10000) || (cp >= 0xd800 && cp <= 0xdfff) ||
	    cp > 0x10ffff)
		return 0;
	return n;
}

static void
rmactl_json_string(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t n;

	fputc('"', f);
	while (*p != '\0') {
		switch (*p) {
		case '"':
			fputs("\\\"", f);
			break;
		case '\\':
			fputs("\\\\", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\r':
			fputs("\\r", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		default:
			if (*p < 0x20 || *p == 0x7f) {
				fprintf(f, "\\u%04x", *p);
				break;
			}
			n = rmactl_json_utf8_len(p);
			if (n == 0) {
				/* the daemon relays what peers say: keep the
				 * output valid JSON whatever arrives */
				fputs("\\ufffd", f);
				break;
			}
			fwrite(p, 1, n, f);
			p += n;
			continue;
		}
		p++;
	}
	fputc('"', f);
}

/* ---- enum words ---- */

static struct {
	const ProtobufCEnumDescriptor *desc;
	char **words; /* by value index, as in desc->values */
} rmactl_json_enums[RMACTL_JSON_ENUMS_MAX];

/* Length of the "PREFIX_" all values of desc share (0 if there is only one
 * value or none is shared): PEER_UP, PEER_DOWN -> "PEER_". */
static size_t
rmactl_json_enum_prefix(const ProtobufCEnumDescriptor *desc)
{
	const char *first = desc->values[0].name;
	size_t len = 0;

	if (desc->n_values < 2)
		return 0;
	for (size_t i = 0; first[i] != '\0'; i++) {
		int shared = 1;

		if (first[i] != '_')
			continue;
		for (unsigned v = 1; v < desc->n_values && shared; v++)
			shared =
			    strncmp(desc->values[v].name, first, i + 1) == 0;
		if (!shared)
			break;
		len = i + 1;
	}
	return len;
}

static char **
rmactl_json_enum_words(const ProtobufCEnumDescriptor *desc)
{
	size_t prefix, slot;
	char **words;

	for (slot = 0; slot < RMACTL_JSON_ENUMS_MAX; slot++) {
		if (rmactl_json_enums[slot].desc == desc)
			return rmactl_json_enums[slot].words;
		if (rmactl_json_enums[slot].desc == NULL)
			break;
	}
	if (slot == RMACTL_JSON_ENUMS_MAX)
		return NULL;
	words = calloc(desc->n_values, sizeof(*words));
	if (words == NULL)
		return NULL;
	prefix = rmactl_json_enum_prefix(desc);
	for (unsigned v = 0; v < desc->n_values; v++) {
		words[v] = strdup(desc->values[v].name + prefix);
		if (words[v] == NULL)
			goto err_free;
		for (char *c = words[v]; *c != '\0'; c++)
			*c = (char)tolower((unsigned char)*c);
	}
	/* kept for the life of the process, like the descriptor */
	rmactl_json_enums[slot].desc = desc;
	rmactl_json_enums[slot].words = words;
	return words;

err_free:
	for (unsigned v = 0; v < desc->n_values; v++)
		free(words[v]);
	free(words);
	return NULL;
}

const char *
rmactl_json_enum_word(const ProtobufCEnumDescriptor *desc, int value)
{
	char **words = rmactl_json_enum_words(desc);

	for (unsigned v = 0; words != NULL && v < desc->n_values; v++) {
		if (desc->values[v].value == value)
			return words[v];
	}
	return NULL;
}

/* ---- values ---- */

static int rmactl_json_message(FILE *f, const ProtobufCMessage *msg,
			       const ProtobufCMessageDescriptor *desc,
			       int depth);

static int
rmactl_json_value(FILE *f, const ProtobufCFieldDescriptor *field, const void *p,
		  int depth)
{
	const ProtobufCBinaryData *bin;
	const char *word;

	switch (field->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		fprintf(f, "%d", *(const int32_t *)p);
		break;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		fprintf(f, "%u", *(const uint32_t *)p);
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		fprintf(f, "\"%lld\"", (long long)*(const int64_t *)p);
		break;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		fprintf(f, "\"%llu\"",
			(unsigned long long)*(const uint64_t *)p);
		break;
	case PROTOBUF_C_TYPE_FLOAT:
		fprintf(f, "%.9g", (double)*(const float *)p);
		break;
	case PROTOBUF_C_TYPE_DOUBLE:
		fprintf(f, "%.17g", *(const double *)p);
		break;
	case PROTOBUF_C_TYPE_BOOL:
		fputs(*(const protobuf_c_boolean *)p ? "true" : "false", f);
		break;
	case PROTOBUF_C_TYPE_ENUM:
		/* a value newer than this rmactl: its number, as proto3 */
		word =
		    rmactl_json_enum_word(field->descriptor, *(const int *)p);
		if (word != NULL)
			rmactl_json_string(f, word);
		else
			fprintf(f, "%d", *(const int *)p);
		break;
	case PROTOBUF_C_TYPE_STRING:
		rmactl_json_string(f, *(char *const *)p);
		break;
	case PROTOBUF_C_TYPE_BYTES:
		bin = p;
		fputc('"', f);
		for (size_t i = 0; i < bin->len; i++)
			fprintf(f, "%02x", bin->data[i]);
		fputc('"', f);
		break;
	case PROTOBUF_C_TYPE_MESSAGE:
		return rmactl_json_message(f, *(ProtobufCMessage *const *)p,
					   field->descriptor, depth);
	}
	return 0;
}

static size_t
rmactl_json_elem_size(const ProtobufCFieldDescriptor *field)
{
	switch (field->type) {
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return 8;
	case PROTOBUF_C_TYPE_DOUBLE:
		return sizeof(double);
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_ENUM:
		return sizeof(int);
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	default:
		return 4;
	}
}

/* Whether a field is present: oneof members only when chosen, proto2 and
 * proto3-optional scalars only when their has_ flag says so. */
static int
rmactl_json_present(const ProtobufCMessage *msg,
		    const ProtobufCFieldDescriptor *field)
{
	const char *base = (const char *)msg;

	if (field->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
		return *(const uint32_t *)(base + field->quantifier_offset) ==
		       field->id;
	if (field->label == PROTOBUF_C_LABEL_OPTIONAL &&
	    field->type != PROTOBUF_C_TYPE_MESSAGE &&
	    field->type != PROTOBUF_C_TYPE_STRING)
		return *(const protobuf_c_boolean *)(base +
						     field->quantifier_offset);
	return 1;
}

/* "name": value, at depth + 1 inside an object at depth. */
static void
rmactl_json_field(FILE *f, const ProtobufCMessage *msg,
		  const ProtobufCFieldDescriptor *field, int depth)
{
	const char *base = (const char *)msg;

	rmactl_json_indent(f, depth + 1);
	rmactl_json_string(f, field->name);
	fputs(": ", f);
	if (field->label == PROTOBUF_C_LABEL_REPEATED) {
		size_t n = *(const size_t *)(base + field->quantifier_offset);
		const char *arr = *(const char *const *)(base + field->offset);
		size_t elem = rmactl_json_elem_size(field);

		fputc('[', f);
		for (size_t k = 0; k < n; k++) {
			fputs(k ? ",\n" : "\n", f);
			rmactl_json_indent(f, depth + 2);
			rmactl_json_value(f, field, arr + k * elem, depth + 2);
		}
		if (n > 0) {
			fputc('\n', f);
			rmactl_json_indent(f, depth + 1);
		}
		fputc(']', f);
	} else {
		rmactl_json_value(f, field, base + field->offset, depth + 1);
	}
}

static int
rmactl_json_message(FILE *f, const ProtobufCMessage *msg,
		    const ProtobufCMessageDescriptor *desc, int depth)
{
	ProtobufCMessage *dflt = NULL;
	int first = 1;

	/* an unset sub-message prints as its defaults: every field shows */
	if (msg == NULL) {
		dflt = calloc(1, desc->sizeof_message);
		if (dflt == NULL)
			return -1;
		desc->message_init(dflt);
		msg = dflt;
	}
	fputc('{', f);
	if (depth == 0) {
		fprintf(f, "\n  \"schema_version\": %d", RMACTL_JSON_SCHEMA);
		first = 0;
	}
	for (unsigned i = 0; i < desc->n_fields; i++) {
		const ProtobufCFieldDescriptor *field = &desc->fields[i];

		if (!rmactl_json_present(msg, field))
			continue;
		fputs(first ? "\n" : ",\n", f);
		first = 0;
		rmactl_json_field(f, msg, field, depth);
	}
	if (!first) {
		fputc('\n', f);
		rmactl_json_indent(f, depth);
	}
	fputc('}', f);
	free(dflt);
	return 0;
}

int
rmactl_json_print(FILE *f, const ProtobufCMessage *msg)
{
	if (rmactl_json_message(f, msg, msg->descriptor, 0) < 0)
		return -1;
	fputc('\n', f);
	return ferror(f) ? -1 : 0;
}

int
rmactl_json_print_fields(FILE *f, const ProtobufCMessage *msg,
			 const char *const *names)
{
	int first = 0;

	fprintf(f, "{\n  \"schema_version\": %d", RMACTL_JSON_SCHEMA);
	for (; *names != NULL; names++) {
		const ProtobufCFieldDescriptor *field =
		    protobuf_c_message_descriptor_get_field_by_name(
			msg->descriptor, *names);

		if (field == NULL || !rmactl_json_present(msg, field))
			continue;
		fputs(first ? "\n" : ",\n", f);
		first = 0;
		rmactl_json_field(f, msg, field, 0);
	}
	fputs("\n}\n", f);
	return ferror(f) ? -1 : 0;
}

void
rmactl_json_quote(FILE *f, const char *s)
{
	rmactl_json_string(f, s);
}
