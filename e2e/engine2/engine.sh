#!/usr/bin/env bash
# A second, real Docker engine for the end-to-end tests: the remote engine
# that git sandbox's copy mode talks to, with gVisor (runsc) registered.
#
#   engine.sh start  DIR   start it (idempotent); prints DOCKER_HOST=unix://DIR/docker.sock
#   engine.sh stop   DIR   stop it and remove everything it made (idempotent)
#   engine.sh status DIR   exit 0 and print DOCKER_HOST when it answers, 1 otherwise
#   engine.sh restart DIR  stop its dockerd (SIGTERM, as a service manager
#                          does) and start it again on the same data-root;
#                          needs ENGINE2_DATA_TMPFS=no at start (a tmpfs
#                          data-root goes with the dockerd that mounted it)
#
# Everything the engine owns is its own: config file, socket, data-root,
# exec-root (so dockerd starts its own managed containerd under it), pidfile,
# trust key (so it reports its own engine ID), cgroup parent and a bridge made
# for it with its own /24 in 172.31.0.0/16. --iptables=false keeps it out of
# the main daemon's firewall rules. It never uses --bridge none and never
# shares an exec-root: either would delete or share the main daemon's docker0
# and containerd.
#
# The engine runs in its own mount namespace where /tmp, /var/tmp, /home,
# /root and $TMPDIR are empty (DIR itself stays visible): like a remote
# engine, it cannot see the client's files, so a bind mount of a test's
# worktree finds nothing there. ENGINE2_HIDE replaces that list;
# ENGINE2_HIDE=none turns the isolation off.
#
# ENGINE2_TLS_PORT=PORT also serves the API on tcp://127.0.0.1:PORT with
# mutual TLS (a CA, server and client certificates made for it under DIR):
# start then also prints DOCKER_HOST_TLS=tcp://127.0.0.1:PORT and
# DOCKER_CERT_PATH=DIR/client, for a client with DOCKER_TLS_VERIFY=1.
#
# The data-root is a tmpfs (ENGINE2_DATA_TMPFS, its size limit, default 8g;
# "no" keeps it on disk under DIR): loading images is faster, and stopping
# does not wait for thousands of files to be deleted.
#
# ENGINE2_IMAGES lists images copied from the current daemon (docker save |
# docker load); default git-sandbox-test-base:bookworm, empty for none.
# ENGINE2_OWNER_PID, when set, starts a watchdog that stops the engine once
# that process is gone (a test binary killed by its timeout still cleans up).
#
# Needs root (ip link, dockerd). Installs Debian's runsc when root and apt are
# there and it is missing; without runsc the engine starts without it.
set -euo pipefail

usage() {
	echo "usage: $0 start|stop|status|restart DIR" >&2
	exit 2
}
[ $# -eq 2 ] || usage
cmd=$1
case $2 in
"" | / ) echo "error: engine2: refusing directory '$2'" >&2; exit 2 ;;
esac
dir=$(realpath -m -- "$2")
self=$(realpath -- "$0")

# Names derived from DIR alone, so stop finds them even when DIR is half gone.
hash=$(printf '%s' "$dir" | sha256sum | cut -c1-8)
name=gse2-$hash # bridge and cgroup parent; at most 15 characters
sock=$dir/docker.sock
host=unix://$sock
pidfile=$dir/docker.pid
state=$dir/engine.env
lockfile=/run/lock/git-sandbox-engine2.lock

log() { echo "engine2: $*" >&2; }
die() {
	echo "error: engine2: $*" >&2
	exit 1
}

answers() { docker -H "$host" version >/dev/null 2>&1; }

# engine_pid: the pid in the pidfile if that process is this engine's
# dockerd (its command line names the pidfile), not a reused pid.
engine_pid() {
	local pid
	pid=$(cat "$pidfile" 2>/dev/null) || return 0
	[ -n "$pid" ] || return 0
	if tr '\0' '\n' 2>/dev/null <"/proc/$pid/cmdline" | grep -qxF -- "$pidfile"; then
		echo "$pid"
	fi
}

alive() { [ -n "$(engine_pid)" ]; }

need_root() {
	[ "$(id -u)" = 0 ] || die "needs root (it creates a bridge with ip link and starts dockerd); run it as root or with sudo"
}

# free_subnet START [PREFIX]: the first N from START on (wrapping at 256)
# such that PREFIX.N.0/24 (default 172.31) overlaps no IPv4 route or
# address on this host.
free_subnet() {
	{
		ip -4 route show table all | awk '{print ($1 == "local" || $1 == "broadcast" || $1 == "unicast") ? $2 : $1}'
		ip -4 -o addr show | awk '{print $4}'
	} | awk -v start="$1" -v prefix="${2:-172.31}" '
		function ip(s, a) { split(s, a, "."); return ((a[1] * 256 + a[2]) * 256 + a[3]) * 256 + a[4] }
		$0 ~ /^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+(\/[0-9]+)?$/ {
			n = split($0, p, "/"); len = (n == 2) ? p[2] + 0 : 32
			if (len == 0) next # the default route
			size = 2 ^ (32 - len); lo = int(ip(p[1]) / size) * size
			los[NR] = lo; his[NR] = lo + size - 1
		}
		END {
			for (i = 0; i < 256; i++) {
				n = (start + i) % 256; lo = ip(prefix "." n ".0"); hi = lo + 255; free = 1
				for (k in los) if (lo <= his[k] && los[k] <= hi) { free = 0; break }
				if (free) { print n; exit }
			}
		}'
}

# make_bridge: the engine's own bridge with a free 172.31.N.0/24, chosen
# under a lock so two engines started at once do not pick the same one. When
# 172.31.0.0/16 is taken whole (the main daemon's default address pools hand
# out 172.17-172.31 /16s to networks of its own), 10.231.N.0/24.
make_bridge() {
	if ip link show "$name" >/dev/null 2>&1; then
		return 0
	fi
	mkdir -p "$(dirname "$lockfile")"
	exec 9>"$lockfile"
	flock 9
	local n subnet prefix
	for prefix in 172.31 10.231; do
		n=$(free_subnet $((16#${hash:0:2})) "$prefix")
		[ -z "$n" ] || break
	done
	if [ -z "$n" ]; then
		flock -u 9
		die "no free /24 in 172.31.0.0/16 or 10.231.0.0/16 for the bridge"
	fi
	subnet=$prefix.$n
	ip link add "$name" type bridge
	ip addr add "$subnet.1/24" dev "$name"
	ip link set "$name" up
	flock -u 9
	echo "BRIDGE_SUBNET=$subnet.0/24" >>"$state"
}

ensure_runsc() {
	command -v runsc >/dev/null 2>&1 && return 0
	if command -v apt-get >/dev/null 2>&1; then
		log "installing runsc (gVisor)"
		apt-get install -y -qq runsc >/dev/null 2>&1 ||
			{ apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq runsc >/dev/null 2>&1; } ||
			log "could not install runsc; the engine starts without it"
	fi
	command -v runsc >/dev/null 2>&1
}

# uplink_mtu: the MTU of the interface the default route leaves by.
uplink_mtu() {
	local dev
	dev=$(ip -4 route show default 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "dev") {print $(i+1); exit}}')
	cat "/sys/class/net/${dev:-none}/mtu" 2>/dev/null || echo 1500
}

write_config() {
	local runtimes=
	if ensure_runsc; then
		# --network=none: gVisor's own network stack is not used; sandboxes
		# run with --network none. ptrace works where KVM is not available.
		runtimes=$(printf ',\n  "runtimes": {"runsc": {"path": "%s", "runtimeArgs": ["--platform=ptrace", "--network=none"]}}' "$(command -v runsc)")
	fi
	cat >"$dir/daemon.json" <<EOF
{
  "deprecated-key-path": "$dir/key.json",
  "cgroup-parent": "/$name",
  "shutdown-timeout": 5,
  "log-driver": "json-file",
  "log-opts": {"max-size": "10m", "max-file": "2"},
  "mtu": $(uplink_mtu)$runtimes
}
EOF
}

# make_tls: a CA, a server certificate for 127.0.0.1 and a client
# certificate, in DIR/tls and DIR/client (the layout DOCKER_CERT_PATH wants).
make_tls() {
	command -v openssl >/dev/null 2>&1 || die "openssl is missing (needed for ENGINE2_TLS_PORT)"
	local t=$dir/tls c=$dir/client
	mkdir -p "$t" "$c"
	chmod 0700 "$t" "$c"
	(
		cd "$t"
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
			-subj "/CN=engine2 test CA" -keyout ca-key.pem -out ca.pem
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
			-subj "/CN=127.0.0.1" -keyout server-key.pem -out server.csr
		printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >server.ext
		openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
			-days 2 -extfile server.ext -out server-cert.pem
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
			-subj "/CN=engine2 test client" -keyout "$c/key.pem" -out client.csr
		printf 'extendedKeyUsage=clientAuth\n' >client.ext
		openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
			-days 2 -extfile client.ext -out "$c/cert.pem"
		cp ca.pem "$c/ca.pem"
	) >"$dir/tls.log" 2>&1 || {
		cat "$dir/tls.log" >&2
		die "could not make the TLS certificates"
	}
}

hidden_paths() {
	local list=${ENGINE2_HIDE-/tmp /var/tmp /home /root ${TMPDIR:-}} p
	[ "$list" = none ] && return 0
	for p in $list; do
		p=$(realpath -e -- "$p" 2>/dev/null) || continue
		if [ -d "$p" ] && [ "$p" != / ]; then
			echo "$p"
		fi
	done | sort -u
}

launch() {
	local args=(dockerd --config-file "$dir/daemon.json" -H "$host"
		--data-root "$dir/data" --exec-root "$dir/exec" --pidfile "$pidfile"
		--bridge "$name" --iptables=false --ip-masq=false)
	if [ -n "${ENGINE2_TLS_PORT:-}" ]; then
		make_tls
		args+=(-H "tcp://127.0.0.1:$ENGINE2_TLS_PORT" --tlsverify --tlscacert "$dir/tls/ca.pem"
			--tlscert "$dir/tls/server-cert.pem" --tlskey "$dir/tls/server-key.pem")
		echo "TLS_PORT=$ENGINE2_TLS_PORT" >>"$state"
	fi
	local hide data=${ENGINE2_DATA_TMPFS-8g}
	[ "$data" != no ] || data=
	[ -n "$data" ] || echo "DATA=disk" >>"$state"
	mkdir -p "$dir/data"
	hide=$(hidden_paths | tr '\n' ' ')
	if [ -z "$hide" ]; then
		[ -z "$data" ] || mount -t tmpfs -o "size=$data,mode=0710" engine2-data "$dir/data"
		setsid "${args[@]}" >"$dir/dockerd.log" 2>&1 </dev/null &
		launched=$!
		echo "ISOLATED=no" >>"$state"
		return 0
	fi
	# In a private mount namespace: set DIR aside, cover the hidden paths
	# with empty tmpfs, put DIR back, mount the data-root's tmpfs, start
	# dockerd. Nothing mounted there (the engine's own layers included)
	# shows on the host, and all of it goes with the namespace.
	local stash
	stash=$(mktemp -d "/run/$name.stash.XXXXXX")
	echo "STASH=$stash" >>"$state"
	echo "ISOLATED=$hide" >>"$state"
	# shellcheck disable=SC2016
	setsid unshare --mount --propagation private sh -euc '
		dir=$1 stash=$2 hide=$3 data=$4; shift 4
		mount --rbind "$dir" "$stash"
		for p in $hide; do mount -t tmpfs -o mode=1777,size=256m engine2-hidden "$p"; done
		mkdir -p "$dir"
		mount --rbind "$stash" "$dir"
		umount -l "$stash"
		[ -z "$data" ] || mount -t tmpfs -o "size=$data,mode=0710" engine2-data "$dir/data"
		exec "$@"
	' engine2 "$dir" "$stash" "$hide" "$data" "${args[@]}" >"$dir/dockerd.log" 2>&1 </dev/null &
	launched=$!
}

load_images() {
	local img
	for img in ${ENGINE2_IMAGES-git-sandbox-test-base:bookworm}; do
		if docker -H "$host" image inspect "$img" >/dev/null 2>&1; then
			continue
		fi
		docker image inspect "$img" >/dev/null 2>&1 ||
			die "image $img is not in the main daemon (make test-image builds the test base)"
		log "loading $img"
		docker save "$img" | docker -H "$host" load >/dev/null ||
			die "docker save $img | docker load into the engine failed"
	done
}

start_watchdog() {
	local owner=${ENGINE2_OWNER_PID:-}
	[ -n "$owner" ] || return 0
	# shellcheck disable=SC2016
	setsid sh -c '
		while kill -0 "$1" 2>/dev/null && [ -e "$2/docker.pid" ]; do sleep 1; done
		[ -e "$2/docker.pid" ] && exec "$3" stop "$2"
	' engine2-watchdog "$owner" "$dir" "$self" >/dev/null 2>&1 </dev/null &
	echo $! >"$dir/watchdog.pid"
}

start() {
	need_root
	command -v dockerd >/dev/null 2>&1 || die "dockerd is missing (Debian package docker.io)"
	if alive && answers; then
		load_images
		print_hosts
		return 0
	fi
	if [ -e "$dir" ] || ip link show "$name" >/dev/null 2>&1; then
		stop quiet # left over from a run that did not stop it
	fi
	[ ${#sock} -lt 90 ] || die "directory path too long for the engine's sockets: $dir"
	mkdir -p "$dir"
	chmod 0711 "$dir"
	echo "BRIDGE=$name" >"$state"
	make_bridge
	write_config
	local i launched=
	launch
	for i in $(seq 1 300); do
		answers && break
		kill -0 "$launched" 2>/dev/null || break
		sleep 0.1
	done
	if ! answers; then
		tail -n 30 "$dir/dockerd.log" >&2 || true
		stop quiet
		die "dockerd did not come up (log above)"
	fi
	start_watchdog
	load_images
	print_hosts
}

# procs_of_engine: processes still left from this engine: its dockerd,
# containerd, shims and runsc processes all name DIR on their command line.
# (Its containers' own processes are children of the shims.) This script's
# own session is not the engine's (the engine runs in a session of its own).
procs_of_engine() {
	local p s mine
	mine=$(session_of $$)
	# The pattern comes on stdin so that grep's own command line does not
	# name DIR.
	# shellcheck disable=SC2062
	printf '%s\n' "$dir/" | grep -lsF -f - /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3 |
		while read -r p; do
			s=$(session_of "$p")
			if [ -n "$s" ] && [ "$s" != "$mine" ]; then echo "$p"; fi
		done
}

# session_of PID: its session id (field 6 of /proc/PID/stat, counted after
# the command name, which may hold spaces).
session_of() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
	stat=${stat##*) }
	# shellcheck disable=SC2086
	set -- $stat
	echo "$4"
}

# cgroup_procs: the processes in the engine's cgroups (its cgroup parent).
cgroup_procs() {
	local d
	for d in /sys/fs/cgroup/*/"$name" /sys/fs/cgroup/"$name"; do
		[ -d "$d" ] || continue
		find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null || true
	done | sort -u
}

# engine_left TENTHS: the engine's processes still there after waiting up
# to TENTHS tenths of a second for them to end.
engine_left() {
	local i left
	for i in $(seq 1 "$1"); do
		left=$(procs_of_engine)
		[ -n "$left" ] || return 0
		sleep 0.1
	done
	echo "$left"
}

stop() {
	local quiet=${1:-} pid i left
	need_root
	if [ -e "$dir" ]; then
		pid=$(cat "$dir/watchdog.pid" 2>/dev/null || true)
		if [ -n "$pid" ] && [ "$pid" != $$ ] &&
			tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "engine2-watchdog"; then
			kill "$pid" 2>/dev/null || true
		fi
		pid=$(engine_pid)
		if [ -n "$pid" ]; then
			kill -TERM "$pid"
			# dockerd stops its containers (shutdown-timeout: 5 s) and its containerd.
			for i in $(seq 1 400); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.1
			done
			kill -KILL "$pid" 2>/dev/null || true
		fi
		# Whatever outlived dockerd, found by its paths, never by a name:
		# given 2 s to end on its own (containerd follows dockerd), then
		# SIGTERM and 3 s, then SIGKILL.
		left=$(engine_left 20)
		# shellcheck disable=SC2086
		[ -z "$left" ] || kill -TERM $left 2>/dev/null || true
		left=$(engine_left 30)
		# shellcheck disable=SC2086
		[ -z "$left" ] || kill -KILL $left 2>/dev/null || true
		# Mounts left on the host (only without isolation, after a hard kill).
		awk -v d="$dir/" 'index($5"/", d) == 1 {print $5}' /proc/self/mountinfo | sort -r |
			while read -r m; do umount -l "$m" 2>/dev/null || true; done
	fi
	if ip link show "$name" >/dev/null 2>&1; then
		ip link del "$name"
	fi
	# The engine's cgroups: a container process whose shim was killed
	# (dockerd killed hard) lives on, reparented, in its container's cgroup
	# under the engine's own cgroup parent; that finds it exactly.
	left=$(cgroup_procs)
	if [ -n "$left" ]; then
		# shellcheck disable=SC2086
		kill -KILL $left 2>/dev/null || true
		for i in $(seq 1 30); do
			[ -n "$(cgroup_procs)" ] || break
			sleep 0.1
		done
	fi
	for i in /sys/fs/cgroup/*/"$name" /sys/fs/cgroup/"$name"; do
		[ -d "$i" ] || continue
		find "$i" -depth -type d -exec rmdir {} + 2>/dev/null || true
	done
	for i in /run/"$name".stash.*; do
		if [ -d "$i" ]; then rmdir "$i" 2>/dev/null || true; fi
	done
	rm -rf "$dir"
	[ -n "$quiet" ] || log "stopped"
}

# print_hosts: what a client needs to reach the engine.
print_hosts() {
	local port
	echo "DOCKER_HOST=$host"
	port=$(sed -n 's/^TLS_PORT=//p' "$state" 2>/dev/null || true)
	if [ -n "$port" ]; then
		echo "DOCKER_HOST_TLS=tcp://127.0.0.1:$port"
		echo "DOCKER_CERT_PATH=$dir/client"
	fi
}

restart() {
	local pid i launched=
	need_root
	pid=$(engine_pid)
	[ -n "$pid" ] || die "not running ($dir)"
	grep -q '^DATA=disk$' "$state" || die "started with its data-root on a tmpfs, which would not survive; start it with ENGINE2_DATA_TMPFS=no"
	kill -TERM "$pid"
	for i in $(seq 1 400); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$pid" 2>/dev/null && die "dockerd $pid did not stop"
	ENGINE2_DATA_TMPFS=no
	launch
	for i in $(seq 1 300); do
		answers && break
		kill -0 "$launched" 2>/dev/null || break
		sleep 0.1
	done
	answers || die "dockerd did not come up again (log: $dir/dockerd.log)"
	log "restarted"
}

status() {
	if alive && answers; then
		print_hosts
		return 0
	fi
	echo "engine2: not running ($dir)" >&2
	return 1
}

case $cmd in
start) start ;;
stop) stop ;;
restart) restart ;;
status) status ;;
*) usage ;;
esac; exit # on esac's line: bash reads a script as it runs it
