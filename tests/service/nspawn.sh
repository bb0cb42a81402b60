#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# rmad under a real systemd: this machine's own /usr booted in a container
# (systemd-nspawn --volatile=yes: a tmpfs root, the host's /usr read-only,
# an empty /etc that systemd fills at first boot), the build installed
# into it with meson install --destdir (laid over /usr), no network but
# the container's own loopback.
#   (e) Socket activation: rmad.socket listens, the first client's
#       connect starts rmad.service.
# A region exposed by `rmactl expose` must then keep its bytes, its owner
# (re-attached) and the daemon's identity through
#   (a) systemctl restart, and kill -9 of the main PID;
#   (d) a watchdog timeout (rmad SIGSTOPped);
#   (c) systemctl reload of a file rmad refuses, which must be reported
#       as a failed reload (a good file reloads);
#   (b) a typo, then an address not on this host, in rmad.conf at
#       systemctl restart (the last good configuration), rmad saying so
#       at error priority, in systemctl status (STATUS=) and in rmactl
#       status until a reload of the good file;
# and systemctl stop must release them. Each stage writes new bytes into
# the region from a second rmad (another daemon's view of the old
# descriptor) and reads them back through both daemons after the next;
# at the end the owner's own mapping holds the last bytes written.
# Skips (77) where no container can be booted here.
. "$(dirname "$0")/lib.sh"

: "${MESON:?}" "${BUILDDIR:?}"

[ "$(id -u)" -eq 0 ] || skip "not root: systemd-nspawn needs root"
command -v systemd-nspawn >/dev/null ||
	skip "no systemd-nspawn (apt-get install systemd-container)"
command -v nsenter >/dev/null || skip "no nsenter (util-linux)"
[ -x /usr/lib/systemd/systemd ] || skip "no systemd in this machine's /usr"
# --volatile=yes keeps only /usr of the host: /bin, /lib must point there.
{ [ "$(readlink -f /bin)" = /usr/bin ] && [ "$(readlink -f /lib)" = /usr/lib ]; } ||
	skip "/usr is not merged here: --volatile=yes cannot boot this root"

SIZE=65536
SHARE=/srv/rmad-test # $T/share in the container
RMAD_SOCK=/run/rmad/rmad.sock
PEER_SOCK=/run/rmad-peer/rmad.sock
LISTEN=127.0.0.1:13337 # the example config's, in the container's network
NSPAWN=
LEADER=
FAILED=()

# Halts the container (SIGTERM to nspawn is a clean poweroff), then kills
# what is left: its PID 1 takes its whole PID namespace along.
stop_container() {
	[ -n "$NSPAWN" ] || return 0
	kill -TERM "$NSPAWN" 2>/dev/null || true
	timeout 30 tail -s 0.1 --pid="$NSPAWN" -f /dev/null || true
	[ -z "$LEADER" ] || kill -KILL "$LEADER" 2>/dev/null || true
	kill -KILL "$NSPAWN" 2>/dev/null || true
	wait "$NSPAWN" 2>/dev/null || true
	NSPAWN=
}
# RMAD_NSPAWN_JOURNAL=FILE keeps the container's journal there.
trap '[ -z "${RMAD_NSPAWN_JOURNAL:-}" ] || [ -z "$LEADER" ] ||
	in_ct journalctl -q --no-pager -o short-monotonic >"$RMAD_NSPAWN_JOURNAL"
	stop_container; cleanup' EXIT

# soft_fail MESSAGE: a check that fails while the others still run; the
# test fails at the end.
soft_fail() {
	echo "FAIL: $*" >&2
	FAILED+=("$*")
}

# ---- install, boot -------------------------------------------------------

D=$T/dest
"$MESON" install -C "$BUILDDIR" --no-rebuild --quiet --destdir "$D" \
	>"$T/install.log" 2>&1 || fail "meson install: $(cat "$T/install.log")"
unit=$(find "$D" -path '*/systemd/system/rmad.service' | head -n 1)
[ -n "$unit" ] || fail "no rmad.service installed"
rmad=$(find "$D" -path '*/sbin/rmad' | head -n 1)
rmactl=$(find "$D" -path '*/bin/rmactl' | head -n 1)
# LeakSanitizer stops the world with ptrace, which the unit's
# SystemCallFilter= refuses: rmad would fail at every exit.
readelf -d "$rmad" | grep -q 'NEEDED.*lib[a-z]*san' &&
	skip "a sanitized rmad under the unit's SystemCallFilter: run this suite on the plain build"
RMAD=${rmad#"$D"}
RMACTL=${rmactl#"$D"}
CONF=$(sed -n 's/^ExecStart=.* --config \([^ ]*\).*/\1/p' "$unit")
[ -f "$D$CONF" ] || fail "the unit's config $CONF is not installed"
cp "$D$CONF" "$T/good.conf"

# /etc starts empty, and at first boot systemd enables what the presets
# say: rmad.socket only (rmad.service is for the first client to start),
# and none of this machine's other services.
mkdir -p "$T/preset" "$T/share" "$T/usr.upper"
printf 'enable rmad.socket\ndisable *\n' >"$T/preset/00-rmad-test.preset"
# /usr of the destdir lies over the machine's (writes go to a scratch
# upper directory); what it installs elsewhere (/etc/rmad with a /usr
# prefix) is bound in entry by entry, writable (this test's own copy).
dest_binds=()
[ -d "$D/usr" ] && dest_binds+=("--overlay=/usr:$D/usr:$T/usr.upper:/usr")
for e in "$D"/*/*; do
	case $e in "$D"/usr/*) continue ;; esac
	[ -e "$e" ] && dest_binds+=("--bind=$e:${e#"$D"}")
done
# This machine's library path, for ldconfig after the install.
ld_binds=()
for e in /etc/ld.so.conf /etc/ld.so.conf.d; do
	[ -e "$e" ] && ld_binds+=("--bind-ro=$e")
done

systemd-nspawn --quiet --boot --volatile=yes --directory=/ \
	--machine="rmad-test-$$" --register=no --keep-unit --private-network \
	--console=read-only \
	--bind-ro="$T/preset:/etc/systemd/system-preset" \
	--bind="$T/share:$SHARE" "${dest_binds[@]}" "${ld_binds[@]}" \
	systemd.firstboot=off >"$T/boot.log" 2>&1 </dev/null &
NSPAWN=$!
boot_started=$SECONDS

# The container's PID 1 is nspawn's child once it runs systemd.
find_leader() {
	LEADER=$(pgrep -P "$NSPAWN" -x systemd) || return 1
}
nspawn_gone() {
	! kill -0 "$NSPAWN" 2>/dev/null
}
leader_or_gone() {
	find_leader || nspawn_gone
}
wait_until 60 leader_or_gone || fail "nspawn started no systemd in 60 s: $(cat "$T/boot.log")"
[ -n "$LEADER" ] || skip "systemd-nspawn cannot boot this machine's root here (under systemd: no cgroup delegated? try systemd-run -p Delegate=yes --pty): $(tail -n 20 "$T/boot.log")"

# in_ct COMMAND...: runs COMMAND in the container (all its namespaces, a
# clean environment), bounded.
in_ct() {
	timeout 120 nsenter -t "$LEADER" -a -r -w \
		env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin \
		"$@"
}
booted() {
	local s
	s=$(in_ct systemctl is-system-running 2>/dev/null) || true
	case $s in running | degraded) return 0 ;; esac
	nspawn_gone
}
wait_until 120 booted || fail "container not up in 120 s: $(tail -n 30 "$T/boot.log")"
nspawn_gone && skip "the container's systemd did not come up here: $(tail -n 20 "$T/boot.log")"
echo "booted $(in_ct systemctl --version | head -n 1) in $((SECONDS - boot_started)) s"
# nspawn lays a boot id of the container's own over the kernel's; a
# process with a /proc of its own (rmad.service: ProtectKernelTunables=,
# ProtectProc=) reads the kernel's, and UCX refuses loopback (tcp/lo:
# Destination is unreachable) between processes of different boot ids.
# Everyone reads the kernel's, as on a host.
if in_ct findmnt /proc/sys/kernel/random/boot_id >/dev/null; then
	in_ct umount /proc/sys/kernel/random/boot_id ||
		fail "cannot uncover the kernel's boot id in the container"
fi
# librma where the prefix put it, known to the loader as a package's
# postinst would make it (meson install --destdir runs no ldconfig).
in_ct ldconfig || fail "ldconfig in the container"
if [ "$(in_ct systemctl is-system-running)" != running ]; then
	echo "degraded: $(in_ct systemctl --failed --no-legend --plain | tr '\n' ' ')"
fi

# ---- helpers on the container's units and rmad ---------------------------

prop() { # UNIT PROPERTY
	in_ct systemctl show -P "$2" "$1"
}
rmactl() {
	in_ct "$RMACTL" "$@"
}
journal_cursor() {
	in_ct journalctl -q -n 0 --show-cursor | sed -n 's/^-- cursor: //p'
}
journal_since() { # CURSOR [JOURNALCTL ARGS...]
	local c=$1
	shift
	in_ct journalctl -q --no-pager --after-cursor="$c" "$@"
}
# rmad_up: the service active (READY=1 came) and running.
rmad_up() {
	[ "$(prop rmad.service ActiveState)/$(prop rmad.service SubState)" = active/running ]
}
# rmad_back OLD-PID: a new main process, up.
rmad_back() {
	[ "$(prop rmad.service MainPID)" != "$1" ] && rmad_up
}
# rmad_settled: no job for rmad.service (the restart done, no automatic
# restart pending) and a state it stays in.
rmad_settled() {
	[ -z "$(in_ct systemctl list-jobs --no-legend rmad.service)" ] &&
		case $(prop rmad.service ActiveState) in
		active | failed | inactive) true ;;
		*) false ;;
		esac
}
# The daemon line of `rmactl status`: "daemon  ID (pid N, version V)".
daemon_id() {
	rmactl --socket "$RMAD_SOCK" status | sed -n 's/^daemon *\([0-9a-f]*\) .*/\1/p'
}
# check_region STAGE: the bytes last written (expect) come back through
# rmad itself and through the second daemon, by the descriptor from
# before; the owner still serves; then new bytes go in from the second
# daemon for the next stage.
check_region() {
	local stage=$1 via
	for via in "$RMAD_SOCK" "$PEER_SOCK"; do
		rm -f "$T/share/got"
		rmactl --socket "$via" get --peer "$LISTEN" \
			--descriptor "$SHARE/desc" --length "$SIZE" \
			--out "$SHARE/got" --timeout 10 >"$T/get.out" 2>&1 ||
			fail "$stage: get through $via: $(cat "$T/get.out")"
		cmp -s "$T/share/got" "$T/share/expect" ||
			fail "$stage: the region's bytes through $via differ from the ones written before"
	done
	[ "$(prop rmad-test-owner.service ActiveState)" = active ] ||
		fail "$stage: the region's owner stopped: $(journal_since "$BOOT_CURSOR" -u rmad-test-owner | tail -n 5)"
	head -c "$SIZE" /dev/urandom >"$T/share/next"
	rmactl --socket "$PEER_SOCK" put --peer "$LISTEN" \
		--descriptor "$SHARE/desc" --timeout 10 "$SHARE/next" >"$T/put.out" 2>&1 ||
		fail "$stage: put from the second daemon: $(cat "$T/put.out")"
	mv "$T/share/next" "$T/share/expect"
	echo "$stage: region kept (at ${SECONDS} s)"
}
# same_daemon STAGE OLD-PID: a new process under the same identity, which
# recovered the region from the store and whose owner came back for it
# (rmactl status: "restarts  N kept (regions recovered 1, re-attached 1,
# orphans now 0)").
same_daemon() {
	local stage=$1 old=$2 pid id
	pid=$(prop rmad.service MainPID)
	[ "$pid" != "$old" ] || fail "$stage: rmad not restarted (main PID $pid)"
	id=$(daemon_id) || fail "$stage: no status"
	[ "$id" = "$ID" ] || fail "$stage: identity $id, was $ID"
	wait_until 30 owner_back ||
		fail "$stage: the owner did not re-attach in 30 s: $(rmactl --socket "$RMAD_SOCK" status | grep '^restarts')"
}
owner_back() {
	rmactl --socket "$RMAD_SOCK" status |
		grep -q '^restarts .*(regions recovered 1, re-attached 1, orphans now 0)$'
}
BOOT_CURSOR=$(journal_cursor)
in_ct getent passwd rmad >/dev/null || fail "no user rmad after boot (sysusers.d)"

# ---- (e) socket activation -----------------------------------------------

[ "$(prop rmad.socket ActiveState)" = active ] ||
	fail "rmad.socket not listening after boot: $(journal_since "$BOOT_CURSOR" -u rmad.socket)"
[ "$(prop rmad.service ActiveState)" = inactive ] ||
	fail "rmad.service is $(prop rmad.service ActiveState) before any client"
rmactl --socket "$RMAD_SOCK" status >"$T/status.out" 2>&1 ||
	fail "the first client: $(cat "$T/status.out") $(journal_since "$BOOT_CURSOR" -u rmad)"
grep -q '^daemon ' "$T/status.out" || fail "status: $(cat "$T/status.out")"
rmad_up || fail "rmad.service $(prop rmad.service ActiveState) after the first client"
ID=$(daemon_id)
[ -n "$ID" ] || fail "no daemon id in status"
echo "socket activation: the first client started rmad $ID"

# ---- the region, its owner and a second daemon ---------------------------

# The second daemon runs as rmad too: rmad takes UCX connections from a
# local socket only of its own user or root (daemon/guard.c), so a root
# one would refuse the lanes rmad.service dials to it.
in_ct systemd-run --quiet --unit=rmad-test-peer -p User=rmad -p Group=rma \
	-p RuntimeDirectory=rmad-peer "$RMAD" \
	--socket "$PEER_SOCK" --listen 127.0.0.1:13338 --fd-store no ||
	fail "systemd-run the second rmad"
rmactl --socket "$PEER_SOCK" wait --timeout 30 >/dev/null ||
	fail "second rmad: $(journal_since "$BOOT_CURSOR" -u rmad-test-peer)"
head -c "$SIZE" /dev/urandom >"$T/share/expect"
in_ct systemd-run --quiet --unit=rmad-test-owner "$RMACTL" \
	--socket "$RMAD_SOCK" expose --size "$SIZE" --fill "$SHARE/expect" \
	--descriptor-out "$SHARE/desc" --dump-on-exit "$SHARE/dump" ||
	fail "systemd-run rmactl expose"
wait_until 30 test -s "$T/share/desc" ||
	fail "no descriptor from rmactl expose: $(journal_since "$BOOT_CURSOR" -u rmad-test-owner)"
check_region "exposed"

# ---- (a) systemctl restart; kill -9 --------------------------------------

pid=$(prop rmad.service MainPID)
in_ct systemctl restart rmad || fail "systemctl restart rmad: $(journal_since "$BOOT_CURSOR" -u rmad | tail -n 20)"
rmad_up || fail "restart: rmad.service $(prop rmad.service ActiveState)"
same_daemon restart "$pid"
check_region "systemctl restart"

pid=$(prop rmad.service MainPID)
n=$(prop rmad.service NRestarts)
in_ct kill -KILL "$pid"
wait_until 60 rmad_back "$pid" ||
	fail "kill -9: rmad not back in 60 s: $(journal_since "$BOOT_CURSOR" -u rmad | tail -n 20)"
same_daemon "kill -9" "$pid"
[ "$(prop rmad.service NRestarts)" -eq $((n + 1)) ] ||
	fail "kill -9: NRestarts $(prop rmad.service NRestarts), was $n"
check_region "kill -9"

# ---- (d) the watchdog ----------------------------------------------------

pid=$(prop rmad.service MainPID)
n=$(prop rmad.service NRestarts)
cursor=$(journal_cursor)
in_ct kill -STOP "$pid"
# The watchdog fires after WatchdogSec (30 s), its SIGABRT (with SIGCONT)
# ends the stopped process; then Restart=on-failure.
wait_until 150 rmad_back "$pid" ||
	fail "watchdog: rmad not restarted in 150 s: $(journal_since "$cursor" -u rmad | tail -n 20)"
# (grep reads it all: grep -q leaving early would fail the pipe under pipefail)
journal_since "$cursor" -u rmad | grep -c "rmad.service: Failed with result 'watchdog'" >/dev/null ||
	fail "watchdog: restarted, but not by the watchdog: $(journal_since "$cursor" -u rmad | tail -n 20)"
same_daemon watchdog "$pid"
[ "$(prop rmad.service NRestarts)" -eq $((n + 1)) ] ||
	fail "watchdog: NRestarts $(prop rmad.service NRestarts), was $n"
check_region "watchdog (SIGSTOP)"

# ---- (c) systemctl reload ------------------------------------------------

# put_conf FILE: the unit's rmad.conf in the container becomes FILE.
put_conf() {
	cat "$1" >"/proc/$LEADER/root$CONF" || fail "write $CONF in the container"
}
# A typo: a key misspelled (rmad refuses unknown keys).
sed 's/^listen = /lisen = /' "$T/good.conf" >"$T/share/typo.conf"
grep -q '^lisen = ' "$T/share/typo.conf" || fail "no listen line in $CONF"
rc=0
in_ct "$RMAD" --config "$SHARE/typo.conf" --check-config >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 78 ] || fail "rmad --check-config of a typo exited $rc, not 78"

pid=$(prop rmad.service MainPID)
in_ct systemctl reload rmad || fail "systemctl reload of the good file failed"
{ [ "$(prop rmad.service MainPID)" = "$pid" ] && rmad_up; } ||
	fail "reload of the good file: rmad $(prop rmad.service ActiveState), pid $(prop rmad.service MainPID) (was $pid)"
put_conf "$T/share/typo.conf"
if in_ct systemctl reload rmad >"$T/reload.out" 2>&1; then
	soft_fail "reload of a refused file (a typo) reported success (ExecReload must check the file first)"
fi
{ [ "$(prop rmad.service MainPID)" = "$pid" ] && rmad_up; } ||
	fail "reload of a bad file: rmad $(prop rmad.service ActiveState), pid $(prop rmad.service MainPID) (was $pid)"
put_conf "$T/good.conf"
[ "$(daemon_id)" = "$ID" ] || fail "reload: identity changed"
check_region "reload"

# ---- (b) a bad rmad.conf at systemctl restart ----------------------------

# bad_restart STAGE FILE: systemctl restart with FILE in place must bring
# rmad back on the last good configuration, same identity and regions,
# saying at error priority what it refused. Returns 1 when the regions
# are lost (the stages after it cannot run).
bad_restart() {
	local stage=$1 file=$2 cursor pid state
	cursor=$(journal_cursor)
	pid=$(prop rmad.service MainPID)
	put_conf "$file"
	in_ct systemctl restart rmad >"$T/restart.out" 2>&1 || true
	wait_until 60 rmad_settled ||
		fail "$stage: rmad.service did not settle in 60 s"
	put_conf "$T/good.conf"
	state=$(prop rmad.service ActiveState)
	if [ "$state" != active ]; then
		soft_fail "$stage at restart: rmad.service $state, the fd store released, regions and identity lost (needs the last good configuration): $(journal_since "$cursor" -u rmad | awk '/Starting rmad.service/ { s = 1 } s && / rmad\[/ { print; exit }') / $(journal_since "$cursor" -u rmad | tail -n 1)"
		in_ct systemctl reset-failed rmad.service || true
		in_ct systemctl start rmad.service || fail "$stage: rmad does not start on the good file again"
		return 1
	fi
	same_daemon "$stage" "$pid"
	journal_since "$cursor" -u rmad -p err -o verbose |
		grep -q '^ *SYSLOG_IDENTIFIER=rmad$' ||
		soft_fail "$stage: rmad said nothing at error priority about the file it refused"
	wait_until 20 status_refused ||
		soft_fail "$stage: systemctl status does not say the file was refused (StatusText: $(prop rmad.service StatusText))"
	rmactl --socket "$RMAD_SOCK" status | grep -c '^config  *REFUSED' >/dev/null ||
		soft_fail "$stage: rmactl status does not say the file was refused"
	check_region "$stage at restart"
	# The good file back, a reload applies it: nothing refused any more.
	in_ct systemctl reload rmad || fail "$stage: reload of the good file"
	wait_until 20 status_accepted ||
		soft_fail "$stage: still CONFIG REFUSED after a reload of the good file"
}
# status_refused: rmad's sd_notify STATUS= (systemctl status) says it runs
# on the last good configuration.
status_refused() {
	case $(prop rmad.service StatusText) in "CONFIG REFUSED"*) true ;; *) false ;; esac
}
status_accepted() {
	! status_refused
}
sed 's/^listen = .*/listen = 10.1.0.5:13337/' "$T/good.conf" >"$T/share/noaddr.conf"
if bad_restart "typo" "$T/share/typo.conf"; then
	bad_restart "address not on this host" "$T/share/noaddr.conf" || true
else
	echo "address not on this host: not checked, the regions were lost at the typo"
fi

# ---- the owner's view; systemctl stop releases the store -----------------

if [ "$(daemon_id)" = "$ID" ]; then
	in_ct systemctl stop rmad-test-owner || fail "stop the owner"
	cmp -s "$T/share/dump" "$T/share/expect" ||
		fail "the owner's own mapping differs from the bytes the second daemon wrote"
	echo "owner: its mapping holds the last bytes written"
fi
in_ct systemctl stop rmad 2>"$T/stop.out" || fail "systemctl stop rmad: $(cat "$T/stop.out")"
rmactl --socket "$RMAD_SOCK" status >/dev/null 2>&1 || fail "the socket does not start rmad again after stop"
[ "$(daemon_id)" != "$ID" ] || fail "systemctl stop kept the identity (the store was not released)"
echo "stop: the store released (new identity)"

echo "took ${SECONDS} s"
if [ ${#FAILED[@]} -gt 0 ]; then
	printf 'FAILED: %s\n' "${FAILED[@]}" >&2
	exit 1
fi
echo ok
