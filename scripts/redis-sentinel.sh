#!/usr/bin/env bash
#
# A Sentinel-managed Redis for the Redis store tests, with ACL users on
# every server (installs Debian's redis-sentinel package with apt-get if
# redis-sentinel is missing):
#
#   master     127.0.0.1:BASE          BASE: BOUNCER_REDIS_SENTINEL_BASE_PORT (17100)
#   replica    127.0.0.1:BASE+1
#   sentinels  127.0.0.1:BASE+2..+4    master set "bouncer", quorum 2,
#                                      down-after 1000 ms
#
# The data nodes refuse the default user; user "bouncer" (password
# SENTINEL_MASTER_PASSWORD below) may do everything, and the replica and
# the sentinels log in as it. The sentinels refuse the default user too;
# user "sentinel" has a password of its own (SENTINEL_PASSWORD), so that
# a client must set both rueidis's ClientOption.Username/Password and
# ClientOption.Sentinel.Username/Password. These are test credentials on
# loopback, not secrets.
#
#   scripts/redis-sentinel.sh up          start the set unless it is up and
#                                         healthy; prints the environment
#   scripts/redis-sentinel.sh down        stop it and remove its state
#   scripts/redis-sentinel.sh kill PORT   SIGKILL a node of the set (a crash)
#   scripts/redis-sentinel.sh start PORT  start a stopped node again
#   scripts/redis-sentinel.sh master      print the master's port, as the
#                                         sentinels see it
#   scripts/redis-sentinel.sh failover    SENTINEL FAILOVER: the replica takes
#                                         over with both nodes up
#   scripts/redis-sentinel.sh wait        wait (BOUNCER_REDIS_WAIT_SECS, 30)
#                                         until the set is healthy: one master,
#                                         its replica synced, every sentinel
#                                         agreeing on it with a quorum
#
# With BOUNCER_REDIS_SENTINEL_BASE_PORT=0 up and down do nothing (the
# failure tests' private sets). State lives in $BOUNCER_REDIS_DIR/sentinel
# (one directory per port, as redis-up.sh's nodes); scripts/redis-up.sh
# runs `up` and writes the environment into $BOUNCER_REDIS_DIR/env,
# scripts/redis-down.sh runs `down`. Every wait is bounded.
set -euo pipefail

# shellcheck source=scripts/redis-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/redis-common.sh"

SENTINEL_BASE_PORT=${BOUNCER_REDIS_SENTINEL_BASE_PORT:-17100}
SENTINEL_MASTER_SET=bouncer
SENTINEL_MASTER_USER=bouncer
SENTINEL_MASTER_PASSWORD=bouncer-master-test-password
SENTINEL_USER=sentinel
SENTINEL_PASSWORD=bouncer-sentinel-test-password
SENTINEL_DOWN_AFTER_MS=1000
SENTINEL_HEALTH=

sentinel_dir() { echo "$STATE_DIR/sentinel"; }
snode_dir() { echo "$(sentinel_dir)/$1"; }
data_ports() { echo "$SENTINEL_BASE_PORT" $((SENTINEL_BASE_PORT + 1)); }
sentinel_ports() { echo $((SENTINEL_BASE_PORT + 2)) $((SENTINEL_BASE_PORT + 3)) $((SENTINEL_BASE_PORT + 4)); }
set_ports() { echo $(data_ports) $(sentinel_ports); }
is_sentinel_port() { ((SENTINEL_BASE_PORT > 0 && $1 >= SENTINEL_BASE_PORT + 2 && $1 <= SENTINEL_BASE_PORT + 4)); }

# scli PORT ARGS...: one authenticated redis-cli call to a node of the set
# (as "sentinel" on a sentinel, as "bouncer" on a data node); never hangs.
scli() {
	local port=$1 user=$SENTINEL_MASTER_USER pass=$SENTINEL_MASTER_PASSWORD
	shift
	if is_sentinel_port "$port"; then
		user=$SENTINEL_USER pass=$SENTINEL_PASSWORD
	fi
	bounded 5 redis-cli -h "$REDIS_HOST" -p "$port" --user "$user" --pass "$pass" --no-auth-warning "$@" </dev/null 2>/dev/null | tr -d '\r'
}

install_sentinel() {
	command -v redis-sentinel >/dev/null 2>&1 && return 0
	command -v apt-get >/dev/null 2>&1 ||
		die "redis-sentinel not found and there is no apt-get; install Redis Sentinel (7 or later) and re-run"
	local -a sudo=()
	if ((EUID != 0)); then
		command -v sudo >/dev/null 2>&1 || die "redis-sentinel is not installed and installing it needs root (no sudo found)"
		if [[ -t 0 ]]; then sudo=(sudo); else sudo=(sudo -n); fi
	fi
	log "redis-sentinel not found; installing Debian's redis-sentinel package"
	bounded 300 ${sudo[@]+"${sudo[@]}"} apt-get -q update </dev/null >&2 || die "apt-get update failed"
	bounded 600 ${sudo[@]+"${sudo[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get -q install -y --no-install-recommends \
		-o DPkg::Lock::Timeout=120 redis-sentinel </dev/null >&2 || die "apt-get install redis-sentinel failed"
	hash -r
	command -v redis-sentinel >/dev/null 2>&1 || die "redis-sentinel still not found after installing it"
}

# spid PORT: the live pid of the set's node on PORT, from its pidfile.
spid() {
	local f pid
	f="$(snode_dir "$1")/redis.pid"
	[[ -f $f ]] || return 1
	pid=$(<"$f") || return 1
	is_uint "$pid" && pid_alive "$pid" || return 1
	case "$(ps -o args= -p "$pid" 2>/dev/null)" in *redis*":$1"*) echo "$pid" ;; *) return 1 ;; esac
}

# snode_stop PORT [kill]: SIGTERM (or SIGKILL) the node by its pidfile.
snode_stop() {
	local port=$1 sig=TERM pid
	[[ ${2:-} != kill ]] || sig=KILL
	pid=$(spid "$port") || pid=
	if [[ -n $pid ]]; then
		kill -"$sig" "$pid" 2>/dev/null || true
		if ! pid_gone_within "$pid" 10; then
			kill -KILL "$pid" 2>/dev/null || true
			pid_gone_within "$pid" 5 || die "cannot stop node $port (pid $pid)"
		fi
	fi
	rm -f "$(snode_dir "$port")/redis.pid"
}

# snode_start PORT: start the node from its directory; returns once it
# answers PING as the set's user.
snode_start() {
	local port=$1 dir out deadline=$((SECONDS + 15))
	dir=$(snode_dir "$port")
	[[ -f $dir/redis.conf ]] || die "no $dir/redis.conf; run scripts/redis-sentinel.sh up first"
	if ! spid "$port" >/dev/null; then
		rm -f "$dir/redis.pid"
		local -a cmd=(redis-server "$dir/redis.conf")
		! is_sentinel_port "$port" || cmd=(redis-sentinel "$dir/redis.conf")
		out=$("${cmd[@]}" 2>&1 8>&- 9>&-) || die "${cmd[0]} $port failed to start: $out"
	fi
	until [[ $(scli "$port" PING) == PONG ]]; do
		if ((SECONDS >= deadline)); then
			tail -n 20 "$dir/redis.log" >&2 2>/dev/null || true
			die "node $port did not answer within 15s (port in use by something else?)"
		fi
		sleep 0.05
	done
}

# write_sconf PORT master|replica|sentinel
write_sconf() {
	local port=$1 kind=$2 dir
	dir=$(snode_dir "$port")
	mkdir -p "$dir"
	{
		echo "# Generated by scripts/redis-sentinel.sh; recreated on every fresh start."
		echo "port $port"
		echo "bind $REDIS_HOST"
		echo "protected-mode no"
		echo "daemonize yes"
		echo "dir \"$dir\""
		echo "pidfile \"$dir/redis.pid\""
		echo "logfile \"$dir/redis.log\""
		if [[ $kind == sentinel ]]; then
			echo "user default off"
			echo "user $SENTINEL_USER on >$SENTINEL_PASSWORD ~* &* +@all"
			echo "sentinel sentinel-user $SENTINEL_USER"
			echo "sentinel sentinel-pass $SENTINEL_PASSWORD"
			echo "sentinel monitor $SENTINEL_MASTER_SET $REDIS_HOST $SENTINEL_BASE_PORT 2"
			echo "sentinel auth-user $SENTINEL_MASTER_SET $SENTINEL_MASTER_USER"
			echo "sentinel auth-pass $SENTINEL_MASTER_SET $SENTINEL_MASTER_PASSWORD"
			echo "sentinel down-after-milliseconds $SENTINEL_MASTER_SET $SENTINEL_DOWN_AFTER_MS"
			echo "sentinel failover-timeout $SENTINEL_MASTER_SET 10000"
			echo "sentinel parallel-syncs $SENTINEL_MASTER_SET 1"
		else
			echo "appendonly no"
			echo "save \"\""
			echo "repl-diskless-sync yes"
			echo "repl-diskless-sync-delay 0"
			echo "enable-debug-command local"
			echo "user default off"
			echo "user $SENTINEL_MASTER_USER on >$SENTINEL_MASTER_PASSWORD ~* &* +@all"
			# Both data nodes: after a failover the old master rejoins as a replica.
			echo "masteruser $SENTINEL_MASTER_USER"
			echo "masterauth $SENTINEL_MASTER_PASSWORD"
			[[ $kind == master ]] || echo "replicaof $REDIS_HOST $SENTINEL_BASE_PORT"
		fi
	} >"$dir/redis.conf"
}

# sfield NAME TEXT: the value of NAME in INFO-style TEXT.
sfield() { sed -n "s/^$1:\(.*\)$/\1/p" <<<"$2" | head -n 1; }

# set_healthy: one master with its replica synced, every sentinel naming
# it and seeing the others and a quorum. SENTINEL_HEALTH says why not.
set_healthy() {
	local port info master= addr
	for port in $(data_ports); do
		info=$(scli "$port" INFO replication) || info=
		case $(sfield role "$info") in
		master)
			master=$port
			if [[ $(sfield connected_slaves "$info") != 1 ]]; then
				SENTINEL_HEALTH="master $port has no connected replica"
				return 1
			fi
			;;
		slave)
			if [[ $(sfield master_link_status "$info") != up || $(sfield master_sync_in_progress "$info") != 0 ]]; then
				SENTINEL_HEALTH="replica $port has not synced"
				return 1
			fi
			;;
		*)
			SENTINEL_HEALTH="data node $port does not answer"
			return 1
			;;
		esac
	done
	[[ -n $master ]] || {
		SENTINEL_HEALTH="no master"
		return 1
	}
	for port in $(sentinel_ports); do
		addr=$(scli "$port" SENTINEL GET-MASTER-ADDR-BY-NAME "$SENTINEL_MASTER_SET" | paste -sd: -)
		if [[ $addr != "$REDIS_HOST:$master" ]]; then
			SENTINEL_HEALTH="sentinel $port names master '${addr}', want $REDIS_HOST:$master"
			return 1
		fi
		if [[ $(scli "$port" SENTINEL CKQUORUM "$SENTINEL_MASTER_SET") != "OK 3 usable"* ]]; then
			SENTINEL_HEALTH="sentinel $port: $(scli "$port" SENTINEL CKQUORUM "$SENTINEL_MASTER_SET")"
			return 1
		fi
	done
}

wait_set_healthy() {
	local deadline=$((SECONDS + $1))
	until set_healthy; do
		((SECONDS < deadline)) || return 1
		sleep 0.1
	done
}

sentinel_env_lines() {
	local p out=
	for p in $(sentinel_ports); do out+=${out:+,}$REDIS_HOST:$p; done
	echo "BOUNCER_REDIS_SENTINEL_ADDRS=$out"
	echo "BOUNCER_REDIS_SENTINEL_MASTER_SET=$SENTINEL_MASTER_SET"
	echo "BOUNCER_REDIS_SENTINEL_USER=$SENTINEL_USER"
	echo "BOUNCER_REDIS_SENTINEL_PASSWORD=$SENTINEL_PASSWORD"
	echo "BOUNCER_REDIS_SENTINEL_MASTER_USER=$SENTINEL_MASTER_USER"
	echo "BOUNCER_REDIS_SENTINEL_MASTER_PASSWORD=$SENTINEL_MASTER_PASSWORD"
}

set_down() {
	local port
	for port in $(set_ports); do snode_stop "$port"; done
	rm -rf "$(sentinel_dir)"
}

set_up() {
	local port started=$SECONDS
	install_sentinel
	load_redis_version
	((REDIS_MAJOR >= 7)) || die "need Redis 7 or later; found: $(redis-server --version 2>&1 | head -n 1)"
	if set_healthy; then
		log "sentinel set already up and healthy in $(sentinel_dir)"
		sentinel_env_lines
		return 0
	fi
	log "starting the sentinel set afresh in $(sentinel_dir) ($SENTINEL_HEALTH)"
	set_down
	for port in $(set_ports); do
		if [[ -n $(bounded 5 redis-cli -h "$REDIS_HOST" -p "$port" PING </dev/null 2>/dev/null) ]]; then
			die "port $port is taken by another server; choose other ports with BOUNCER_REDIS_SENTINEL_BASE_PORT"
		fi
	done
	write_sconf "$SENTINEL_BASE_PORT" master
	write_sconf $((SENTINEL_BASE_PORT + 1)) replica
	for port in $(sentinel_ports); do write_sconf "$port" sentinel; done
	for port in $(set_ports); do snode_start "$port"; done
	wait_set_healthy "$WAIT_SECS" || die "sentinel set not healthy after ${WAIT_SECS}s: $SENTINEL_HEALTH (logs: $(sentinel_dir)/<port>/redis.log)"
	log "sentinel set up in $((SECONDS - started))s: master $SENTINEL_BASE_PORT, replica $((SENTINEL_BASE_PORT + 1)), sentinels $(sentinel_ports | tr ' ' ,)"
	sentinel_env_lines
}

need_set_port() {
	is_uint "${1:-}" && [[ -f "$(snode_dir "$1")/redis.conf" ]] ||
		die "no node of the sentinel set on port '${1:-}' in $(sentinel_dir)"
}

main() {
	local cmd=${1:-} port=${2:-} p
	is_uint "$SENTINEL_BASE_PORT" || die "BOUNCER_REDIS_SENTINEL_BASE_PORT=$SENTINEL_BASE_PORT is not a port number"
	if ((SENTINEL_BASE_PORT == 0)) && [[ $cmd == up || $cmd == down ]]; then
		return 0
	fi
	((SENTINEL_BASE_PORT >= 1 && SENTINEL_BASE_PORT + 4 <= 65535)) || die "BOUNCER_REDIS_SENTINEL_BASE_PORT=$SENTINEL_BASE_PORT is out of range"
	if [[ $cmd == down ]]; then
		resolve_state_dir existing
		[[ -d $(sentinel_dir) ]] || return 0
	else
		resolve_state_dir create
		mkdir -p "$(sentinel_dir)"
	fi
	# A lock of its own: redis-up.sh holds its state directory's while it runs this.
	if command -v flock >/dev/null 2>&1; then
		exec 8>"$(sentinel_dir)/.lock" || die "cannot open $(sentinel_dir)/.lock"
		flock -w 120 8 || die "another script has held $(sentinel_dir)/.lock for 120s"
	fi
	case $cmd in
	up) set_up ;;
	down) set_down ;;
	kill)
		need_set_port "$port"
		snode_stop "$port" kill
		;;
	start)
		need_set_port "$port"
		snode_start "$port"
		;;
	master)
		for p in $(sentinel_ports); do
			port=$(scli "$p" SENTINEL GET-MASTER-ADDR-BY-NAME "$SENTINEL_MASTER_SET" | sed -n 2p)
			if [[ -n $port ]]; then
				echo "$port"
				return 0
			fi
		done
		die "no sentinel names a master"
		;;
	failover)
		# A replica that came back from a failover a moment ago is not yet
		# good enough for the sentinels (NOGOODSLAVE): ask again, bounded.
		p=$(sentinel_ports | cut -d' ' -f1)
		local deadline=$((SECONDS + WAIT_SECS)) out
		until out=$(scli "$p" SENTINEL FAILOVER "$SENTINEL_MASTER_SET") && [[ $out == OK ]]; do
			[[ $out == NOGOODSLAVE* && $SECONDS -lt $deadline ]] || die "SENTINEL FAILOVER: $out"
			sleep 0.1
		done
		;;
	wait) wait_set_healthy "$WAIT_SECS" || die "sentinel set not healthy after ${WAIT_SECS}s: $SENTINEL_HEALTH" ;;
	*)
		sed -n '/^#   scripts/,/^#$/p' "${BASH_SOURCE[0]}" | sed 's/^#//' >&2
		exit 2
		;;
	esac
}

main "$@"
