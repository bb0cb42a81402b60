#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The systemd units and their companions, checked without a running
# systemd: systemd-analyze verify and security (exposure at most 3.0),
# sysusers.d and tmpfiles.d applied to a scratch root, the example config
# accepted and complete, journal priority prefixes, the reload's commands
# as systemd runs them (a file rmad refuses fails the reload), and a
# refused configuration shown by rmactl status.
. "$(dirname "$0")/lib.sh"

: "${RMAD_BIN:?}" "${SRCDIR:?}"
command -v systemd-analyze >/dev/null || skip "no systemd-analyze (apt-get install systemd)"
U=$SRCDIR/systemd

# verify: on a copy whose ExecStart names the built binary (verify wants
# it to exist); man pages are checked by the install test instead.
mkdir "$T/units"
sed -e "s|^ExecStart=/usr/sbin/rmad |ExecStart=$RMAD_BIN |" \
	-e "s|^ExecReload=/usr/sbin/rmad |ExecReload=$RMAD_BIN |" \
	"$U/rmad.service" >"$T/units/rmad.service"
grep -q "^ExecStart=$RMAD_BIN --config" "$T/units/rmad.service" ||
	fail "rmad.service: ExecStart not as expected"
cp "$U/rmad.socket" "$T/units/"
systemd-analyze verify --man=no "$T/units/rmad.socket" \
	"$T/units/rmad.service" >"$T/verify.out" 2>&1 ||
	fail "systemd-analyze verify: $(cat "$T/verify.out")"
# it also warns without failing (unknown keys, bad values): none allowed
[ ! -s "$T/verify.out" ] || fail "systemd-analyze verify: $(cat "$T/verify.out")"

grep -qx 'Type=notify' "$U/rmad.service" || fail "not Type=notify"
grep -qx 'NotifyAccess=main' "$U/rmad.service" || fail "no NotifyAccess=main"
grep -q '^WatchdogSec=' "$U/rmad.service" || fail "no WatchdogSec="
grep -qx 'ExecStart=/usr/sbin/rmad --config /etc/rmad/rmad.conf' \
	"$U/rmad.service" || fail "ExecStart"
# reload: the file checked first, as ExecStart names it, then SIGHUP
grep '^ExecReload=' "$U/rmad.service" >"$T/reload.lines"
[ "$(sed -n 1p "$T/reload.lines")" = \
	'ExecReload=/usr/sbin/rmad --config /etc/rmad/rmad.conf --check-config' ] ||
	fail "ExecReload: the first does not check ExecStart's file: $(cat "$T/reload.lines")"
[ "$(sed -n '$p' "$T/reload.lines")" = 'ExecReload=/bin/kill -HUP $MAINPID' ] ||
	fail "ExecReload: SIGHUP does not come last: $(cat "$T/reload.lines")"
grep -qx 'LimitMEMLOCK=infinity' "$U/rmad.service" || fail "LimitMEMLOCK"
# room for a cluster of peers: UCX tcp holds about 4 fds per peer
nofile=$(sed -n "s/^LimitNOFILE=\([0-9]*\)$/\1/p" "$U/rmad.service")
[ -n "$nofile" ] && [ "$nofile" -ge 16384 ] || fail "LimitNOFILE: '$nofile'"
grep -q '^RuntimeDirectory=' "$U/rmad.service" &&
	fail "RuntimeDirectory= would delete the activated socket on stop"
grep -qx 'ListenStream=/run/rmad/rmad.sock' "$U/rmad.socket" || fail "ListenStream"
grep -qx 'SocketMode=0660' "$U/rmad.socket" || fail "SocketMode"
grep -qx 'SocketGroup=rma' "$U/rmad.socket" || fail "SocketGroup"

# security: exposure at most 3.0, on the file as shipped
systemd-analyze security --offline=true "$U/rmad.service" >"$T/security.out" 2>&1 ||
	fail "systemd-analyze security: $(tail -5 "$T/security.out")"
score=$(sed -n 's/.*Overall exposure level for rmad.service: \([0-9.]*\).*/\1/p' \
	"$T/security.out")
[ -n "$score" ] || fail "no exposure score: $(tail -5 "$T/security.out")"
awk -v s="$score" 'BEGIN { exit !(s <= 3.0) }' ||
	fail "exposure $score > 3.0: $(grep '✗' "$T/security.out")"
echo "exposure $score"
# UCX's needs (DESIGN.md): these must stay open
for k in MemoryDenyWriteExecute=yes PrivateNetwork=yes PrivateDevices=yes; do
	grep -qx "$k" "$U/rmad.service" && fail "$k breaks UCX"
done
# every directive left open carries a comment saying why
for k in MemoryDenyWriteExecute PrivateNetwork PrivateDevices PrivateUsers \
	ProcSubset IPAddressDeny RestrictAddressFamilies; do
	awk -v k="^$k=" '$0 ~ k { exit !(prev ~ /^#/) } { prev = $0 }
		END { if (NR == 0) exit 1 }' "$U/rmad.service" ||
		fail "$k= has no comment saying why"
done

# sysusers and tmpfiles, applied to a scratch root
if command -v systemd-sysusers >/dev/null; then
	mkdir -p "$T/root/etc"
	systemd-sysusers --root="$T/root" "$U/sysusers.conf" >/dev/null 2>&1 ||
		fail "systemd-sysusers"
	grep -q '^rma:' "$T/root/etc/group" || fail "no group rma"
	grep -q '^rmad:' "$T/root/etc/passwd" || fail "no user rmad"
	gid=$(awk -F: '$1 == "rma" { print $3 }' "$T/root/etc/group")
	awk -F: -v g="$gid" '$1 == "rmad" && $4 == g { ok = 1 } END { exit !ok }' \
		"$T/root/etc/passwd" || fail "rmad's primary group is not rma"
	# Debian's system users have home /nonexistent, not /
	awk -F: '$1 == "rmad" && $6 == "/nonexistent" { ok = 1 } END { exit !ok }' \
		"$T/root/etc/passwd" ||
		fail "rmad's home: $(grep '^rmad:' "$T/root/etc/passwd")"
	if [ "$(id -u)" -eq 0 ] && command -v systemd-tmpfiles >/dev/null; then
		systemd-tmpfiles --root="$T/root" --create "$U/tmpfiles.conf" ||
			fail "systemd-tmpfiles"
		[ "$(stat -c %a "$T/root/run/rmad")" = 750 ] || fail "/run/rmad mode"
		[ "$(stat -c %g "$T/root/run/rmad")" = "$gid" ] || fail "/run/rmad group"
	fi
fi

# the example config: accepted, and it sets every option --help lists
"$SRCDIR/tests/with_sysusers.sh" "$SRCDIR" "$RMAD_BIN" --config "$U/rmad.conf.example" --check-config >"$T/check.out" 2>&1 ||
	fail "example config refused: $(cat "$T/check.out")"
"$RMAD_BIN" --help | sed -n 's/^  --\([a-z-]*\) .*/\1/p' | tr - _ |
	grep -vx -e config -e check_config -e ready_fd >"$T/options"
[ -s "$T/options" ] || fail "no options in rmad --help"
while read -r opt; do
	grep -q "^$opt =" "$U/rmad.conf.example" ||
		fail "example config does not cover $opt"
done <"$T/options"
# and a bad value is caught by --check-config
printf '[rmad]\nmetrics_listen = nowhere\n' >"$T/bad.conf"
if "$RMAD_BIN" --config "$T/bad.conf" --check-config >/dev/null 2>&1; then
	fail "bad metrics_listen accepted"
fi

# systemctl reload runs the ExecReload= lines in order, the first that
# fails fails the reload: run them so (the unit's paths pointed at this
# test's daemon and file) against a running rmad.
reload_unit() {
	local line
	while read -r line; do
		line=${line#ExecReload=}
		line=${line//\/usr\/sbin\/rmad/$RMAD_BIN}
		line=${line//\/etc\/rmad\/rmad.conf/$T/reload.conf}
		line=${line//\$MAINPID/$reload_PID}
		# word splitting as systemd's (no quotes in these lines)
		$line >/dev/null 2>>"$T/reload-unit.err" || return 1
	done <"$T/reload.lines"
}
printf '[rmad]\nmax_regions = 100\n' >"$T/reload.conf"
start_daemon reload --config "$T/reload.conf"
printf '[rmad]\nmax_regions = 5\nmax_regoins = 5\n' >"$T/reload.conf"
reload_unit && fail "systemctl reload would succeed for a file rmad refuses"
grep -q "unknown option 'max_regoins'" "$T/reload-unit.err" ||
	fail "the refused reload does not say why: $(cat "$T/reload-unit.err")"
grep -q 'SIGHUP' "$T/reload.log" && fail "a refused file was sent to rmad"
kill -0 "$reload_PID" || fail "rmad gone after a refused reload"
printf '[rmad]\nmax_regions = 5\n' >"$T/reload.conf"
reload_unit || fail "reload of a good file failed: $(cat "$T/reload-unit.err")"
wait_until 10 grep -q 'config_reload: max_regions: 100 -> 5' "$T/reload.log" ||
	fail "rmad did not reload: $(cat "$T/reload.log")"

# A take-over given an address this host lacks runs on its predecessor's
# configuration; rmactl status and status --json say what was refused.
start_daemon lg
mkfifo "$T/lg2.ready"
"$RMAD_BIN" --socket "$T/lg.sock" --listen "127.0.0.1:$lg_PORT" --ready-fd 3 \
	--take-over --listen 192.0.2.1:13337 3>"$T/lg2.ready" 2>"$T/lg2.log" &
PIDS+=("$!")
timeout 20 head -c 6 "$T/lg2.ready" >/dev/null ||
	fail "the take-over did not come up: $(cat "$T/lg2.log")"
"$RMACTL_BIN" --socket "$T/lg.sock" status >"$T/lg.status" ||
	fail "rmactl status after the take-over"
grep -q '^config *REFUSED.*listen: 192\.0\.2\.1 is not an address of this host' \
	"$T/lg.status" || fail "rmactl status: $(cat "$T/lg.status")"
"$RMACTL_BIN" --socket "$T/lg.sock" status --json >"$T/lg.json" ||
	fail "rmactl status --json after the take-over"
json_ok "$T/lg.json"
grep -q '"config_refused": *"listen: 192\.0\.2\.1 is not' "$T/lg.json" ||
	fail "rmactl status --json: no config_refused: $(head -c 600 "$T/lg.json")"

# logs: <N> priorities only when stderr is the journal stream
: >"$T/journal.log"
JOURNAL_STREAM=$(stat -c '%d:%i' "$T/journal.log") \
	"$RMAD_BIN" --socket "$T/no/such/dir.sock" --listen 127.0.0.1:0 \
	2>>"$T/journal.log" && fail "rmad started on a bad socket path"
grep -q '^<3>server_start: bind ' "$T/journal.log" ||
	fail "no <3> prefix for the journal: $(cat "$T/journal.log")"
grep -q '^<6>' "$T/journal.log" || fail "no <6> prefix: $(cat "$T/journal.log")"
JOURNAL_STREAM=1:1 "$RMAD_BIN" --socket "$T/no/such/dir.sock" \
	--listen 127.0.0.1:0 2>"$T/plain.log" && fail "rmad started"
grep -q '^<' "$T/plain.log" && fail "<N> prefix on a stream that is not the journal"
grep -q ' rmad error: server_start: bind ' "$T/plain.log" ||
	fail "plain log: $(cat "$T/plain.log")"
# a configuration refused at start, at error priority (journalctl -p err)
printf '[rmad]\nlisen = 127.0.0.1:1\n' >"$T/typo.conf"
: >"$T/journal2.log"
rc=0
JOURNAL_STREAM=$(stat -c '%d:%i' "$T/journal2.log") \
	"$RMAD_BIN" --config "$T/typo.conf" 2>>"$T/journal2.log" || rc=$?
[ "$rc" -eq 78 ] || fail "a typo with nothing to keep exits $rc, not 78"
grep -q "^<3>rmad: .*unknown option 'lisen'" "$T/journal2.log" ||
	fail "refused configuration not at error priority: $(cat "$T/journal2.log")"
# and a flag it does not know (EX_USAGE), said by rmad, not getopt
: >"$T/journal3.log"
rc=0
JOURNAL_STREAM=$(stat -c '%d:%i' "$T/journal3.log") \
	"$RMAD_BIN" --lisen 127.0.0.1:1 2>>"$T/journal3.log" || rc=$?
[ "$rc" -eq 64 ] || fail "an unknown flag exits $rc, not 64"
grep -q "^<3>rmad: unknown option '--lisen'" "$T/journal3.log" ||
	fail "unknown flag not at error priority: $(cat "$T/journal3.log")"
grep -qv '^<3>' "$T/journal3.log" &&
	fail "a line not at error priority: $(cat "$T/journal3.log")"
echo ok
