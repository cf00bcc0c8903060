#!/usr/bin/env bash
#
# Keep N cores busy (default 2), as other packages' race tests do on a
# small machine during make test, to see whether a test holds under load:
#
#   scripts/cpu-hog.sh 2 -- go test -race -count=3 ./redisstore/
#   scripts/cpu-hog.sh 4            # hog until killed (Ctrl-C)
#
# With a command, it runs the command beside the busy loops and exits with
# the command's status. However the script ends (the command done, or
# SIGINT/SIGTERM), the loops end with it, and so does the command.
set -euo pipefail

n=${1:-2}
if ! [[ $n =~ ^[0-9]+$ ]]; then
	echo "usage: $0 [N] [-- command...]" >&2
	exit 2
fi
(($# > 0)) && shift
[[ ${1:-} == -- ]] && shift

pids=() # the loops', then the command's
trap '((${#pids[@]} == 0)) || kill "${pids[@]}" 2>/dev/null || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for ((i = 0; i < n; i++)); do
	while :; do :; done &
	pids+=($!)
done

if (($# == 0)); then
	wait # for ever: only a signal ends the loops
fi
# In the background, so that a signal to the script is handled at once
# rather than when the command ends; <&0 keeps its standard input.
"$@" <&0 &
pids+=($!)
status=0
wait $! || status=$?
exit "$status"
