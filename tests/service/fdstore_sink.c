/* SPDX-License-Identifier: BSD-2-Clause */
/* Stands in for systemd running one Type=notify service with
 * NotifyAccess=main, Restart=on-failure and FileDescriptorStoreMax=MAX:
 *
 *   fdstore_sink [-m MAX] [-t LIFETIME] [-l SOCKET] NOTIFY_PATH -- COMMAND...
 *
 * With -l, it also listens on the Unix stream socket SOCKET and passes it
 * first (fd 3, named rmad.socket), as rmad.socket does.
 * It binds a datagram socket at NOTIFY_PATH, starts COMMAND with
 * NOTIFY_SOCKET set, and writes to stdout (flushed at once) what systemd
 * would log or do, one line each:
 *   started PID             COMMAND runs (again)
 *   <assignment>            each line of a message from the main PID
 *   stored NAME | full NAME | dup NAME | removed NAME N
 *   exited PID STATUS | killed PID SIGNAL
 *   released N              the store was emptied (unit stopped)
 * as systemd v252 does (src/core/service.c): FDSTORE=1 keeps the fds
 * sent with it under FDNAME= (default "stored"); past MAX they are
 * closed ("full", the sender is not told); an fd already stored is not
 * stored twice; FDSTOREREMOVE=1 drops every fd with that FDNAME. Messages
 * are read before a death is handled (systemd reads its notify socket at
 * a higher priority than SIGCHLD), and from the main PID only. A death
 * by a signal other than TERM/INT/HUP/PIPE, or an exit status other than
 * 0 and 78 (RestartPreventExitStatus), restarts COMMAND at once (systemd
 * would wait RestartSec=) with the store passed as systemd passes it: fds from
 * 3, LISTEN_FDS, LISTEN_FDNAMES, LISTEN_PID. Otherwise the store is released.
 * SIGUSR1 is "systemctl restart" (SIGTERM, then start again, the store kept: a
 * job is queued); SIGTERM is "systemctl stop" (SIGTERM, the store released,
 * then exit). FDSTORE=MAX is set, as systemd 254 does. Exits after LIFETIME
 * seconds (default 120) so that a broken test never leaves it behind.
 *
 * With FDSTORE_SINK_UNSEAL=1 in its environment (not passed on), a store
 * that gives back something other than what it was given: at each
 * restart the first fd named store-region-* goes to COMMAND as an
 * unsealed copy (a new memfd with the same bytes), "unsealed NAME". */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SINK_MSG_FDS 253 /* SCM_MAX_FD */

struct stored {
	int fd;
	char name[256];
};

static struct stored *store;
static size_t n_store, max_store = 4096;
static pid_t main_pid;
static int activation_fd = -1;
static bool unseal; /* FDSTORE_SINK_UNSEAL */

static void
sink_release(void)
{
	for (size_t i = 0; i < n_store; i++)
		close(store[i].fd);
	printf("released %zu\n", n_store);
	n_store = 0;
}

static bool
sink_same_fd(int a, int b)
{
	struct stat sa, sb;

	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 &&
	       sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static void
sink_store(int fd, const char *name)
{
	for (size_t i = 0; i < n_store; i++) {
		if (sink_same_fd(store[i].fd, fd)) {
			printf("dup %s\n", name);
			close(fd);
			return;
		}
	}
	if (n_store >= max_store) {
		printf("full %s\n", name);
		close(fd);
		return;
	}
	store[n_store].fd = fd;
	snprintf(store[n_store].name, sizeof(store[n_store].name), "%s", name);
	n_store++;
	printf("stored %s\n", name);
}

static void
sink_remove(const char *name)
{
	size_t k = 0, removed = 0;

	for (size_t i = 0; i < n_store; i++) {
		if (strcmp(store[i].name, name) == 0) {
			close(store[i].fd);
			removed++;
		} else {
			store[k++] = store[i];
		}
	}
	n_store = k;
	printf("removed %s %zu\n", name, removed);
}

/* Every message queued, as systemd reads them: before the SIGCHLD. */
static void
sink_drain(int sock)
{
	for (;;) {
		char buf[4097], cbuf[CMSG_SPACE(sizeof(struct ucred)) +
				     CMSG_SPACE(sizeof(int) * SINK_MSG_FDS)];
		struct iovec iov = {buf, sizeof(buf) - 1};
		struct msghdr mh = {.msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = cbuf,
				    .msg_controllen = sizeof(cbuf)};
		int fds[SINK_MSG_FDS];
		size_t n_fds = 0;
		pid_t pid = 0;
		char name[256] = "stored", *line, *save;
		bool fdstore = false, remove = false;
		ssize_t n;

		n = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0)
			return;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm != NULL;
		     cm = CMSG_NXTHDR(&mh, cm)) {
			if (cm->cmsg_level != SOL_SOCKET)
				continue;
			if (cm->cmsg_type == SCM_CREDENTIALS) {
				struct ucred uc;
				memcpy(&uc, CMSG_DATA(cm), sizeof(uc));
				pid = uc.pid;
			} else if (cm->cmsg_type == SCM_RIGHTS) {
				size_t k =
				    (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
				for (size_t i = 0; i < k; i++)
					memcpy(&fds[n_fds++],
					       CMSG_DATA(cm) + i * sizeof(int),
					       sizeof(int));
			}
		}
		buf[n] = '\0';
		if (pid != main_pid || main_pid == 0) {
			printf("ignored from %d\n", (int)pid);
			for (size_t i = 0; i < n_fds; i++)
				close(fds[i]);
			continue;
		}
		for (line = strtok_r(buf, "\n", &save); line != NULL;
		     line = strtok_r(NULL, "\n", &save)) {
			printf("%s\n", line);
			if (strcmp(line, "FDSTORE=1") == 0)
				fdstore = true;
			else if (strcmp(line, "FDSTOREREMOVE=1") == 0)
				remove = true;
			else if (strncmp(line, "FDNAME=", 7) == 0)
				snprintf(name, sizeof(name), "%s", line + 7);
		}
		for (size_t i = 0; i < n_fds; i++) {
			if (fdstore)
				sink_store(fds[i], name);
			else
				close(fds[i]);
		}
		if (remove)
			sink_remove(name);
		fflush(stdout);
	}
}

/* FDSTORE_SINK_UNSEAL: the first region's fd, swapped for a copy without
 * seals (in the store from then on). */
static void
sink_unseal_first(void)
{
	for (size_t i = 0; i < n_store; i++) {
		struct stat st;
		int copy;

		if (strncmp(store[i].name, "store-region-", 13) != 0)
			continue;
		copy = memfd_create("unsealed", MFD_CLOEXEC);
		if (copy < 0 || fstat(store[i].fd, &st) < 0 ||
		    ftruncate(copy, st.st_size) < 0 ||
		    copy_file_range(store[i].fd, &(off_t){0}, copy, &(off_t){0},
				    (size_t)st.st_size, 0) != st.st_size) {
			perror("fdstore_sink: unsealed copy");
			exit(1);
		}
		close(store[i].fd);
		store[i].fd = copy;
		printf("unsealed %s\n", store[i].name);
		return;
	}
}

static pid_t
sink_start(char **argv, const char *notify_path, const sigset_t *old_mask)
{
	pid_t pid;

	if (unseal && n_store > 0)
		sink_unseal_first();
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		char names[65536] = "", num[32];
		int sock = activation_fd >= 0 ? 1 : 0;
		int top = 3 + sock + (int)n_store + 16;

		/* out of the way first, then down to 3, 4, ...: the socket
		 * first, then the store (service_collect_fds) */
		if (sock)
			activation_fd =
			    fcntl(activation_fd, F_DUPFD_CLOEXEC, top);
		for (size_t i = 0; i < n_store; i++)
			store[i].fd = fcntl(store[i].fd, F_DUPFD_CLOEXEC, top);
		if (sock) {
			dup2(activation_fd, 3);
			strcpy(names, "rmad.socket");
		}
		for (size_t i = 0; i < n_store; i++) {
			dup2(store[i].fd, 3 + sock + (int)i);
			if (sock || i > 0)
				strncat(names, ":",
					sizeof(names) - strlen(names) - 1);
			strncat(names, store[i].name,
				sizeof(names) - strlen(names) - 1);
		}
		unsetenv("LISTEN_FDS");
		unsetenv("LISTEN_FDNAMES");
		unsetenv("LISTEN_PID");
		if (sock + n_store > 0) {
			snprintf(num, sizeof(num), "%zu", sock + n_store);
			setenv("LISTEN_FDS", num, 1);
			setenv("LISTEN_FDNAMES", names, 1);
			snprintf(num, sizeof(num), "%d", (int)getpid());
			setenv("LISTEN_PID", num, 1);
		}
		setenv("NOTIFY_SOCKET", notify_path, 1);
		/* as systemd 254 and later tell FileDescriptorStoreMax= */
		snprintf(num, sizeof(num), "%zu", max_store);
		setenv("FDSTORE", num, 1);
		sigprocmask(SIG_SETMASK, old_mask, NULL);
		execvp(argv[0], argv);
		_exit(127);
	}
	printf("started %d\n", (int)pid);
	fflush(stdout);
	return pid;
}

static bool
sink_should_restart(int status)
{
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);
		return sig != SIGTERM && sig != SIGINT && sig != SIGHUP &&
		       sig != SIGPIPE;
	}
	return WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 78;
}

int
main(int argc, char **argv)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	sigset_t mask, old_mask;
	int lifetime = 120, one = 1, opt, sock, sfd;
	bool restart_job = false, stop_job = false;
	const char *activation_path = NULL;
	time_t end;

	unseal = getenv("FDSTORE_SINK_UNSEAL") != NULL;
	unsetenv("FDSTORE_SINK_UNSEAL");
	while ((opt = getopt(argc, argv, "+m:t:l:")) != -1) {
		if (opt == 'm')
			max_store = strtoul(optarg, NULL, 10);
		else if (opt == 'l')
			activation_path = optarg[0] ? optarg : NULL;
		else if (opt == 't')
			lifetime = atoi(optarg);
		else
			return 64;
	}
	if (argc - optind < 3 || strcmp(argv[optind + 1], "--") != 0 ||
	    strlen(argv[optind]) >= sizeof(sa.sun_path)) {
		fprintf(stderr,
			"usage: fdstore_sink [-m MAX] [-t LIFETIME] "
			"[-l SOCKET] NOTIFY_PATH -- COMMAND [ARG...]\n");
		return 64;
	}
	end = time(NULL) + lifetime;
	store = calloc(max_store + 1, sizeof(*store));
	strcpy(sa.sun_path, argv[optind]);
	sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sock < 0 || bind(sock, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    setsockopt(sock, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0) {
		fprintf(stderr, "fdstore_sink: %s: %s\n", argv[optind],
			strerror(errno));
		return 1;
	}
	if (activation_path != NULL) {
		struct sockaddr_un la = {.sun_family = AF_UNIX};

		snprintf(la.sun_path, sizeof(la.sun_path), "%s",
			 activation_path);
		activation_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (activation_fd < 0 ||
		    bind(activation_fd, (struct sockaddr *)&la, sizeof(la)) <
			0 ||
		    listen(activation_fd, 128) < 0) {
			fprintf(stderr, "fdstore_sink: %s: %s\n",
				activation_path, strerror(errno));
			return 1;
		}
	}
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGUSR1);
	sigprocmask(SIG_BLOCK, &mask, &old_mask);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	main_pid = sink_start(argv + optind + 2, argv[optind], &old_mask);
	if (main_pid < 0)
		return 1;
	while (time(NULL) < end) {
		struct pollfd p[2] = {{sock, POLLIN, 0}, {sfd, POLLIN, 0}};
		struct signalfd_siginfo si;

		if (poll(p, 2, 1000) <= 0)
			continue;
		sink_drain(sock);
		if (!(p[1].revents & POLLIN) ||
		    read(sfd, &si, sizeof(si)) != sizeof(si))
			continue;
		if (si.ssi_signo == SIGUSR1 || si.ssi_signo == SIGTERM ||
		    si.ssi_signo == SIGINT) {
			if (si.ssi_signo == SIGUSR1)
				restart_job = true;
			else
				stop_job = true;
			if (main_pid > 0)
				kill(main_pid, SIGTERM);
			else if (stop_job)
				break;
			continue;
		}
		/* SIGCHLD: what the dead process sent first is in now */
		for (;;) {
			int status;
			pid_t pid = waitpid(-1, &status, WNOHANG);

			if (pid <= 0)
				break;
			sink_drain(sock);
			if (pid != main_pid)
				continue;
			if (WIFSIGNALED(status))
				printf("killed %d %d\n", (int)pid,
				       WTERMSIG(status));
			else
				printf("exited %d %d\n", (int)pid,
				       WEXITSTATUS(status));
			main_pid = 0;
			if (stop_job) {
				sink_release();
				fflush(stdout);
				goto out;
			}
			if (restart_job || sink_should_restart(status)) {
				/* at once: systemd's RestartSec= pause
				 * would only slow the tests */
				restart_job = false;
				main_pid = sink_start(argv + optind + 2,
						      argv[optind], &old_mask);
			} else {
				sink_release();
			}
			fflush(stdout);
		}
	}
out:
	if (main_pid > 0)
		kill(main_pid, SIGKILL);
	unlink(argv[optind]);
	return 0;
}
