#!/usr/bin/env bash
#
# Run a command with the test Redis servers up: starts them with
# scripts/redis-up.sh (installing redis-server if needed), exports their
# addresses and BOUNCER_REQUIRE_REDIS=1 (so that the Redis tests fail
# instead of skipping if a server is missing), runs the command, and stops
# the servers again, whatever the command's outcome. make test uses it.
#
#   scripts/with-redis.sh go test ./redisstore/
set -euo pipefail

dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
env_lines=$(bash "$dir/redis-up.sh")
trap 'bash "$dir/redis-down.sh" >&2 || true' EXIT
# shellcheck disable=SC2163
while IFS= read -r line; do
	[[ -n $line ]] && export "${line#export }"
done <<<"$env_lines"
export BOUNCER_REQUIRE_REDIS=1
"$@"
