#!/usr/bin/env bash
#
# Install a headless-capable Chromium for the admin live page's browser
# test (cmd/bouncer/live_browser_test.go), if neither chromium nor
# chromium-browser is on PATH (Debian/Ubuntu: apt-get install chromium).
# A no-op when one is. make test runs it before the unit tests and
# exports BOUNCER_REQUIRE_BROWSER=1, so that the test fails instead of
# skipping if no browser is found. Progress goes to stderr.
set -euo pipefail

log() { printf 'chromium: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}

if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
	exit 0
fi
command -v apt-get >/dev/null 2>&1 ||
	die "chromium not found and there is no apt-get; install Chromium and re-run"
sudo=()
if ((EUID != 0)); then
	command -v sudo >/dev/null 2>&1 || die "chromium is not installed and installing it needs root (no sudo found)"
	if [[ -t 0 ]]; then sudo=(sudo); else sudo=(sudo -n); fi
fi
log "chromium not found; installing Debian's chromium package"
# apt-get's output is shown only if it fails.
out=$(mktemp)
trap 'rm -f "$out"' EXIT
quiet() { "$@" </dev/null >"$out" 2>&1 || { cat "$out" >&2; return 1; }; }
quiet ${sudo[@]+"${sudo[@]}"} apt-get -q update || die "apt-get update failed"
quiet ${sudo[@]+"${sudo[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get -q install -y --no-install-recommends \
	-o DPkg::Lock::Timeout=120 chromium || die "apt-get install chromium failed"
hash -r
command -v chromium >/dev/null 2>&1 || die "chromium still not found after installing it"
