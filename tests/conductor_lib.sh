# conductor_lib.sh - `kvconductor serve` on loopback, for tests/*.sh and
# for scripts/*.sh (which source it as "$top/tests/conductor_lib.sh"):
# started in the background, its ports read from what it prints.
#
# Source tests/lib.sh first (wait_until), set tmp and KVC (the binary).
# Then:
#   conductor_start VAR NAME [ARGS...]
#                       "$KVC" serve --listen 127.0.0.1:0 ARGS, stdin
#                       /dev/null, stdout $tmp/NAME.out (made anew),
#                       stderr appended to $tmp/NAME.err, under
#                       timeout $KVC_TIMEOUT when that is set (and
#                       SIGKILL 10 s after its SIGTERM: a daemon whose
#                       exit hangs, as LeakSanitizer's once did, still
#                       ends, and so does a test waiting for it); its pid in
#                       CPID and onto the list in variable VAR (the one
#                       the caller's trap kills); waits up to 10 s for its
#                       "listen" line (and "events" with --events);
#                       returns 1 when they did not come
#   conductor_port NAME [WHAT]
#                       the port of its WHAT line (listen, the default,
#                       or events)

CPID=

conductor_start() {
	cs_var=$1
	cs_name=$2
	shift 2
	cs_want=listen
	case " $* " in *" --events "*) cs_want=events ;; esac
	rm -f "$tmp/$cs_name.out"
	${KVC_TIMEOUT:+timeout -k 10 "$KVC_TIMEOUT"} "$KVC" serve \
		--listen 127.0.0.1:0 "$@" </dev/null >"$tmp/$cs_name.out" \
		2>>"$tmp/$cs_name.err" &
	CPID=$!
	eval "$cs_var=\"\${$cs_var:+\${$cs_var} }$CPID\""
	wait_until 100 grep -qs "^$cs_want " "$tmp/$cs_name.out"
}

conductor_port() {
	sed -n "s/^${2:-listen} 127\.0\.0\.1:\([0-9]*\)\$/\1/p" "$tmp/$1.out"
}
