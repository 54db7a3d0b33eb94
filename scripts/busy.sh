#!/bin/sh
# busy.sh CMD...: runs CMD with one busy loop per core beside it (a busy CI
# machine), and stops the loops when CMD ends, fails or is interrupted.
# `make test-busy` runs `make test` under it.
set -u
n=$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc)
hogs=""
stop() {
	for p in $hogs; do kill "$p" 2>/dev/null; done
	hogs=""
}
trap stop EXIT
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM
trap 'stop; exit 129' HUP
trap 'stop; exit 141' PIPE
i=0
while [ "$i" -lt "$n" ]; do
	# Each loop also ends by itself once this script is gone (even if
	# killed with SIGKILL, when no trap runs).
	sh -c "while kill -0 $$ 2>/dev/null; do :; done" &
	hogs="$hogs $!"
	i=$((i + 1))
done
echo "busy.sh: $n busy loops running beside: $*" >&2
"$@"
