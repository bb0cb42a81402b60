/* Shared by rmactl's files. */
#ifndef RMACTL_H
#define RMACTL_H

#include <stdio.h>

#include <protobuf-c/protobuf-c.h>

/* Print msg as one JSON object: every field under its .proto name (set or
 * not), enums by name, 64-bit integers as plain numbers, bytes as hex. */
int rmactl_json_print(FILE *f, const ProtobufCMessage *msg);

#endif
