# SPDX-License-Identifier: BSD-2-Clause
# Shared by the package tests: the service tests' helpers (a temp dir
# cleaned on exit, fail, skip, daemons), and what the README says a host
# needs at run time.
. "$(dirname "${BASH_SOURCE[0]}")/../service/lib.sh"

# readme_runtime_packages README: the packages of the README's runtime
# apt-get line (from "# the runtime libraries" to the first line that
# does not end in a backslash), one a line, sorted.
readme_runtime_packages() {
	sed -n '/^# the runtime libraries/,/[^\\]$/p' "$1" | grep -v '^#' |
		tr ' \\' '\n\n' | grep -E '^[a-z0-9][a-z0-9.+-]+$' |
		grep -vx -e apt-get -e install | sort -u
}
