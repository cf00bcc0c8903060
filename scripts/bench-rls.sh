#!/usr/bin/env bash
# Runs BenchmarkRLS (bench/rls_test.go) the way docs/benchmarks.md records
# it: each server under test pinned to CPU 0, the load generator and the
# Redis servers to CPU 1, so that a server is measured on a CPU of its own
# rather than sharing it with what drives it. Needs two CPUs and the Redis
# servers of scripts/with-redis.sh (run it through that script, as
# `make bench-rls` does). Extra arguments go to the test binary
# (-test.benchtime 1s, say).
set -euo pipefail
cd "$(dirname "$0")/../bench"
if [ "$(nproc)" -lt 2 ]; then
	echo "bench-rls: needs at least 2 CPUs" >&2
	exit 1
fi
# The Redis servers go to CPU 1 for the run and back to every CPU after
# it, so that later runs (make bench, tests) find them as they were: the
# servers of BOUNCER_REDIS_DIR (scripts/with-redis.sh sets it), not those
# of others on the same machine; every redis-server without it.
redis_pids() {
	if [ -n "${BOUNCER_REDIS_DIR:-}" ]; then
		cat "$BOUNCER_REDIS_DIR"/*/redis.pid 2>/dev/null || true
	else
		pgrep -x redis-server || true
	fi
}
unpin() {
	for pid in $(redis_pids); do
		taskset -pc "0-$(($(nproc) - 1))" "$pid" >/dev/null || true
	done
}
trap unpin EXIT
for pid in $(redis_pids); do
	taskset -pc 1 "$pid" >/dev/null
done
# Rounds of one count each (five, or BOUNCER_BENCH_ROUNDS), rather than
# -count 5: go test repeats a sub-benchmark's counts back to back, so a
# machine whose speed drifts over minutes would favour whichever server
# ran when it was fast. Round by round, every server runs once before any
# runs again; ratios.go reports each figure's median over the rounds.
# -tags gubernator builds in gubernator's Go client, without which its rows
# skip (bench/doc.go).
go test -tags gubernator -c -o rls.test .
for round in $(seq "${BOUNCER_BENCH_ROUNDS:-5}"); do
	BOUNCER_BENCH_SERVER_CPUS=0 taskset -c 1 ./rls.test -test.run '^$' -test.bench '^BenchmarkRLS$' -test.benchtime 3s -test.count 1 "$@"
done | tee rls-out.txt
rm -f rls.test
go run ratios.go < rls-out.txt
