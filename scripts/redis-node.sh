#!/usr/bin/env bash
#
# Stop and restart single servers started by scripts/redis-up.sh, for failure
# tests. A node keeps its directory, config and (cluster) nodes.conf while
# stopped, so a cluster master that is stopped, failed over and started again
# rejoins as a replica of the node that took its slots.
#
#   scripts/redis-node.sh stop PORT    SHUTDOWN NOSAVE (SIGTERM/SIGKILL if it hangs)
#   scripts/redis-node.sh kill PORT    SIGKILL: a crash, no goodbye to anyone
#   scripts/redis-node.sh start PORT   start it again; returns once it answers PING
#   scripts/redis-node.sh wait         wait (BOUNCER_REDIS_WAIT_SECS, 30) until the
#                                      standalone answers and the cluster is whole
#                                      again: all slots ok, 3 masters with a synced
#                                      replica each
#   scripts/redis-node.sh status       one line per node: port, state, role
#
# PORT is the standalone's or any cluster node's. The same environment as for
# redis-up.sh applies (BOUNCER_REDIS_DIR and the port variables).
set -euo pipefail

# shellcheck source=scripts/redis-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/redis-common.sh"

usage() {
	sed -n '/^#   scripts/,/^#$/p' "${BASH_SOURCE[0]}" | sed 's/^#//' >&2
	exit 2
}

need_port() {
	if [[ -z ${1:-} ]] || ! is_uint "$1"; then
		usage
	fi
	[[ -f "$(node_dir "$1")/redis.conf" ]] ||
		die "no node on port $1 in $STATE_DIR (ports: $(ports_in_state_dir | paste -sd, -)); run scripts/redis-up.sh first"
}

main() {
	local cmd=${1:-} port=${2:-} p
	validate_settings
	if ! command -v redis-cli >/dev/null 2>&1 || ! command -v redis-server >/dev/null 2>&1; then
		die "redis-server/redis-cli not found; run scripts/redis-up.sh first"
	fi
	load_redis_version
	resolve_state_dir existing
	[[ -d $STATE_DIR ]] || die "$STATE_DIR does not exist; run scripts/redis-up.sh first"
	case $cmd in
	stop | kill)
		need_port "$port"
		acquire_lock
		if [[ $cmd == kill ]]; then
			stop_node "$port" kill
		else
			stop_node "$port"
		fi
		;;
	start)
		need_port "$port"
		acquire_lock
		start_node "$port"
		;;
	wait)
		if ! wait_healthy "$WAIT_SECS"; then
			die "not healthy after ${WAIT_SECS}s: $HEALTH_REASON"
		fi
		;;
	status)
		for p in $(ports_in_state_dir); do
			node_query "$p" "INFO replication"
			node_state "$p"
			QV=
			[[ $NODE_STATE != ours ]] || qfield role
			printf '%s\t%s\t%s\n' "$p" "${NODE_STATE/ours/up}" "$QV"
		done
		;;
	*) usage ;;
	esac
}

main "$@"
