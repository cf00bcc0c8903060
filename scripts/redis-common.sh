# shellcheck shell=bash
# Variables set here are read by the scripts that source this file:
# shellcheck disable=SC2034
#
# Shared by redis-up.sh, redis-down.sh and redis-node.sh; source it, don't run
# it. Everything the Redis store tests need lives in one state directory:
#
#   $BOUNCER_REDIS_DIR            (default: .redis under the repository root)
#     <port>/redis.conf           one directory per server, named by its port
#     <port>/redis.pid, redis.log
#     <port>/nodes.conf           cluster nodes only
#     env                         the addresses, as `export NAME=value` lines
#
# Environment:
#   BOUNCER_REDIS_DIR                state directory
#   BOUNCER_REDIS_PORT               standalone server port      (16379)
#   BOUNCER_REDIS_CLUSTER_BASE_PORT  first of 6 cluster ports    (17000)
#   BOUNCER_REDIS_WAIT_SECS          bound on every health wait  (30)

REDIS_SCRIPTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REDIS_REPO_ROOT=$(cd "$REDIS_SCRIPTS_DIR/.." && pwd -P)

REDIS_HOST=127.0.0.1
STANDALONE_PORT=${BOUNCER_REDIS_PORT:-16379}
CLUSTER_BASE_PORT=${BOUNCER_REDIS_CLUSTER_BASE_PORT:-17000}
CLUSTER_SIZE=6 # 3 masters + 3 replicas
CLUSTER_NODE_TIMEOUT_MS=2000
WAIT_SECS=${BOUNCER_REDIS_WAIT_SECS:-30}
STATE_DIR=
HEALTH_REASON=

log() { printf 'redis: %s\n' "$*" >&2; }
die() {
	printf 'redis: error: %s\n' "$*" >&2
	exit 1
}

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

validate_settings() {
	is_uint "$STANDALONE_PORT" || die "BOUNCER_REDIS_PORT=$STANDALONE_PORT is not a port number"
	is_uint "$CLUSTER_BASE_PORT" || die "BOUNCER_REDIS_CLUSTER_BASE_PORT=$CLUSTER_BASE_PORT is not a port number"
	if ! is_uint "$WAIT_SECS" || ((WAIT_SECS == 0)); then
		die "BOUNCER_REDIS_WAIT_SECS=$WAIT_SECS is not a positive number"
	fi
	((STANDALONE_PORT >= 1 && STANDALONE_PORT <= 65535)) || die "BOUNCER_REDIS_PORT=$STANDALONE_PORT is out of range"
	# Each cluster node also listens on its port + 10000 (the cluster bus).
	local last=$((CLUSTER_BASE_PORT + CLUSTER_SIZE - 1))
	((CLUSTER_BASE_PORT >= 1 && last + 10000 <= 65535)) ||
		die "BOUNCER_REDIS_CLUSTER_BASE_PORT=$CLUSTER_BASE_PORT: cluster ports $CLUSTER_BASE_PORT-$last and bus ports +10000 must fit below 65536"
	if ((STANDALONE_PORT >= CLUSTER_BASE_PORT && STANDALONE_PORT <= last)) ||
		((STANDALONE_PORT >= CLUSTER_BASE_PORT + 10000 && STANDALONE_PORT <= last + 10000)); then
		die "BOUNCER_REDIS_PORT=$STANDALONE_PORT collides with the cluster's ports ($CLUSTER_BASE_PORT-$last, bus +10000)"
	fi
}

cluster_ports() {
	local i
	for ((i = 0; i < CLUSTER_SIZE; i++)); do
		echo $((CLUSTER_BASE_PORT + i))
	done
}

all_ports() {
	echo "$STANDALONE_PORT"
	cluster_ports
}

cluster_addrs() {
	local p out=
	for p in $(cluster_ports); do
		out+=${out:+,}$REDIS_HOST:$p
	done
	echo "$out"
}

# resolve_state_dir create|existing: sets STATE_DIR to an absolute,
# symlink-free path, so that every way of naming the directory finds the same
# servers (they are recognized by the redis.conf path they were started with).
resolve_state_dir() {
	local d=${BOUNCER_REDIS_DIR:-$REDIS_REPO_ROOT/.redis}
	[[ $d == /* ]] || d=$PWD/$d
	if [[ $1 == create ]]; then
		mkdir -p "$d" || die "cannot create state directory $d"
	fi
	if [[ -d $d ]]; then
		STATE_DIR=$(cd "$d" && pwd -P)
	else
		STATE_DIR=$d
	fi
	# The path goes into redis.conf between double quotes.
	[[ $STATE_DIR != *[\"\\$'\n']* ]] || die "state directory path must not contain quotes, backslashes or newlines: $STATE_DIR"
}

node_dir() { echo "$STATE_DIR/$1"; }

# Ports of every node that has a directory in STATE_DIR (this run's settings
# or an earlier run's).
ports_in_state_dir() {
	local conf port
	[[ -d $STATE_DIR ]] || return 0
	for conf in "$STATE_DIR"/*/redis.conf; do
		[[ -f $conf ]] || continue
		port=$(basename "$(dirname "$conf")")
		if is_uint "$port"; then echo "$port"; fi
	done
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

# rcli PORT ARGS...: one redis-cli call, never hangs, CRs stripped.
rcli() {
	local port=$1
	shift
	bounded 5 redis-cli -h "$REDIS_HOST" -p "$port" "$@" </dev/null 2>/dev/null | tr -d '\r'
}

# load_redis_version: sets REDIS_MAJOR (0 if unknown) from redis-server.
REDIS_MAJOR=0
load_redis_version() {
	REDIS_MAJOR=$(redis-server --version 2>/dev/null | sed -n 's/.* v=\([0-9][0-9]*\)\..*/\1/p')
	REDIS_MAJOR=${REDIS_MAJOR:-0}
}

# node_query PORT [COMMAND...]: INFO server and the given commands (INFO
# style replies) in one redis-cli call -- health checks run often, and
# process start-up dominates their cost. Sets Q_OUT (the output; empty if
# nothing usable answered) for qfield and node_state.
Q_OUT=
node_query() {
	local port=$1
	shift
	Q_OUT=$(printf '%s\n' "INFO server" "$@" |
		bounded 5 redis-cli -h "$REDIS_HOST" -p "$port" 2>/dev/null) || true
	[[ $Q_OUT == *redis_version:* ]] || Q_OUT=
}

# qfield NAME: sets QV to the value of NAME in the last node_query's
# INFO-style output (no subshells: health checks run in tight loops).
QV=
qfield() {
	local nl=$'\n' all
	all=$nl${Q_OUT//$'\r'/}
	QV=
	[[ $all == *"$nl$1:"* ]] || return 0
	QV=${all#*"$nl$1:"}
	QV=${QV%%"$nl"*}
}

# node_state PORT (after node_query PORT): sets NODE_STATE to "ours" (a
# server from this state directory answers), "down" (nothing usable answers)
# or "foreign <config file>" (someone else's server). A server is ours if it
# was started with this state directory's redis.conf for PORT; unlike its
# `dir`, that still holds if the directory was deleted under it.
NODE_STATE=
node_state() {
	if [[ -z $Q_OUT ]]; then
		NODE_STATE=down
		return
	fi
	qfield config_file
	if [[ $QV == "$STATE_DIR/$1/redis.conf" ]]; then
		NODE_STATE=ours
	else
		NODE_STATE="foreign ${QV:-(no config file)}"
	fi
}

# node_intact PORT (after node_query PORT, state ours): the server's pidfile
# names it, i.e. its directory is the one on disk and not a deleted one it
# still runs in (where a cluster node could not even save nodes.conf).
node_intact() {
	local pid=
	qfield process_id
	read -r pid 2>/dev/null <"$STATE_DIR/$1/redis.pid" || true
	[[ -n $QV && $pid == "$QV" ]]
}

# node_probe PORT: prints the node's state (see node_state).
node_probe() {
	node_query "$1"
	node_state "$1"
	echo "$NODE_STATE"
}

# node_pid PORT: the live redis-server pid from the node's pidfile, if any.
node_pid() {
	local port=$1 f pid
	f="$(node_dir "$port")/redis.pid"
	[[ -f $f ]] || return 1
	pid=$(<"$f") || return 1
	is_uint "$pid" || return 1
	pid_alive "$pid" || return 1
	# Guard against a recycled pid: it must be the redis-server of this port
	# (whose process title reads "redis-server 127.0.0.1:PORT ...").
	case "$(ps -o args= -p "$pid" 2>/dev/null)" in *redis*":$port"*) ;; *) return 1 ;; esac
	echo "$pid"
}

# pid_alive PID: the process exists and is not a zombie. A daemonized
# server's parent is PID 1, and where PID 1 is slow to reap (or never reaps,
# as in some containers) an exited server stays a zombie that kill -0 finds.
pid_alive() {
	local stat
	kill -0 "$1" 2>/dev/null || return 1
	if [[ -r /proc/$1/stat ]]; then
		read -r stat <"/proc/$1/stat" || return 1
		stat=${stat##*) }
		[[ ${stat%% *} != Z ]]
	else
		stat=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
		[[ -n $stat && $stat != Z* ]]
	fi
}

pid_gone_within() { # PID SECS
	local pid=$1 deadline=$((SECONDS + $2))
	while pid_alive "$pid"; do
		((SECONDS < deadline)) || return 1
		sleep 0.1
	done
}

# stop_node PORT [kill]: stop this state directory's server on PORT, if it
# runs: SHUTDOWN NOSAVE, then SIGTERM/SIGKILL by pidfile. With "kill", skip
# the shutdown and SIGKILL right away (a crash). Never touches a foreign server.
stop_node() {
	local port=$1 mode=${2:-} pid state
	local -a now=()
	pid=$(node_pid "$port") || pid=
	state=$(node_probe "$port")
	if [[ -z $pid && $state != ours ]]; then
		rm -f "$(node_dir "$port")/redis.pid" # stale, if there at all
		return 0
	fi
	if [[ $mode == kill ]]; then
		[[ -n $pid ]] || die "node $port runs but has no usable pidfile; cannot SIGKILL it"
		kill -KILL "$pid" 2>/dev/null || true
	elif [[ $state == ours ]]; then
		# Redis 7 would otherwise wait up to shutdown-timeout for lagging replicas.
		((REDIS_MAJOR < 7)) || now=(now)
		rcli "$port" shutdown nosave ${now[@]+"${now[@]}"} >/dev/null || true
	fi
	if [[ -n $pid ]] && ! pid_gone_within "$pid" 10; then
		log "node $port (pid $pid) ignored SHUTDOWN; sending SIGTERM"
		kill -TERM "$pid" 2>/dev/null || true
		if ! pid_gone_within "$pid" 5; then
			log "node $port (pid $pid) ignored SIGTERM; sending SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
			pid_gone_within "$pid" 5 || die "cannot stop node $port (pid $pid)"
		fi
	fi
	local deadline=$((SECONDS + 10))
	while [[ $(node_probe "$port") == ours ]]; do
		((SECONDS < deadline)) || die "node $port still answers after shutdown (no usable pidfile to kill it by)"
		sleep 0.1
	done
	rm -f "$(node_dir "$port")/redis.pid"
}

# launch_node PORT: start the server from its existing directory; returns
# once redis-server has daemonized. wait_node_up waits until it answers.
launch_node() {
	local port=$1 dir conf out state
	dir=$(node_dir "$port")
	conf=$dir/redis.conf
	[[ -f $conf ]] || die "no $conf; run scripts/redis-up.sh first"
	state=$(node_probe "$port")
	case $state in
	down) ;;
	ours) return 0 ;;
	*) die "port $port is taken by another Redis server (config ${state#foreign }); stop it or choose other ports (BOUNCER_REDIS_PORT, BOUNCER_REDIS_CLUSTER_BASE_PORT)" ;;
	esac
	if node_pid "$port" >/dev/null; then
		die "node $port has a live process but does not answer; run scripts/redis-down.sh"
	fi
	rm -f "$dir/redis.pid"
	# Close the lock descriptor: the daemon must not inherit (and hold) it.
	if ! out=$(redis-server "$conf" 2>&1 9>&-); then
		die "redis-server $port failed to start: $out"
	fi
}

wait_node_up() {
	local port=$1 deadline=$((SECONDS + 15))
	until [[ $(node_probe "$port") == ours ]]; do
		if ((SECONDS >= deadline)); then
			log "node $port did not come up within 15s; last lines of $(node_dir "$port")/redis.log:"
			tail -n 20 "$(node_dir "$port")/redis.log" >&2 2>/dev/null || true
			die "node $port failed to start (port in use by something else?)"
		fi
		sleep 0.05
	done
}

start_node() {
	launch_node "$1"
	wait_node_up "$1"
}

# write_conf PORT standalone|cluster
write_conf() {
	local port=$1 kind=$2 dir
	dir=$(node_dir "$port")
	mkdir -p "$dir"
	{
		echo "# Generated by scripts/redis-up.sh; recreated on every fresh start."
		echo "port $port"
		echo "bind $REDIS_HOST"
		echo "protected-mode no"
		echo "daemonize yes"
		echo "dir \"$dir\""
		echo "pidfile \"$dir/redis.pid\""
		echo "logfile \"$dir/redis.log\""
		echo "appendonly no"
		echo "save \"\""
		# Replicas get their first copy at once, not after the default 5s delay.
		echo "repl-diskless-sync yes"
		echo "repl-diskless-sync-delay 0"
		if ((REDIS_MAJOR >= 7)); then
			# Lets failure tests use DEBUG SLEEP etc. over loopback.
			echo "enable-debug-command local"
		fi
		if [[ $kind == cluster ]]; then
			echo "cluster-enabled yes"
			echo "cluster-config-file nodes.conf"
			echo "cluster-node-timeout $CLUSTER_NODE_TIMEOUT_MS"
			# A replica may take over however long it was cut off from its
			# master (tests stop nodes for arbitrary times).
			echo "cluster-replica-validity-factor 0"
			# The other masters keep serving their slots while one is down
			# (Redis's default, yes, refuses every query until failover):
			# the setting docs/redis.md recommends for a rate limiter.
			echo "cluster-require-full-coverage no"
		fi
	} >"$dir/redis.conf"
}

standalone_healthy() {
	node_query "$STANDALONE_PORT"
	node_state "$STANDALONE_PORT"
	if [[ $NODE_STATE != ours ]]; then
		HEALTH_REASON="standalone $STANDALONE_PORT is $NODE_STATE"
		return 1
	fi
	if ! node_intact "$STANDALONE_PORT"; then
		HEALTH_REASON="standalone $STANDALONE_PORT runs without its pidfile"
		return 1
	fi
}

# cluster_healthy: every node is ours and sees a complete cluster, there are
# 3 masters with one synced replica each. On failure HEALTH_REASON says why.
cluster_healthy() {
	local port role masters=0 replicas=0 k want link
	for port in $(cluster_ports); do
		node_query "$port" "CLUSTER INFO" "INFO replication"
		node_state "$port"
		if [[ $NODE_STATE != ours ]]; then
			HEALTH_REASON="cluster node $port is $NODE_STATE"
			return 1
		fi
		if ! node_intact "$port"; then
			HEALTH_REASON="cluster node $port runs without its pidfile"
			return 1
		fi
		for want in cluster_state:ok cluster_slots_assigned:16384 cluster_slots_ok:16384 \
			cluster_known_nodes:$CLUSTER_SIZE cluster_size:$((CLUSTER_SIZE / 2)); do
			k=${want%%:*}
			qfield "$k"
			if [[ $QV != "${want#*:}" ]]; then
				HEALTH_REASON="node $port: $k is '$QV', want '${want#*:}'"
				return 1
			fi
		done
		qfield role
		role=$QV
		case $role in
		master)
			masters=$((masters + 1))
			qfield connected_slaves
			if [[ $QV != 1 ]]; then
				HEALTH_REASON="master $port has ${QV:-?} connected replicas, want 1"
				return 1
			fi
			;;
		slave)
			replicas=$((replicas + 1))
			qfield master_link_status
			link=$QV
			qfield master_sync_in_progress
			if [[ $link != up || $QV != 0 ]]; then
				HEALTH_REASON="replica $port has not synced with its master yet"
				return 1
			fi
			;;
		*)
			HEALTH_REASON="node $port: unknown role '$role'"
			return 1
			;;
		esac
	done
	if ((masters != CLUSTER_SIZE / 2 || replicas != CLUSTER_SIZE / 2)); then
		HEALTH_REASON="cluster has $masters masters and $replicas replicas, want $((CLUSTER_SIZE / 2)) of each"
		return 1
	fi
}

all_healthy() { standalone_healthy && cluster_healthy; }

# wait_healthy SECS: poll all_healthy until it holds or SECS pass.
wait_healthy() {
	local deadline=$((SECONDS + $1))
	until all_healthy; do
		((SECONDS < deadline)) || return 1
		sleep 0.1
	done
}

env_lines() {
	echo "BOUNCER_REDIS_ADDR=$REDIS_HOST:$STANDALONE_PORT"
	echo "BOUNCER_REDIS_CLUSTER_ADDRS=$(cluster_addrs)"
	echo "BOUNCER_REDIS_DIR=$STATE_DIR"
}

# acquire_lock: serialize the scripts on one state directory (fd 9).
acquire_lock() {
	command -v flock >/dev/null 2>&1 || return 0
	exec 9>"$STATE_DIR/.lock" || die "cannot open $STATE_DIR/.lock"
	flock -w 120 9 || die "another redis script has held $STATE_DIR/.lock for 120s"
}
