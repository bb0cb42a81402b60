/* A hostile peer for test_faults: connects to an rmad's UCX listener and
 * sends tagged messages nobody posted a receive for (random tags), which
 * UCX would keep until someone does.
 *
 *   junk_peer HOST:PORT COUNT BYTES
 *
 * Exits 0 once every message was sent (or the endpoint failed: rmad may
 * close it), 1 on a setup error or after 20 s. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <ucp/api/ucp.h>

static int pending;
static ucs_status_t ep_status = UCS_OK;

static void
junk_sent(void *request, ucs_status_t status, void *user_data)
{
	pending--;
	ucp_request_free(request);
}

static void
junk_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
	ep_status = status;
}

static double
junk_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int
main(int argc, char **argv)
{
	ucp_params_t params = {
	    .field_mask = UCP_PARAM_FIELD_FEATURES,
	    .features = UCP_FEATURE_TAG,
	};
	ucp_worker_params_t wparams = {
	    .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
	    .thread_mode = UCS_THREAD_MODE_SINGLE,
	};
	ucp_ep_params_t ep_params = {
	    .field_mask = UCP_EP_PARAM_FIELD_FLAGS |
			  UCP_EP_PARAM_FIELD_SOCK_ADDR |
			  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
			  UCP_EP_PARAM_FIELD_ERR_HANDLER,
	    .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
	    .err_mode = UCP_ERR_HANDLING_MODE_PEER,
	    .err_handler = {.cb = junk_ep_error},
	};
	ucp_request_param_t sp_param = {
	    .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK,
	    .cb.send = junk_sent,
	};
	struct sockaddr_in sa = {.sin_family = AF_INET};
	ucp_context_h ctx;
	ucp_worker_h worker;
	ucp_ep_h ep;
	char host[64], *colon;
	long count, bytes;
	char *buf;
	double deadline;

	if (argc != 4 || strlen(argv[1]) >= sizeof(host)) {
		fprintf(stderr, "usage: junk_peer HOST:PORT COUNT BYTES\n");
		return 1;
	}
	snprintf(host, sizeof(host), "%s", argv[1]);
	colon = strrchr(host, ':');
	count = strtol(argv[2], NULL, 10);
	bytes = strtol(argv[3], NULL, 10);
	if (colon == NULL || count <= 0 || bytes <= 0)
		return 1;
	*colon = '\0';
	sa.sin_port = htons((uint16_t)atoi(colon + 1));
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return 1;
	buf = calloc(1, (size_t)bytes);
	if (buf == NULL || ucp_init(&params, NULL, &ctx) != UCS_OK ||
	    ucp_worker_create(ctx, &wparams, &worker) != UCS_OK)
		return 1;
	ep_params.sockaddr.addr = (struct sockaddr *)&sa;
	ep_params.sockaddr.addrlen = sizeof(sa);
	if (ucp_ep_create(worker, &ep_params, &ep) != UCS_OK)
		return 1;
	for (long i = 0; i < count && ep_status == UCS_OK; i++) {
		ucp_tag_t tag;
		ucs_status_ptr_t sp;

		if (getrandom(&tag, sizeof(tag), 0) != sizeof(tag))
			return 1;
		pending++;
		sp = ucp_tag_send_nbx(ep, buf, (size_t)bytes, tag, &sp_param);
		if (sp == NULL || UCS_PTR_IS_ERR(sp))
			pending--;
		while (pending > 16 && ep_status == UCS_OK)
			ucp_worker_progress(worker);
	}
	deadline = junk_now() + 20;
	while (pending > 0 && ep_status == UCS_OK && junk_now() < deadline)
		ucp_worker_progress(worker);
	printf("junk_peer: %ld messages of %ld bytes, endpoint %s\n", count,
	       bytes, ucs_status_string(ep_status));
	return pending > 0 && ep_status == UCS_OK ? 1 : 0;
}
