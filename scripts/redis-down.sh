#!/usr/bin/env bash
#
# Stop every Redis server scripts/redis-up.sh started from this state
# directory ($BOUNCER_REDIS_DIR, default .redis in the repository root) and
# remove the directory. Idempotent. Servers of other checkouts or other users
# (a different `dir`) are never touched.
set -euo pipefail

# shellcheck source=scripts/redis-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/redis-common.sh"

main() {
	local port
	validate_settings
	resolve_state_dir existing
	if command -v redis-cli >/dev/null 2>&1; then
		load_redis_version
		[[ ! -d $STATE_DIR ]] || acquire_lock
		# Also when the directory is gone: its servers may outlive it.
		for port in $( (all_ports; ports_in_state_dir) | sort -un); do
			stop_node "$port"
		done
	fi
	bash "$REDIS_SCRIPTS_DIR/redis-sentinel.sh" down
	if [[ ! -d $STATE_DIR ]]; then
		log "stopped; $STATE_DIR does not exist"
		return 0
	fi
	# Remove only what the scripts create, so a mistaken BOUNCER_REDIS_DIR
	# cannot wipe anything else.
	for port in $(ports_in_state_dir); do
		rm -rf "$(node_dir "$port")"
	done
	rm -f "$STATE_DIR/env" "$STATE_DIR/env.tmp" "$STATE_DIR/.lock"
	if rmdir "$STATE_DIR" 2>/dev/null; then
		log "stopped; removed $STATE_DIR"
	else
		log "stopped; left $STATE_DIR in place: it holds files the scripts did not create"
	fi
}

main "$@"
