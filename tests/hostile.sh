#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# A hostile peer against real daemons, one attack class per victim daemon
# (tests/adversary/hostile_peer.c; issue 10). For each class: daemon A
# holds a victim region filled with a known pattern (rmactl expose),
# daemon B is a legitimate peer. (epochs: a put over a connection that a
# newer one from the same origin replaced must not land, and the newer
# one's must. retire: the same for a connection of another lane below a
# newer one's retire mark, while one that dialed another address stays;
# then a connection with a floor, a successor's, closes both that one and
# the mark's.
# spoof: each malformed hello on a connection of its own must not get
# that connection served, while a true hello sent the same way is.)
# After the attack, A must be alive, its
# resident memory (sampled during the attack) must have grown by less
# than 64 MiB (not under ASan), the victim's bytes must be unchanged when
# read through B, a put and a get from B must still work, and SIGTERM
# must end A with status 0. An attack need not "succeed": only the
# daemon's behaviour is judged.
#
# uct-raw (tests/adversary/raw_uct.c): A allows only 127.0.0.1/32, and
# plain tcp from 127.0.0.2 in UCX's own framing must be closed at accept
# and counted (rmactl status, "ucx sockets"): at A's UCX tcp sockets, 300
# connections with a put naming A's region by address and one with a
# fragment longer than UCX's buffer; at the listener's port (UCX's
# sockcm), a bad private data header. uct-raw-reload: the same after
# SIGHUP narrowed A's peer_allow from 127.0.0.0/8 (UCX's accept must take
# the new list). uct-raw-inside, not run by default, sends the same from
# 127.0.0.1, inside peer_allow, as root: with UCX 1.13 it FAILS (the put
# lands in the victim region, the long fragment aborts A): root and
# rmad's own uid can write rmad's memory anyway, and the guard lets them
# (the README's Security section).
#
# uct-raw-uid (issue 23): A with the default peer_allow; raw_uct runs as
# uid 65534 (setpriv; it can read neither A's maps nor which ports are
# A's, so it is told) from 127.0.0.1 against every UCX port of A, the
# listener's included: the put into the victim region, the put to
# 0x10000 that kills a daemon that lets it in, the oracle (the put's
# headers, then its data), and at the listener's port the bad sockcm
# header. Every connection must be closed at accept (UCX's sockets are
# served from a local address only to a socket of rmad's uid or root,
# which the kernel tells through inet_diag) and counted. Then the put
# from connections closed at once (orphaned sockets, which the kernel
# reports as root's): refused too, and counted.
#
# HOSTILE_CLASSES picks classes (default: all but uct-raw-inside); every
# class is run even when an earlier one failed, and the failures are
# listed at the end. Every wait has a deadline.
set -uo pipefail

RMAD=${RMAD_BIN:?}
RMACTL=${RMACTL_BIN:?}
HOSTILE=${HOSTILE_PEER:?}
RAW_UCT=${RAW_UCT:?}
CLASSES=${HOSTILE_CLASSES:-high-ids rndv resolve-flood get-flood batch-amp silent-conns spoof walkaround epochs retire uct-raw uct-raw-reload uct-raw-uid reflect}
RSS_LIMIT_KIB=$((64 * 1024))
T=$(mktemp -d /tmp/rmad-hostile.XXXXXX)
PIDS=()

export UCX_WARN_UNUSED_ENV_VARS=n

. "$(dirname "$0")/lib.sh"
trap 'lib_cleanup KILL' EXIT
trap "exit 1" TERM INT HUP

# ASan inflates and delays RSS: the memory check is off under it.
ASAN=0
if ldd "$RMAD" 2>/dev/null | grep -q libasan || [ -n "${ASAN_OPTIONS:-}" ]; then
	ASAN=1
fi

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
# The peak since the last peak_reset: the kernel keeps it (VmHWM), so
# nothing has to sample the daemon while the attack runs.
peak_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
peak_reset() { echo 5 >"/proc/$1/clear_refs"; }
alive() { kill -0 "$1" 2>/dev/null && [ "$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null)" != Z ]; }

start_daemon() { # dir name [rmad flags]; sets DPID and DPORT
	local dir=$1 name=$2 port
	shift 2
	port=$(free_port)
	mkfifo "$dir/$name.ready"
	# 1024 descriptors, soft and hard: rmad cannot raise it, and caps
	# inbound peers to what fits (systemd's default soft limit is 1024)
	(ulimit -n 1024 && exec "$RMAD" --socket "$dir/$name.sock" \
		--listen "127.0.0.1:$port" --ready-fd 3 --log-level warn \
		--connect-timeout 2 --op-timeout 5 "$@") \
		3>"$dir/$name.ready" >"$dir/$name.log" 2>&1 &
	DPID=$!
	PIDS+=($DPID)
	DPORT=$port
	timeout 10 head -c 6 "$dir/$name.ready" >/dev/null
}

# Ends pid with SIGTERM; 0 when it exited with status 0 within 10 s.
stop_daemon() {
	local pid=$1 rc=0 deadline=$((SECONDS + 10))
	kill -TERM "$pid" 2>/dev/null || return 1
	while alive "$pid" && [ $SECONDS -lt $deadline ]; do
		sleep 0.05 # poll interval; bounded by the deadline above
	done
	if alive "$pid"; then
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		return 1
	fi
	wait "$pid" || rc=$?
	return $rc
}

# Connections refused at accept on A's UCX sockets (rmactl status).
ucx_refused() { "$RMACTL" --socket "$1" status 2>/dev/null | awk '/ucx sockets/ {print $3}'; }
ucx_refused_at_least() { [ "$(ucx_refused "$1")" -ge "$2" ] 2>/dev/null; }

# Two of daemon A's counters from rmactl status: gets served for other
# daemons, peers cut off for not reading their answers.
served_gets() {
	"$RMACTL" --socket "$1" status 2>/dev/null | awk '$1 == "served" {gsub(",", ""); print $5}'
}
cut_off() { # the number before "cut off" ("peers N messages dropped, M cut off, ...")
	"$RMACTL" --socket "$1" status 2>/dev/null |
		awk '$1 == "peers" { for (i = 2; i < NF; i++) if ($(i + 1) == "cut") print $i }'
}
# batch-amp is over once A took every get the attacker sent, or cut it off.
batch_amp_done() { # socket gets-wanted cut-off-before
	local gets cut
	gets=$(served_gets "$1")
	cut=$(cut_off "$1")
	[ "${gets:-0}" -ge "$2" ] || [ "${cut:-0}" -gt "$3" ]
}

# batch-amp: the attacker leaves A's answers unread until A has taken
# every get it sent (its counters say so), told through a fifo on the
# attacker's standard input; then it sends one batch over the size.
run_batch_amp() { # dir port extra-args...
	local dir=$1 port=$2 gets0 cut0 want pid rc=0
	shift 2
	gets0=$(served_gets "$dir/a.sock")
	cut0=$(cut_off "$dir/a.sock")
	mkfifo "$dir/release"
	# (90 s at most, for a sanitized daemon on a loaded machine: 30 s
	# was once 96% of the gets)
	timeout 300 "$HOSTILE" --connect "127.0.0.1:$port" --attack batch-amp \
		--seconds 90 "$@" <"$dir/release" >"$dir/hostile.out" 2>"$dir/hostile.err" &
	pid=$!
	exec 9>"$dir/release"
	if wait_until 90 grep -q 'batch-amp: holding' "$dir/hostile.out"; then
		want=$(sed -n 's/.*batch-amp: holding, \([0-9]*\) gets sent.*/\1/p' "$dir/hostile.out")
		wait_until 90 batch_amp_done "$dir/a.sock" $((gets0 + want)) "${cut0:-0}" ||
			why+=("A took $(($(served_gets "$dir/a.sock") - gets0)) of $want gets in 90 s")
	else
		why+=("the attacker never held its answers")
	fi
	exec 9>&-
	wait "$pid" || rc=$?
	return $rc
}

# reflect (issue 23): A and B hold one cluster key, the attacker none.
# It listens; A's client asks A to connect to it (any client may). With
# A's hello the attacker tries B (relayed), A with another id (A's own
# nonce), A itself (reflected: each challenge and proof handed to the
# other side), and A with A's own id. Every one must be refused at the
# hello with status 19 (ERR_PERMISSION), and no RESOLVE served. A hello
# of daemon protocol 2 must be answered ERR_VERSION (3).
run_reflect() { # dir aport bport
	local dir=$1 aport=$2 bport=$3 mport pid wpid rc=0 what
	mport=$(free_port)
	timeout 60 "$HOSTILE" --connect "127.0.0.1:$aport" --listen "127.0.0.1:$mport" \
		--relay "127.0.0.1:$bport" \
		--attack reflect --seconds 20 --descriptor "$dir/desc" \
		>"$dir/hostile.out" 2>"$dir/hostile.err" &
	pid=$!
	if wait_until 20 grep -q 'reflect: listening' "$dir/hostile.out"; then
		timeout 30 "$RMACTL" --socket "$dir/a.sock" wait --peer "127.0.0.1:$mport" \
			--timeout 25 >"$dir/wait.out" 2>&1 &
		wpid=$!
	else
		why+=("the attacker never listened")
	fi
	wait "$pid" || rc=$?
	[ -z "${wpid:-}" ] || { kill -TERM "$wpid" 2>/dev/null; wait "$wpid" 2>/dev/null; }
	for what in relayed own-nonce reflected own-id; do
		grep -q "$what hello answered 19" "$dir/hostile.out" ||
			why+=("the $what hello was not refused: $(grep -Eo "$what [a-z]+ [a-z]+( -?[0-9]+)?" "$dir/hostile.out" | tr '\n' ' ')")
	done
	grep -q 'no RESOLVE served' "$dir/hostile.out" ||
		why+=("A served the reflecting attacker: $(grep -Eo 'RESOLVE [a-z]+ -?[0-9]+' "$dir/hostile.out")")
	grep -q 'version-2 hello answered 3' "$dir/hostile.out" ||
		why+=("a hello of protocol 2 was not answered ERR_VERSION (3): $(grep -Eo 'version-2 hello [a-z]+( -?[0-9]+)?' "$dir/hostile.out")")
	return $rc
}

head -c 65536 /dev/urandom >"$T/fill"
head -c 4096 /dev/urandom >"$T/legit"
FAILED=()

# One class; prints why it failed and returns 1, or returns 0.
run_class() {
	local class=$1 dir="$T/$1" a b aport expose rss0 rss_max rss
	local why=() rc=0 extra=() aflags=() refused sent
	local bflags=()
	mkdir -p "$dir"
	[ "$class" = uct-raw ] && aflags=(--peer-allow 127.0.0.1/32)
	if [ "$class" = uct-raw-reload ]; then
		printf "[rmad]\npeer_allow = 127.0.0.0/8\n" >"$dir/a.conf"
		aflags=(--config "$dir/a.conf" --log-level info)
	fi
	if [ "$class" = reflect ]; then
		head -c 48 /dev/urandom >"$dir/key" && chmod 600 "$dir/key"
		aflags=(--peer-key-file "$dir/key")
		bflags=(--peer-key-file "$dir/key")
	fi
	start_daemon "$dir" a "${aflags[@]}" || { echo "$class: A not ready"; return 1; }
	a=$DPID; aport=$DPORT
	start_daemon "$dir" b "${bflags[@]}" || { echo "$class: B not ready"; return 1; }
	b=$DPID
	"$RMACTL" --socket "$dir/a.sock" expose --size 1M --fill "$T/fill" \
		--descriptor-out "$dir/desc" 2>"$dir/expose.log" &
	expose=$!
	PIDS+=($expose)
	wait_until 10 test -s "$dir/desc" || { echo "$class: no descriptor"; return 1; }
	# a legitimate round trip before the attack: B -> A works
	timeout 20 "$RMACTL" --socket "$dir/b.sock" get --peer "127.0.0.1:$aport" \
		--descriptor "$dir/desc" --length 64K --out "$dir/before" 2>"$dir/get0.err" &&
		cmp -s "$T/fill" "$dir/before" || { echo "$class: legit get before the attack failed"; return 1; }

	rss0=$(rss_kib "$a")
	# A pile of answers may be freed once the attacker goes, but the
	# peak is what hurts: the kernel's high-water mark from here on.
	peak_reset "$a"
	case $class in
	get-flood | batch-amp | spoof | rndv | walkaround | epochs | retire) extra+=(--descriptor "$dir/desc") ;;
	esac
	[ "$class" = walkaround ] && extra+=(--pid "$a")
	[ "$class" = silent-conns ] && extra+=(--count 800)
	if [ "$class" = uct-raw-reload ]; then
		printf "[rmad]\npeer_allow = 127.0.0.1/32\n" >"$dir/a.conf"
		kill -HUP "$a"
		wait_until 10 grep -q "config_reload: peer_allow: 127.0.0.0/8 -> 127.0.0.1/32" "$dir/a.log" ||
			why+=("A did not reload peer_allow")
	fi
	case $class in
	uct-raw-uid)
		# as root: A's UCX ports (the listener's too) and its region
		local ports target attack nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
		ports=$(ss -ltnpH | awk -v pid="pid=$a," 'index($0, pid) && index($4, "127.0.0.1:") == 1 {
			sub(".*:", "", $4); print $4}' | sort -u | paste -sd, -)
		target=$(awk '/rmad-region/ {split($1, r, "-"); print "0x" r[1]; exit}' "/proc/$a/maps")
		echo "  A's UCX ports $ports, region at $target"
		(for attack in put crash oracle; do
			timeout 60 "${nobody[@]}" "$RAW_UCT" --ports "$ports" --target "$target" \
				--bind 127.0.0.1 --attack $attack --count 5 || exit
		done
		timeout 30 "${nobody[@]}" "$RAW_UCT" --ports "$aport" --target "$target" \
			--bind 127.0.0.1 --attack sockcm --count 5 || exit
		timeout 60 "${nobody[@]}" "$RAW_UCT" --ports "$ports" --target "$target" \
			--bind 127.0.0.1 --attack runaway --count 10) \
			>"$dir/hostile.out" 2>"$dir/hostile.err" || rc=$?
		;;
	uct-raw | uct-raw-reload | uct-raw-inside)
		local src=127.0.0.2
		[ "$class" = uct-raw-inside ] && src=127.0.0.1
		{ timeout 30 "$RAW_UCT" --pid "$a" --listener "$aport" --bind $src --attack put --count 300 &&
			timeout 30 "$RAW_UCT" --pid "$a" --listener "$aport" --bind $src --attack oversize &&
			timeout 30 "$RAW_UCT" --pid "$a" --listener "$aport" --bind $src --attack sockcm; } \
			>"$dir/hostile.out" 2>"$dir/hostile.err" || rc=$?
		;;
	reflect) # DPORT: B's, the last daemon started
		run_reflect "$dir" "$aport" "$DPORT" || rc=$?
		;;
	batch-amp)
		run_batch_amp "$dir" "$aport" "${extra[@]}" || rc=$?
		;;
	*)
		timeout 60 "$HOSTILE" --connect "127.0.0.1:$aport" --attack "$class" \
			--seconds 3 "${extra[@]}" >"$dir/hostile.out" 2>"$dir/hostile.err" || rc=$?
		;;
	esac
	# UCX logs to stdout: keep only our summary
	echo "  $(grep -m1 -E '^(hostile_peer|raw_uct):' "$dir/hostile.out")"
	[ "$rc" -eq 0 ] || why+=("attacker exit $rc: $(tail -1 "$dir/hostile.err")")
	if [ "$class" != uct-raw-inside ] && [ "${class#uct-raw}" != "$class" ] && alive "$a"; then
		grep -q ' [1-9][0-9]* connections closed at accept, 0 kept' "$dir/hostile.out" &&
			! grep -q ', [1-9][0-9]* kept' "$dir/hostile.out" ||
			why+=("UCX's sockets took the connection: $(grep -m2 'kept' "$dir/hostile.out" | tr '\n' ' ')")
		sent=$(awk '/connections closed at accept/ {n += $2} END {print n + 0}' "$dir/hostile.out")
		# and those that closed at once: counted once the daemon took them
		sent=$((sent + $(awk '/sent a put and closed at once/ {n += $2} END {print n + 0}' "$dir/hostile.out")))
		wait_until 10 ucx_refused_at_least "$dir/a.sock" "$sent"
		refused=$(ucx_refused "$dir/a.sock")
		[ "${refused:-0}" -ge "$sent" ] && [ "$sent" -ge 2 ] ||
			why+=("rmactl status counts ${refused:-no} refusals at UCX's sockets, raw_uct saw $sent")
		if [ "$class" = uct-raw-uid ]; then
			local_user=$("$RMACTL" --socket "$dir/a.sock" status 2>/dev/null |
				awk '/ucx sockets/ {print $8}')
			[ "${local_user:-0}" -ge "$sent" ] ||
				why+=("rmactl status counts ${local_user:-no} refusals of other local users, raw_uct sent $sent")
		fi
	fi

	if ! alive "$a"; then
		wait "$a"; rc=$?
		why+=("daemon A died (wait status $rc): $(grep -m1 -iE 'error|assert|fault|abort' "$dir/a.log" || tail -1 "$dir/a.log")")
		[ -z "${HOSTILE_KEEP:-}" ] || cp "$dir/a.log" "$HOSTILE_KEEP"
		echo "$class: FAIL: ${why[*]}"
		return 1
	fi
	rss_max=$(peak_kib "$a")
	rss=$(rss_kib "$a")
	[ "$rss" -gt "$rss_max" ] && rss_max=$rss
	echo "  A VmRSS: $rss0 KiB before, peak $rss_max KiB, $rss KiB after"
	if [ "$ASAN" -eq 0 ] && [ $((rss_max - rss0)) -ge $RSS_LIMIT_KIB ]; then
		why+=("A grew by $(((rss_max - rss0) / 1024)) MiB")
	fi
	# the victim, read through the legitimate peer
	if ! timeout 20 "$RMACTL" --socket "$dir/b.sock" get --peer "127.0.0.1:$aport" \
		--descriptor "$dir/desc" --length 64K --out "$dir/after" 2>"$dir/get1.err"; then
		why+=("legit get after the attack failed: $(cat "$dir/get1.err")")
	elif ! cmp -s "$T/fill" "$dir/after"; then
		why+=("victim bytes changed, 64-byte blocks at offsets: $(cmp -l "$T/fill" "$dir/after" |
			awk '{b = int(($1 - 1) / 64) * 64; if (!(b in s)) {s[b]; printf "%d ", b}}' | head -c 300)")
	fi
	# epochs: the put over the replaced connection (at offset 0) did not
	# land, checked above; the one over the newer connection did
	if [ "$class" = epochs ]; then
		grep -q 'new put acked 0' "$dir/hostile.out" ||
			why+=("the put over the newer connection was not acknowledged")
		grep -q 'connection 1 still up' "$dir/hostile.out" &&
			why+=("the replaced connection was not closed by the daemon")
		if ! timeout 20 "$RMACTL" --socket "$dir/b.sock" get --peer "127.0.0.1:$aport" \
			--descriptor "$dir/desc" --offset 768K --length 64 --out "$dir/new" 2>"$dir/get3.err"; then
			why+=("get of the newer connection's put failed: $(cat "$dir/get3.err")")
		elif [ "$(cat "$dir/new")" != "$(printf 'HOSTILE!%.0s' 1 2 3 4 5 6 7 8)" ]; then
			why+=("the put over the newer connection did not land")
		fi
	fi
	# retire: connection 1's put (at offset 0) did not land, checked
	# above; connection 1 was closed, and connections 2 (the mark's) and
	# 3 (another address dialed) both stayed and applied their puts, until
	# connection 4's floor closed them (their later puts, at offset 0,
	# did not land) and 4 applied its own
	if [ "$class" = retire ]; then
		grep -q 'connection 1 still up' "$dir/hostile.out" &&
			why+=("the connection below the retire mark was not closed by the daemon")
		grep -q 'connection 2 still up' "$dir/hostile.out" &&
			why+=("the connection below the floor was not closed by the daemon")
		grep -q 'connection 3 still up' "$dir/hostile.out" &&
			why+=("the connection to another address below the floor was not closed by the daemon")
		grep -q 'floor put acked 0' "$dir/hostile.out" ||
			why+=("the put over the connection with the floor was not acknowledged")
		grep -q 'new put acked 0' "$dir/hostile.out" ||
			why+=("the put over the connection with the mark was not acknowledged")
		grep -q 'other-address put acked 0' "$dir/hostile.out" ||
			why+=("the put over the connection to another address was not acknowledged: the mark closed it")
	fi
	# spoof: no spoofed hello got its connection served (its put at the
	# victim's start, checked above, was not applied either); the true
	# hello sent the same way was
	if [ "$class" = spoof ]; then
		grep -q 'spoofed hellos served: 0 of [1-9][0-9]* (), unanswered: 0 ' "$dir/hostile.out" ||
			why+=("a spoofed hello was served, or its connection neither refused the put nor closed: $(grep -Eo 'spoofed hellos served: [^;]*' "$dir/hostile.out")")
		grep -q 'true hello served 1' "$dir/hostile.out" ||
			why+=("the true hello, sent as the spoofed ones were, was not served")
	fi
	# a legitimate put and get still work
	if ! timeout 20 "$RMACTL" --socket "$dir/b.sock" put --peer "127.0.0.1:$aport" \
		--descriptor "$dir/desc" --offset 512K "$T/legit" 2>"$dir/put2.err"; then
		why+=("legit put failed: $(cat "$dir/put2.err")")
	elif ! timeout 20 "$RMACTL" --socket "$dir/b.sock" get --peer "127.0.0.1:$aport" \
		--descriptor "$dir/desc" --offset 512K --length 4K --out "$dir/legit.back" 2>"$dir/get2.err" ||
		! cmp -s "$T/legit" "$dir/legit.back"; then
		why+=("legit put/get round trip failed: $(cat "$dir/get2.err")")
	fi
	kill -TERM "$expose" 2>/dev/null
	wait "$expose" 2>/dev/null
	stop_daemon "$b" || why+=("B did not exit 0 on SIGTERM")
	stop_daemon "$a" || why+=("A did not exit 0 on SIGTERM within 10 s")
	if [ ${#why[@]} -gt 0 ]; then
		local w
		echo "$class: FAIL"
		for w in "${why[@]}"; do echo "  - $w"; done
		grep -v "no registered callback" "$dir/a.log" | grep -m3 -E "ERROR|Assert|abort|signal" | sed 's/^/  A: /'
		return 1
	fi
	echo "$class: ok"
	return 0
}

for class in $CLASSES; do
	echo "== $class"
	run_class "$class" || {
		FAILED+=("$class")
		for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
		wait 2>/dev/null
		PIDS=()
	}
done
if [ ${#FAILED[@]} -gt 0 ]; then
	echo "hostile: FAILED classes: ${FAILED[*]}"
	exit 1
fi
echo "hostile: all classes passed"
