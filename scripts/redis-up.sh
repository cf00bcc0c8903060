#!/usr/bin/env bash
#
# Start the Redis servers the Redis store tests use, installing Redis first
# if needed (Debian/Ubuntu: apt-get install redis-server):
#
#   standalone  127.0.0.1:16379                 (BOUNCER_REDIS_PORT)
#   cluster     127.0.0.1:17000-17005           (BOUNCER_REDIS_CLUSTER_BASE_PORT)
#               3 masters + 3 replicas, cluster-node-timeout 2000 ms
#   sentinel    127.0.0.1:17100-17104           (BOUNCER_REDIS_SENTINEL_BASE_PORT)
#               a master, its replica and three Sentinels, with ACL users
#               (scripts/redis-sentinel.sh; 0 turns it off)
#
# With --standalone, only the standalone server starts (what the examples
# need; the cluster and the Sentinel set are for the tests).
#
# Idempotent: if they already run and the cluster is healthy it does nothing;
# otherwise it stops whatever is left of an earlier run and starts afresh.
# State lives in $BOUNCER_REDIS_DIR (default .redis in the repository root).
# Progress goes to stderr; stdout gets only the environment to use, which is
# also written, as export lines, to $BOUNCER_REDIS_DIR/env:
#
#   . .redis/env          # or: export $(scripts/redis-up.sh)
#
# See also scripts/redis-down.sh and scripts/redis-node.sh.
set -euo pipefail

# shellcheck source=scripts/redis-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/redis-common.sh"

install_redis() {
	if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
		return 0
	fi
	command -v apt-get >/dev/null 2>&1 ||
		die "redis-server/redis-cli not found and there is no apt-get; install Redis (5 or later, with redis-cli) and re-run"
	local -a sudo=()
	if ((EUID != 0)); then
		command -v sudo >/dev/null 2>&1 || die "redis-server is not installed and installing it needs root (no sudo found)"
		if [[ -t 0 ]]; then sudo=(sudo); else sudo=(sudo -n); fi
	fi
	log "redis-server/redis-cli not found; installing Debian's redis-server package"
	# The package's own service (port 6379), if its postinst starts one, is
	# left alone: we run our own servers on our own ports.
	bounded 300 ${sudo[@]+"${sudo[@]}"} apt-get -q update </dev/null >&2 ||
		die "apt-get update failed"
	bounded 600 ${sudo[@]+"${sudo[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get -q install -y --no-install-recommends \
		-o DPkg::Lock::Timeout=120 redis-server </dev/null >&2 ||
		die "apt-get install redis-server failed"
	hash -r
	if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
		die "redis-server and redis-cli still not found after installing redis-server"
	fi
}

main() {
	local started=$SECONDS port state
	case ${1:-} in
	"") ;;
	--standalone) CLUSTER_SIZE=0 ;;
	*) die "usage: scripts/redis-up.sh [--standalone]" ;;
	esac
	validate_settings
	install_redis
	load_redis_version
	((REDIS_MAJOR >= 5)) ||
		die "need Redis 5 or later for redis-cli --cluster; found: $(redis-server --version 2>&1 | head -n 1)"
	resolve_state_dir create
	acquire_lock

	if all_healthy; then
		log "already up and healthy in $STATE_DIR"
	else
		log "starting afresh in $STATE_DIR ($HEALTH_REASON)"
		local t_fresh=$SECONDS

		# Refuse, before touching anything, to fight another server over a port.
		for port in $(all_ports); do
			state=$(node_probe "$port")
			if [[ $state == foreign* ]]; then
				die "port $port is taken by another Redis server (config ${state#foreign }); stop it or choose other ports with BOUNCER_REDIS_PORT / BOUNCER_REDIS_CLUSTER_BASE_PORT"
			fi
		done

		# Leftovers of an earlier run: stop them, then wipe their directories
		# (stale pidfiles, nodes.conf, logs).
		for port in $( (all_ports; ports_in_state_dir) | sort -un); do
			stop_node "$port"
			rm -rf "$(node_dir "$port")"
		done
		rm -f "$STATE_DIR/env"

		write_conf "$STANDALONE_PORT" standalone
		for port in $(cluster_ports); do
			write_conf "$port" cluster
		done
		for port in $(all_ports); do
			launch_node "$port"
		done
		for port in $(all_ports); do
			wait_node_up "$port"
		done
		local t_servers=$SECONDS

		local -a nodes=()
		for port in $(cluster_ports); do
			nodes+=("$REDIS_HOST:$port")
		done
		local out
		if ((CLUSTER_SIZE > 0)) && ! out=$(bounded 60 redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes </dev/null 2>&1); then
			printf '%s\n' "$out" >&2
			die "redis-cli --cluster create failed"
		fi
		local t_create=$SECONDS

		if ! wait_healthy "$WAIT_SECS"; then
			log "cluster nodes as seen from $CLUSTER_BASE_PORT:"
			rcli "$CLUSTER_BASE_PORT" cluster nodes >&2 || true
			die "cluster not healthy after ${WAIT_SECS}s: $HEALTH_REASON (logs: $STATE_DIR/<port>/redis.log)"
		fi
		log "up in $((SECONDS - started))s (servers $((t_servers - t_fresh))s, cluster create $((t_create - t_servers))s, replicas synced $((SECONDS - t_create))s): standalone $STANDALONE_PORT, cluster ${CLUSTER_SIZE/#0/none}$(cluster_addrs)"
	fi

	# The Sentinel set (scripts/redis-sentinel.sh), except with --standalone.
	local sentinel_env=
	((CLUSTER_SIZE == 0)) || sentinel_env=$(bash "$REDIS_SCRIPTS_DIR/redis-sentinel.sh" up)

	local tmp=$STATE_DIR/env.tmp
	local line value
	while IFS= read -r line; do
		[[ -n $line ]] || continue
		value=${line#*=}
		# Plain when safe (then a Makefile can also include the file), else quoted.
		[[ $value =~ ^[A-Za-z0-9_./:,@+-]*$ ]] || value=$(printf '%q' "$value")
		printf 'export %s=%s\n' "${line%%=*}" "$value"
	done < <(env_lines; echo "$sentinel_env") >"$tmp"
	mv -f "$tmp" "$STATE_DIR/env"
	env_lines
	[[ -z $sentinel_env ]] || echo "$sentinel_env"
}

main "$@"
