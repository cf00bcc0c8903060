#!/usr/bin/env bash
# Runs BenchmarkRLS (bench/rls_test.go) the way docs/benchmarks.md records
# it: each server under test pinned to CPU 0, the load generator and the
# Redis servers to CPU 1, so that a server is measured on a CPU of its own
# rather than sharing it with what drives it. Needs two CPUs and the Redis
# servers of scripts/with-redis.sh (run it through that script, as
# `make bench-rls` does). Extra arguments go to go test.
set -euo pipefail
cd "$(dirname "$0")/../bench"
if [ "$(nproc)" -lt 2 ]; then
	echo "bench-rls: needs at least 2 CPUs" >&2
	exit 1
fi
for pid in $(pgrep -x redis-server || true); do
	taskset -pc 1 "$pid" >/dev/null
done
BOUNCER_BENCH_SERVER_CPUS=0 taskset -c 1 go test -run '^$' -bench '^BenchmarkRLS$' -benchtime 3s -count 3 "$@" . | tee rls-out.txt
go run ratios.go < rls-out.txt
