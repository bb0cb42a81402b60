/* SPDX-License-Identifier: BSD-2-Clause */
#include "bench_params.h"
#include "size.h"

#include <stddef.h>

void
bench_params_init(struct bench_params *p)
{
	*p = (struct bench_params){.window = BENCH_WINDOW_DEFAULT};
}

int
bench_params_set(struct bench_params *p, enum bench_param param,
		 const char *arg)
{
	switch (param) {
	case BENCH_PARAM_SIZE:
		return size_parse(arg, &p->size) < 0 || p->size == 0 ||
			       p->size > SIZE_MAX
			   ? -1
			   : 0;
	case BENCH_PARAM_COUNT:
		if (size_parse(arg, &p->count) < 0 || p->count == 0 ||
		    p->count > BENCH_COUNT_MAX)
			return -1;
		p->have_count = true;
		return 0;
	case BENCH_PARAM_WINDOW:
		return size_parse(arg, &p->window) < 0 || p->window == 0 ||
			       p->window > BENCH_WINDOW_MAX
			   ? -1
			   : 0;
	case BENCH_PARAM_WARMUP:
		if (size_parse(arg, &p->warmup) < 0 ||
		    p->warmup > BENCH_COUNT_MAX)
			return -1;
		p->have_warmup = true;
		return 0;
	}
	return -1;
}

void
bench_params_default(struct bench_params *p)
{
	uint64_t n;

	if (!p->have_count) {
		n = (256ull << 20) / p->size;
		p->count = n > 100000 ? 100000 : n < 16 ? 16 : n;
	}
	if (!p->have_warmup) {
		n = (4ull << 20) / p->size;
		n = n < 1 ? 1 : n;
		p->warmup = n < p->window ? n : p->window;
	}
}
