/* SPDX-License-Identifier: BSD-2-Clause */
/* The daemon's whole status, through librma's internal call: tests that
 * look at what a daemon holds (the fault tests, test_workers). */
#ifndef RMA_TEST_STATUS_CALL_H
#define RMA_TEST_STATUS_CALL_H

#include <check.h>

#include "rma.h"
#include "rma_internal.h"

/* The reply (free with rma__v1__reply__free_unpacked); fails the test if
 * there is none. */
static inline Rma__V1__Reply *
status_call(rma_client_t *c)
{
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__StatusRequest body = RMA__V1__STATUS_REQUEST__INIT;
	Rma__V1__Reply *reply = NULL;

	req.body_case = RMA__V1__REQUEST__BODY_STATUS;
	req.status = &body;
	ck_assert_int_eq(rma_client_call(c, &req, &reply), RMA_OK);
	ck_assert_int_eq(reply->body_case, RMA__V1__REPLY__BODY_STATUS_REPLY);
	return reply;
}

#endif
