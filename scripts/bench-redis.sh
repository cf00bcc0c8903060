#!/usr/bin/env bash
# Runs the Redis store's benchmarks beside its peers (bench/redis_test.go,
# bench/redis_memory_test.go) the way docs/benchmarks.md records them, in
# rounds: BenchmarkRedisCheck once per round (three, or
# BOUNCER_BENCH_ROUNDS), every implementation once in each round before
# any runs again, then BenchmarkRedisBytesPerKey once (its figures repeat
# to the byte). go test -count 3 would run each implementation's repeats
# back to back, and this VM's speed drifts by up to ±40 % over minutes:
# whichever ran while it was fast would win. ratios.go reports each
# figure's median over the rounds. Needs the Redis servers of
# scripts/with-redis.sh (run it through that script, as `make
# bench-redis` does); nothing is pinned. Extra arguments go to the test
# binary.
set -euo pipefail
cd "$(dirname "$0")/../bench"
go test -c -o redis.test .
trap 'rm -f redis.test' EXIT
{
	for round in $(seq "${BOUNCER_BENCH_ROUNDS:-3}"); do
		./redis.test -test.run '^$' -test.bench '^BenchmarkRedisCheck$' -test.benchtime 2s -test.count 1 "$@"
	done
	./redis.test -test.run '^$' -test.bench '^BenchmarkRedisBytesPerKey$' -test.count 1 "$@"
} | tee redis-out.txt
go run ratios.go < redis-out.txt
