#include "socket_path.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int
socket_path_default(char *buf, size_t len)
{
	const char *env;
	int n;

	env = getenv("RMAD_SOCKET");
	if (env != NULL && env[0] != '\0') {
		n = snprintf(buf, len, "%s", env);
	} else {
		env = getenv("XDG_RUNTIME_DIR");
		if (env != NULL && env[0] != '\0')
			n = snprintf(buf, len, "%s/rmad.sock", env);
		else
			n = snprintf(buf, len, "/tmp/rmad-%u.sock",
				     (unsigned)getuid());
	}
	if (n < 0 || (size_t)n >= len)
		return -1;
	return 0;
}

int
socket_path_client(char *buf, size_t len)
{
	const char *env = getenv("RMAD_SOCKET");
	struct stat st;

	if (socket_path_default(buf, len) < 0)
		return -1;
	/* A daemon of the user's own comes first, then the system service. */
	if ((env == NULL || env[0] == '\0') && stat(buf, &st) < 0 &&
	    stat(SOCKET_PATH_SYSTEM, &st) == 0 && S_ISSOCK(st.st_mode))
		snprintf(buf, len, "%s", SOCKET_PATH_SYSTEM);
	return 0;
}
