#!/usr/bin/env bash
# Runs the gateway benchmark (bench/gateway_test.go) the way
# docs/benchmarks.md records it, in rounds: BenchmarkGateway once per
# round (three, or BOUNCER_BENCH_ROUNDS), every implementation, and the
# Redis round trip, once in each round before any runs again. go test
# -count 3 would run each implementation's repeats back to back, and this
# VM's speed drifts over minutes: whichever ran while it was fast would
# win. ratios.go reports each figure's median over the rounds, each proxy
# beside the bare ReverseProxy, and the targets. The Redis row and the
# Redis round trip need the servers of scripts/with-redis.sh (run it
# through that script, as `make bench-gateway` does; without
# BOUNCER_REDIS_ADDR they are skipped). The nginx row needs Debian's nginx
# (/usr/sbin/nginx): this script installs the package when it is missing
# (apt-get install nginx, through sudo when not root; the package's own
# service is left alone: the benchmark runs nginx itself) and sets
# BOUNCER_REQUIRE_NGINX=1, so that the row fails rather than skips.
# Extra arguments go to the test binary (-test.benchtime 500ms, say).
set -euo pipefail

log() { printf 'bench-gateway: %s\n' "$*" >&2; }
die() {
	printf 'bench-gateway: error: %s\n' "$*" >&2
	exit 1
}

# bounded SECS CMD...: run CMD, killed after SECS where timeout(1) exists.
if command -v timeout >/dev/null 2>&1; then
	bounded() { timeout "$@"; }
else
	bounded() {
		shift
		"$@"
	}
fi

install_nginx() {
	[[ -x /usr/sbin/nginx ]] && return 0
	command -v apt-get >/dev/null 2>&1 ||
		die "/usr/sbin/nginx not found and there is no apt-get; install nginx and re-run"
	local -a sudo=()
	if ((EUID != 0)); then
		command -v sudo >/dev/null 2>&1 || die "nginx is not installed and installing it needs root (no sudo found)"
		if [[ -t 0 ]]; then sudo=(sudo); else sudo=(sudo -n); fi
	fi
	log "/usr/sbin/nginx not found; installing Debian's nginx package"
	bounded 300 ${sudo[@]+"${sudo[@]}"} apt-get -q update </dev/null >&2 ||
		die "apt-get update failed"
	bounded 600 ${sudo[@]+"${sudo[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get -q install -y --no-install-recommends \
		-o DPkg::Lock::Timeout=120 nginx </dev/null >&2 ||
		die "apt-get install nginx failed"
	[[ -x /usr/sbin/nginx ]] || die "/usr/sbin/nginx still not found after installing nginx"
}

install_nginx
export BOUNCER_REQUIRE_NGINX=1
cd "$(dirname "$0")/../bench"
go test -c -o gateway.test .
trap 'rm -f gateway.test' EXIT
for round in $(seq "${BOUNCER_BENCH_ROUNDS:-3}"); do
	./gateway.test -test.run '^$' -test.bench '^BenchmarkGateway$' -test.benchtime 2s -test.count 1 "$@"
done | tee gateway-out.txt
go run ratios.go < gateway-out.txt
