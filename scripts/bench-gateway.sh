#!/usr/bin/env bash
# Runs the gateway benchmark (bench/gateway_test.go) the way
# docs/benchmarks.md records it, in rounds: BenchmarkGateway once per
# round (three, or BOUNCER_BENCH_ROUNDS), every implementation once in
# each round before any runs again. go test -count 3 would run each
# implementation's repeats back to back, and this VM's speed drifts over
# minutes: whichever ran while it was fast would win. ratios.go reports
# each figure's median over the rounds, each proxy beside the bare
# ReverseProxy, and the targets. The Redis row needs the servers of
# scripts/with-redis.sh (run it through that script, as `make
# bench-gateway` does; without BOUNCER_REDIS_ADDR the row is skipped).
# Extra arguments go to the test binary (-test.benchtime 500ms, say).
set -euo pipefail
cd "$(dirname "$0")/../bench"
go test -c -o gateway.test .
trap 'rm -f gateway.test' EXIT
for round in $(seq "${BOUNCER_BENCH_ROUNDS:-3}"); do
	./gateway.test -test.run '^$' -test.bench '^BenchmarkGateway$' -test.benchtime 2s -test.count 1 "$@"
done | tee gateway-out.txt
go run ratios.go < gateway-out.txt
