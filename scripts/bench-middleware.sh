#!/usr/bin/env bash
# Runs the HTTP middleware benchmarks (bench/middleware_test.go) the way
# docs/benchmarks.md records them, in rounds: BenchmarkMiddleware (in
# process) and BenchmarkMiddlewareLoopback (over a loopback listener) once
# per round (three, or BOUNCER_BENCH_ROUNDS), every implementation once in
# each round before any runs again. go test -count 3 would run each
# implementation's repeats back to back, and this VM's speed drifts over
# minutes: whichever ran while it was fast would win. ratios.go reports
# each figure's median over the rounds, and each middleware's overhead over
# the bare handler. Needs no server. Extra arguments go to the test binary
# (-test.benchtime 500ms, say).
set -euo pipefail
cd "$(dirname "$0")/../bench"
go test -c -o middleware.test .
trap 'rm -f middleware.test' EXIT
for round in $(seq "${BOUNCER_BENCH_ROUNDS:-3}"); do
	./middleware.test -test.run '^$' -test.bench '^(BenchmarkMiddleware|BenchmarkMiddlewareLoopback)$' -test.benchtime 1s -test.count 1 "$@"
done | tee middleware-out.txt
go run ratios.go < middleware-out.txt
