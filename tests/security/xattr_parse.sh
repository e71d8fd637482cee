#!/bin/sh
# user.kvfs.block_tokens takes exactly the decimal digits of the value's
# whole length: trailing garbage after a NUL, a newline, a sign or spaces
# is EINVAL, and a refused value leaves the namespace as it was.
set -eu

T=xattr_parse
. "${top_srcdir:-.}/tests/fuse_lib.sh"
fuse_begin

kvfsd_start "slot_size=256K,slots=64"
NS=$MNT/ns
XA=user.kvfs.block_tokens
nl='
'

expect OK "mkdir a namespace" "$FE" mkdir "$NS"
expect EINVAL "block_tokens '64' and a newline is refused" \
	"$FE" setx "$NS" $XA "64$nl"
for v in "64 " " 64" "+64" "-64" "6 4" "0x40" "64k" "" "0" \
	"1048577" "4294967360" "18446744073709551680"; do
	expect EINVAL "block_tokens '$v' is refused" "$FE" setx "$NS" $XA "$v"
done
expect 512 "and the value is unchanged" "$FE" getx "$NS" $XA

# a NUL inside the value: fuse_errno setx stops at one, python does not
PY=${PYTHON3:-}
[ -n "$PY" ] || PY=$(command -v python3 || true)
setx_raw() {
	"$PY" - "$1" "$2" <<'PYEOF'
import codecs, errno, os, sys
try:
    os.setxattr(sys.argv[1], "user.kvfs.block_tokens",
                codecs.escape_decode(sys.argv[2])[0])
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
PYEOF
}
if [ -n "$PY" ]; then
	expect EINVAL "block_tokens '64', NUL, 'junk' is refused" \
		setx_raw "$NS" '64\0junk'
	expect EINVAL "block_tokens '64', NUL is refused" setx_raw "$NS" '64\0'
	expect EINVAL "block_tokens NUL, '64' is refused" setx_raw "$NS" '\x0064'
	expect 512 "and the value is unchanged" "$FE" getx "$NS" $XA
else
	echo "$T: no python3: the NUL cases are not run"
fi

expect OK "block_tokens '64' is taken" "$FE" setx "$NS" $XA 64
expect 64 "and reads back" "$FE" getx "$NS" $XA
expect OK "the largest, 1048576, is taken" "$FE" setx "$NS" $XA 1048576
expect 1048576 "and reads back" "$FE" getx "$NS" $XA

kvfsd_stop || bad "kvfsd exit status $?"
exit "$fail"
