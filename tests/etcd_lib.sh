# etcd_lib.sh - a private etcd on loopback, for tests/*.sh and for
# scripts/*.sh (which source it as "$top/tests/etcd_lib.sh"): its data
# directory and log under the caller's temp directory, its pid in the
# list the caller's trap stops.
#
# Source tests/lib.sh first (wait_until, gone) and set tmp.  Then:
#   free_ports N        N free loopback ports the kernel picked (python3),
#                       on one line
#   etcd_start VAR NAME [CLIENT PEER]
#                       start etcd ($ETCD, default etcd) as member NAME,
#                       clients on 127.0.0.1:CLIENT, peers on PEER, data
#                       $tmp/etcd, log $tmp/etcd.log; its pid goes to
#                       ETCD_PID and onto the list in variable VAR (the
#                       one the caller's trap kills); wait up to 15 s for
#                       etcd_up.  Without ports: random ones, another
#                       pair up to 5 times while it does not come up.
#                       Sets ETCD_PORT and ETCD_EP (127.0.0.1:PORT);
#                       returns 1 when etcd never answered
#   etcd_up             0 once etcd answers GET /health; a caller may
#                       define its own after sourcing this (with $ETCD_EP)
#   etcd_run DIR NAME CLIENT PEER SCHEME [ARGS...]
#                       only start etcd (data DIR, log DIR.log, clients on
#                       SCHEME://127.0.0.1:CLIENT, ARGS added): pid in
#                       ETCD_PID, nothing waited for
#   etcd_stop [SIG]     SIG (TERM) to ETCD_PID, SIGKILL after 5 s; it
#                       leaves etcd_start's list
#   cluster_stop PID... for the EXIT trap of a cluster on loopback (etcd,
#                       kvfsd nodes mounted on $tmp/mnt*, conductors):
#                       SIGCONT and SIGTERM to every PID, SIGKILL to those
#                       not gone within 5 s, wait, then a lazy unmount of
#                       every FUSE mount $tmp/mnt*

ETCD_PID=
ETCD_PORT=
ETCD_EP=
ETCD_LIST=

free_ports() {
	"${PYTHON3:-python3}" -c '
import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"
}

etcd_run() {
	er_dir=$1 er_name=$2 er_c=$3 er_p=$4 er_s=$5
	shift 5
	"${ETCD:-etcd}" --name "$er_name" --data-dir "$er_dir" \
		--listen-client-urls "$er_s://127.0.0.1:$er_c" \
		--advertise-client-urls "$er_s://127.0.0.1:$er_c" \
		--listen-peer-urls "http://127.0.0.1:$er_p" \
		--initial-advertise-peer-urls "http://127.0.0.1:$er_p" \
		--initial-cluster "$er_name=http://127.0.0.1:$er_p" \
		"$@" >"$er_dir.log" 2>&1 &
	ETCD_PID=$!
}

etcd_up() {
	"${PYTHON3:-python3}" -c "
import urllib.request
urllib.request.urlopen('http://$ETCD_EP/health',timeout=1).read()" 2>/dev/null
}

# etcd exited (a zombie until waited for counts)
etcd_gone() {
	! kill -0 "$ETCD_PID" 2>/dev/null ||
		[ "$(awk '{ print $3 }' "/proc/$ETCD_PID/stat" 2>/dev/null)" = Z ]
}
# up, or exited (a port was taken, most likely)
etcd_settled() { etcd_up || etcd_gone; }

etcd_start() {
	ETCD_LIST=$1
	es_name=$2
	es_try=0
	while [ $es_try -lt 5 ]; do
		es_try=$((es_try + 1))
		if [ $# -ge 4 ]; then
			es_c=$3 es_p=$4
			es_try=5
		else
			es_c=$(etcd_rand_port)
			es_p=$(etcd_rand_port)
			[ "$es_c" != "$es_p" ] || continue
		fi
		rm -rf "$tmp/etcd"
		ETCD_PORT=$es_c
		ETCD_EP=127.0.0.1:$es_c
		etcd_run "$tmp/etcd" "$es_name" "$es_c" "$es_p" http
		eval "$ETCD_LIST=\"\${$ETCD_LIST:+\${$ETCD_LIST} }$ETCD_PID\""
		wait_until 150 etcd_settled && etcd_up && return 0
		etcd_stop KILL
	done
	return 1
}

etcd_rand_port() {
	r=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
	echo $((r % 25000 + 30000))
}

etcd_stop() {
	[ -n "$ETCD_PID" ] || return 0
	kill -"${1:-TERM}" "$ETCD_PID" 2>/dev/null || true
	wait_until 50 etcd_gone ||
		kill -KILL "$ETCD_PID" 2>/dev/null || true
	wait "$ETCD_PID" 2>/dev/null || true
	[ -z "$ETCD_LIST" ] ||
		eval "$ETCD_LIST=\$(echo \" \${$ETCD_LIST} \" | sed 's/ $ETCD_PID / /; s/^ *//; s/ *\$//')"
	ETCD_PID=
	return 0
}

cluster_stop() {
	for p in "$@"; do
		kill -CONT "$p" 2>/dev/null
		kill -TERM "$p" 2>/dev/null
	done
	for p in "$@"; do wait_until 50 gone "$p" || kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	for m in "$tmp"/mnt*; do
		[ -d "$m" ] || continue
		grep -q " $m fuse" /proc/mounts &&
			{ fusermount3 -u -z "$m" 2>/dev/null || umount -l "$m"; }
	done
	return 0
}
