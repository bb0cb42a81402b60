#include "socket_path.h"

#include <stdio.h>
#include <stdlib.h>
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
