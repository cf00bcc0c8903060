#!/usr/bin/env bash
#
# Run a command with the test Redis servers up: starts them with
# scripts/redis-up.sh (installing redis-server if needed), exports their
# addresses and BOUNCER_REQUIRE_REDIS=1 (so that the Redis tests fail
# instead of skipping if a server is missing), runs the command, and stops
# the servers again, whatever the command's outcome, unless they were
# already up and healthy before (a developer's own make redis-up). make
# test uses it.
#
#   scripts/with-redis.sh go test ./redisstore/
set -euo pipefail

dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

was_up() (
	# shellcheck source=scripts/redis-common.sh
	source "$dir/redis-common.sh"
	command -v redis-cli >/dev/null 2>&1 || exit 1
	validate_settings
	resolve_state_dir existing
	load_redis_version
	all_healthy
)

if was_up >/dev/null 2>&1; then
	env_lines=$(bash "$dir/redis-up.sh")
	echo "redis: already up; leaving the servers running afterwards" >&2
else
	env_lines=$(bash "$dir/redis-up.sh")
	trap 'bash "$dir/redis-down.sh" >&2 || true' EXIT
fi
# shellcheck disable=SC2163
while IFS= read -r line; do
	[[ -n $line ]] && export "${line#export }"
done <<<"$env_lines"
export BOUNCER_REQUIRE_REDIS=1
"$@"
