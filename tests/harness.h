/* End-to-end helpers: real rmad processes, started and awaited with a
 * deadline (the daemon writes "ready" to a pipe), stopped by signals. */
#ifndef RMA_TEST_HARNESS_H
#define RMA_TEST_HARNESS_H

#include <stdint.h>
#include <sys/types.h>

struct daemon_proc {
	pid_t pid;
	uint16_t port;
	char socket[108];
	char listen[32];
};

/* Starts build/daemon/rmad (env RMAD_BIN) on a fresh socket and a free
 * port, extra flags appended; fails the test unless ready within 10 s. */
void harness_daemon_start(struct daemon_proc *p, const char *const *extra);
/* Sends sig and waits (5 s) for the exit; returns the wait status. */
int harness_daemon_stop(struct daemon_proc *p, int sig);

/* A TCP port nobody listens on (bound then closed). */
uint16_t harness_free_port(void);
double harness_now(void);
/* 1 once fd is readable, 0 after seconds. */
int harness_wait_fd(int fd, double seconds);
void harness_fill(void *buf, size_t n, uint32_t seed);

#endif
