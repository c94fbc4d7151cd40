#!/usr/bin/env bash
# A single-node Kubernetes cluster for the end-to-end tests, built from
# source and run on this machine only.
#
#   cluster.sh build              build the binaries once (cached by version)
#   cluster.sh start              build if needed, start, wait until it runs Pods
#   cluster.sh stop               tear everything down (also after a crashed run)
#   cluster.sh status             say whether it runs; exit 0 only if it does
#   cluster.sh env                print the env file of a running cluster
#   cluster.sh load-image TAG...  copy images from the Docker daemon into it
#   cluster.sh remove-image TAG... remove images load-image copied in
#   cluster.sh restart-containerd stop the cluster's containerd and start it again
#
# No registry is reachable, so everything comes from source through the Go
# module proxy, and from Debian packages: kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet and kubectl from
# k8s.io/kubernetes, etcd from go.etcd.io/etcd, containerd and the CNI plugins
# from Debian, and a pause image built here. The binaries are cached under
# ${XDG_CACHE_HOME:-~/.cache}/git-sandbox-test/k8s/<version>/.
#
# NetworkPolicy: the bridge plugin enforces none, so kube-router's network
# policy controller (github.com/cloudnativelabs/kube-router/v2, built from
# its module and cached beside the Kubernetes binaries, by its own version)
# runs beside it as the enforcer, and nothing else of kube-router: no
# routing, no service proxy. It programs iptables and ipset; it is given
# the legacy iptables commands, so that its rules live in tables of their
# own and its rewrites of the whole filter table (iptables-restore) never
# touch the rules Docker keeps in the nftables ones. It programs the rules
# of a new Pod within about a second, usually before its container starts.
#
# Storage: the StorageClass git-sandbox-test (the default) is served by a
# small provisioner of this repository (e2e/k8s/provisioner, built at start
# into the run directory, seconds with a warm Go cache): a claim gets a
# directory under <run>/volumes that every uid may write, as a hostPath
# volume, removed with the volume when the claim is deleted. A RuntimeClass
# runc (handler runc) lets Pods name a runtime class.
#
# The cluster keeps to itself: etcd and the API server listen on 127.0.0.1
# only, with client certificates; the kubelet on the address of the
# cluster's own bridge; containerd is a separate instance with its own
# config, root, state and socket (Docker's is never touched); pods get their
# own bridge, subnet and cgroup root. Every process started is recorded in a
# PID file and every change to the host in the run directory, so `stop`
# undoes all of it, also after a crash.
#
# GIT_SANDBOX_K8S_OWNER_PID=PID makes start leave a watchdog that stops the
# cluster when that process ends (the e2e tests pass their own PID).
#
# Settings (environment; start records them, stop reads the record):
#   GIT_SANDBOX_K8S_DIR        run directory (/var/lib/git-sandbox-test-k8s)
#   GIT_SANDBOX_K8S_SUBNET     pod subnet, a /24 given as its first three octets (10.203.0)
#   GIT_SANDBOX_K8S_KUBE_ROUTER_VERSION  kube-router's version (v2.1.0)
#   GIT_SANDBOX_K8S_IMAGES     images copied from Docker at start
#                              ($GIT_SANDBOX_TEST_BASE_IMAGE or git-sandbox-test-base:bookworm)
set -euo pipefail

k8s_version=${GIT_SANDBOX_K8S_VERSION:-v1.37.2}
etcd_version=${GIT_SANDBOX_K8S_ETCD_VERSION:-v3.7.3}
kube_router_version=${GIT_SANDBOX_K8S_KUBE_ROUTER_VERSION:-v2.1.0}
# Part of the cache stamp: bump it when the build recipe or the pause
# binary changes.
recipe=1

cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/git-sandbox-test/k8s
cache=$cache_root/$k8s_version
bin=$cache/bin
# kube-router has a cache of its own: a new version of it does not cost a
# new build of Kubernetes.
kr_recipe=1
kr_cache=$cache_root/kube-router-$kube_router_version
kr_bin=$kr_cache/bin/kube-router

run=${GIT_SANDBOX_K8S_DIR:-/var/lib/git-sandbox-test-k8s}
lockfile=$run.lock

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

log() { echo "k8s: $*" >&2; }
die() {
	echo "k8s: error: $1" >&2
	shift
	local h
	for h in "$@"; do echo "k8s: hint: $h" >&2; done
	exit 1
}

# ---------------------------------------------------------------- build

stamp() {
	printf 'kubernetes %s\netcd %s\nrecipe %s\n' "$k8s_version" "$etcd_version" "$recipe"
}

kr_stamp() { printf 'kube-router %s\nrecipe %s\n' "$kube_router_version" "$kr_recipe"; }

kube_router_built() {
	[ -f "$kr_cache/STAMP" ] && [ "$(cat "$kr_cache/STAMP")" = "$(kr_stamp)" ] && [ -x "$kr_bin" ]
}

built() {
	[ -f "$cache/STAMP" ] && [ "$(cat "$cache/STAMP")" = "$(stamp)" ] || return 1
	local b
	for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl pause; do
		[ -x "$bin/$b" ] || return 1
	done
}

# quiet runs a command with its output kept in a file, shown only when it
# fails.
quiet() {
	local out
	out=$(mktemp)
	if "$@" >"$out" 2>&1; then
		rm -f "$out"
		return 0
	fi
	local rc=$?
	cat "$out" >&2
	rm -f "$out"
	return $rc
}

cmd_build() {
	build_kubernetes
	build_kube_router
}

# build_kube_router builds kube-router's command (only its network policy
# controller runs) as build_kubernetes builds the rest: in a scratch module,
# moved into the cache when it is whole.
build_kube_router() {
	if kube_router_built; then
		log "kube-router $kube_router_version: cached in $kr_cache"
		return 0
	fi
	command -v go >/dev/null 2>&1 || die "go is missing" "install Go (the version go.mod names) and run again"
	mkdir -p "$cache_root"
	local out work start=$SECONDS
	out=$(mktemp -d "$cache_root/.build-kube-router-$kube_router_version.XXXXXX")
	work=$(mktemp -d "${TMPDIR:-/tmp}/git-sandbox-kube-router-build.XXXXXX")
	# shellcheck disable=SC2064 # expand now: the trap removes these exact paths
	trap "rm -rf '$out' '$work'" EXIT
	log "building kube-router $kube_router_version (the NetworkPolicy enforcer): a few minutes, once"
	(
		export GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0
		cd "$work"
		quiet go mod init git-sandbox-test/kube-router
		quiet go get "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$kube_router_version"
		go build -trimpath -ldflags "-s -w" -o "$out/bin/kube-router" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
	) || die "building kube-router $kube_router_version failed (output above)" "the Go module proxy must be reachable (go env GOPROXY)"
	kr_stamp >"$out/STAMP"
	rm -rf "$kr_cache.old"
	[ ! -e "$kr_cache" ] || mv "$kr_cache" "$kr_cache.old"
	mv "$out" "$kr_cache"
	rm -rf "$kr_cache.old"
	trap - EXIT
	rm -rf "$work"
	log "kube-router built in $((SECONDS - start)) s: $kr_cache"
}

# build_kubernetes compiles every binary into a temporary directory next to
# the cache and moves it into place only when all of them built, so an
# interrupted build leaves nothing that looks finished.
build_kubernetes() {
	if built; then
		log "binaries $k8s_version (etcd $etcd_version): cached in $cache"
		return 0
	fi
	command -v go >/dev/null 2>&1 || die "go is missing" "install Go (the version go.mod names) and run again"
	mkdir -p "$cache_root"
	local out work
	out=$(mktemp -d "$cache_root/.build-$k8s_version.XXXXXX")
	work=$(mktemp -d "${TMPDIR:-/tmp}/git-sandbox-k8s-build.XXXXXX")
	# shellcheck disable=SC2064 # expand now: the trap removes these exact paths
	trap "rm -rf '$out' '$work'" EXIT
	mkdir -p "$out/bin"
	export GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0
	local start=$SECONDS

	log "building etcd $etcd_version"
	mkdir -p "$work/etcd"
	cat >"$work/etcd/main.go" <<'GO'
// Command etcd is etcd's own server, built from its module.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
	(
		cd "$work/etcd"
		quiet go mod init git-sandbox-test/etcd
		quiet go get "go.etcd.io/etcd/server/v3@$etcd_version"
		quiet go mod tidy
		go build -trimpath -ldflags "-s -w" -o "$out/bin/etcd" .
	) || die "building etcd $etcd_version failed (output above)" "the Go module proxy must be reachable (go env GOPROXY)"

	log "building Kubernetes $k8s_version (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl): about 10 minutes on two idle cores and up to 4 GB of memory, once"
	mkdir -p "$work/k8s"
	local gomod
	gomod=$(cd "$work/k8s" && go mod download -json "k8s.io/kubernetes@$k8s_version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
	[ -f "$gomod" ] || die "could not download k8s.io/kubernetes@$k8s_version" "the Go module proxy must be reachable (go env GOPROXY)"
	# k8s.io/kubernetes names its staging modules (k8s.io/api,
	# k8s.io/client-go, ...) by paths inside its own repository; each is
	# also published as a module of its own at v0.<minor>.<patch>.
	local staging_version=v0.${k8s_version#v1.}
	{
		echo "module git-sandbox-test/kubernetes"
		echo
		echo "go 1.26"
		echo
		echo "require k8s.io/kubernetes $k8s_version"
		echo
		echo "replace ("
		sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/src/.*#\t\1 => \1 '"$staging_version"'#p' "$gomod"
		echo ")"
	} >"$work/k8s/go.mod"
	grep -q 'k8s.io/client-go =>' "$work/k8s/go.mod" || die "no staging modules found in the go.mod of k8s.io/kubernetes@$k8s_version"
	local v=${k8s_version#v} pkg=k8s.io/component-base/version minor
	minor=$(echo "$v" | cut -d. -f2)
	local ldflags="-s -w -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=${v%%.*} -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
	(
		cd "$work/k8s"
		go build -trimpath -ldflags "$ldflags" -o "$out/bin/" \
			k8s.io/kubernetes/cmd/kube-apiserver \
			k8s.io/kubernetes/cmd/kube-controller-manager \
			k8s.io/kubernetes/cmd/kube-scheduler \
			k8s.io/kubernetes/cmd/kubelet \
			k8s.io/kubernetes/cmd/kubectl
	) || die "building Kubernetes $k8s_version failed (output above)" "the Go module proxy must be reachable (go env GOPROXY); the build needs up to 4 GB of memory"

	log "building the pause binary"
	(cd "$here/pause" && go build -trimpath -ldflags "-s -w" -o "$out/bin/pause" .) ||
		die "building the pause binary failed (output above)"

	stamp >"$out/STAMP"
	rm -rf "$cache.old"
	[ ! -e "$cache" ] || mv "$cache" "$cache.old"
	mv "$out" "$cache"
	rm -rf "$cache.old"
	trap - EXIT
	rm -rf "$work"
	log "built in $((SECONDS - start)) s: $cache"
}

# ---------------------------------------------------------------- settings

# settings fixes every name and address the cluster uses. start writes them
# to the run directory; stop and status read them back from there, so a
# changed environment cannot make stop miss what start created.
settings() {
	subnet=${GIT_SANDBOX_K8S_SUBNET:-10.203.0}
	bridge=gsbk8s0
	node_ip=$subnet.1
	service_range=10.204.0.0/24
	etcd_port=12379
	etcd_peer_port=12380
	api_port=16443
	kubelet_port=10350
	kubelet_healthz_port=10348
	cgroup_name=git-sandbox-test-k8s
	node=git-sandbox-test-node
	cni_name=git-sandbox-test-k8s
	pause_image=git-sandbox-test-pause:$recipe
	storage_class=git-sandbox-test
	provisioner_name=git-sandbox.test/local
	runtime_class=runc
	images=${GIT_SANDBOX_K8S_IMAGES:-${GIT_SANDBOX_TEST_BASE_IMAGE:-git-sandbox-test-base:bookworm}}
}

save_settings() {
	cat >"$run/state/settings" <<EOF
subnet=$subnet
bridge=$bridge
node_ip=$node_ip
service_range=$service_range
etcd_port=$etcd_port
etcd_peer_port=$etcd_peer_port
api_port=$api_port
kubelet_port=$kubelet_port
kubelet_healthz_port=$kubelet_healthz_port
cgroup_name=$cgroup_name
node=$node
cni_name=$cni_name
pause_image=$pause_image
storage_class=$storage_class
provisioner_name=$provisioner_name
runtime_class=$runtime_class
bin=$bin
kr_bin=$kr_bin
EOF
}

load_settings() {
	settings
	if [ -f "$run/state/settings" ]; then
		# shellcheck disable=SC1091 # written by save_settings
		. "$run/state/settings"
	fi
}

ctr_() { ctr --address "$run/containerd/containerd.sock" --namespace k8s.io "$@"; }
kubectl_() { "$bin/kubectl" --kubeconfig "$run/kubeconfig" "$@"; }

# ---------------------------------------------------------------- checks

need_root() {
	[ "$(id -u)" = 0 ] || die "$1 needs root (it runs containerd and the kubelet, and adds a bridge and firewall rules)" \
		"run it as root: sudo $0 $1"
}

check_run_dir() {
	case $run in
	/*/*) ;;
	*) die "GIT_SANDBOX_K8S_DIR must be an absolute path below /: $run" ;;
	esac
	if [ -L "$run" ] || { [ -e "$run" ] && [ "$(stat -c %u "$run")" != 0 ]; }; then
		die "$run is a symlink or not owned by root; refusing to use it" "remove it, or set GIT_SANDBOX_K8S_DIR to another path"
	fi
}

apt_install() {
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		log "installing $*"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1 ||
			{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null; } ||
			die "apt-get install $* failed" "install it yourself and run again"
		return 0
	fi
	return 1
}

check_prereqs() {
	local missing=() c
	for c in iptables ip openssl setsid flock findmnt sha256sum; do
		command -v "$c" >/dev/null 2>&1 || missing+=("$c")
	done
	[ ${#missing[@]} -eq 0 ] || die "missing commands: ${missing[*]}" "install them (Debian: iptables iproute2 openssl util-linux coreutils)"
	if ! command -v containerd >/dev/null 2>&1 || ! command -v ctr >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1; then
		apt_install containerd runc || die "containerd is missing" "install Debian's containerd package (sudo apt-get install containerd) and run again"
	fi
	if [ ! -x "$cni_bin/bridge" ] || [ ! -x "$cni_bin/host-local" ] || [ ! -x "$cni_bin/loopback" ]; then
		apt_install containernetworking-plugins ||
			die "the CNI plugins are missing from $cni_bin" "install Debian's containernetworking-plugins package (sudo apt-get install containernetworking-plugins) and run again"
	fi
	check_firewall_prereqs
	docker info >/dev/null 2>&1 ||
		die "the Docker daemon is unreachable" "the cluster's images are copied from Docker; start it and run again"
}

cni_bin=/usr/lib/cni

# check_firewall_prereqs: kube-router needs ipset and the legacy iptables
# commands (Debian's iptables package has them).
check_firewall_prereqs() {
	if ! command -v ipset >/dev/null 2>&1; then
		apt_install ipset || die "ipset is missing (kube-router, the cluster's NetworkPolicy enforcer, needs it)" "install Debian's ipset package (sudo apt-get install ipset) and run again"
	fi
	local c
	for c in iptables-legacy iptables-legacy-save iptables-legacy-restore; do
		command -v "$c" >/dev/null 2>&1 || die "$c is missing (kube-router, the cluster's NetworkPolicy enforcer, runs the legacy iptables)" "install Debian's iptables package and run again"
	done
}

# ---------------------------------------------------------------- processes

# spawn starts a daemon in its own session, so a Ctrl-C in the terminal
# that ran start does not reach it, with its output in logs/<name>.log and
# its PID in pids/<name>.pid.
spawn() {
	local name=$1
	shift
	# fd 9 holds the lock: a daemon must not keep it.
	setsid "$@" </dev/null >"$run/logs/$name.log" 2>&1 9>&- &
	local pid=$! i
	echo "$pid" >"$run/pids/$name.pid"
	# Until the forked shell has exec'd the daemon, the PID's command line
	# is this script's, and ours would take that moment for an exit: wait
	# for the exec (or a real exit, which wait_for then reports).
	for ((i = 0; i < 200; i++)); do
		ours "$name" >/dev/null && return 0
		[ -d "/proc/$pid" ] || return 0
		sleep 0.05
	done
}

# keep_logs copies the daemons' logs out of the run directory, which a
# failed start removes, and says where.
keep_logs() {
	local keep
	[ -d "$run/logs" ] || return 0
	keep=$(mktemp -d "${TMPDIR:-/tmp}/git-sandbox-k8s-logs.XXXXXX") || return 0
	cp -r "$run/logs/." "$keep/" 2>/dev/null || true
	log "the daemons' logs are kept in $keep"
}

# ours prints the PID recorded for a daemon if that process still runs and
# is the one we started: its command line names the run directory. A PID
# reused by an unrelated process after a crash is never signalled.
ours() {
	local f=$run/pids/$1.pid pid
	[ -f "$f" ] || return 1
	pid=$(cat "$f")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	[ -r "/proc/$pid/cmdline" ] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$run/" || return 1
	echo "$pid"
}

# halt stops one daemon: SIGTERM, then SIGKILL after the grace period.
halt() {
	local name=$1 grace=${2:-10} pid i
	pid=$(ours "$name") || { rm -f "$run/pids/$name.pid"; return 0; }
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < grace * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "$name ($pid) did not stop on SIGTERM; killing it"
		kill -KILL "$pid" 2>/dev/null || true
		for ((i = 0; i < 50; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			log "$name ($pid) did not die"
			return 1
		fi
	fi
	rm -f "$run/pids/$name.pid"
}

# gone tells whether a daemon has exited, and sets gone_status to how
# (" with status N") when it was this script's child. It does not go by
# the command line as ours does: while a daemon execs (setsid, then env,
# then the daemon), its command line reads empty for a moment, and that
# moment is no exit. A live process is in /proc and is no zombie; a child
# of this script keeps its PID until the script waits for it.
gone() {
	local f=$run/pids/$1.pid pid state
	gone_status=
	pid=$(cat "$f" 2>/dev/null) || return 0
	[[ $pid =~ ^[0-9]+$ ]] || return 0
	state=$(sed -E 's/^.*\) ([A-Za-z]).*$/\1/' "/proc/$pid/stat" 2>/dev/null) || state=
	case $state in
	'' | Z | X | x) ;;
	*) return 1 ;;
	esac
	wait "$pid" 2>/dev/null
	local st=$?
	[ "$st" -eq 127 ] || gone_status=" with status $st"
	return 0
}

# wait_for polls a command until it succeeds; on timeout it shows the end
# of the named daemon's log and fails.
wait_for() {
	local what=$1 name=$2 timeout=$3 i
	shift 3
	for ((i = 0; i < timeout * 4; i++)); do
		if "$@" >/dev/null 2>&1; then
			log "$what: ready at $((SECONDS - started)) s"
			return 0
		fi
		if [ -n "$name" ] && gone "$name"; then
			if [ -s "$run/logs/$name.log" ]; then
				tail -n 30 "$run/logs/$name.log" >&2 || true
				die "$name exited$gone_status while waiting for $what (its log above)"
			fi
			die "$name exited$gone_status while waiting for $what, without a word in its log"
		fi
		sleep 0.25
	done
	[ -z "$name" ] || tail -n 30 "$run/logs/$name.log" >&2 || true
	die "timed out after ${timeout}s waiting for $what"
}

# started is when start began, for the progress lines.
started=$SECONDS

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

check_port_free() {
	if port_open "$1" "$2"; then
		die "$1:$2 is already in use" "another cluster or program listens there; run $0 stop, or stop that program"
	fi
}

# ---------------------------------------------------------------- certificates

# cert issues a key and a certificate signed by the cluster's CA.
cert() {
	local name=$1 subj=$2 eku=$3 san=${4:-}
	local pki=$run/pki
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$pki/$name.key" -out "$pki/$name.csr" -subj "$subj" 2>/dev/null
	{
		echo "basicConstraints=critical,CA:FALSE"
		echo "keyUsage=critical,digitalSignature"
		echo "extendedKeyUsage=$eku"
		[ -z "$san" ] || echo "subjectAltName=$san"
	} >"$pki/$name.ext"
	openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
		-days 30 -extfile "$pki/$name.ext" -out "$pki/$name.crt" 2>/dev/null
	rm -f "$pki/$name.csr" "$pki/$name.ext"
}

# kubeconfig writes a kubeconfig for one client certificate, with the
# credentials inline so the file stands alone.
kubeconfig() {
	local file=$1 name=$2 pki=$run/pki
	umask 077
	cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: git-sandbox-test
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 "$pki/$name.crt")
    client-key-data: $(base64 -w0 "$pki/$name.key")
contexts:
- name: git-sandbox-test
  context:
    cluster: git-sandbox-test
    user: $name
current-context: git-sandbox-test
EOF
	umask 022
}

make_pki() {
	local pki=$run/pki
	mkdir -p "$pki"
	chmod 700 "$pki"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$pki/ca.key" -out "$pki/ca.crt" -days 30 -subj "/CN=git-sandbox-test-k8s-ca" \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
	cert etcd "/CN=etcd" serverAuth,clientAuth "IP:127.0.0.1,DNS:localhost"
	cert etcd-client "/CN=kube-apiserver-etcd-client" clientAuth
	cert apiserver "/CN=kube-apiserver" serverAuth \
		"IP:127.0.0.1,DNS:localhost,IP:$node_ip,IP:${service_range%.*}.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
	cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
	cert admin "/O=system:masters/CN=git-sandbox-test-admin" clientAuth
	cert controller-manager "/CN=system:kube-controller-manager" clientAuth
	cert scheduler "/CN=system:kube-scheduler" clientAuth
	cert kubelet-client "/O=system:nodes/CN=system:node:$node" clientAuth
	cert kubelet "/CN=$node" serverAuth "IP:$node_ip,DNS:$node"
	cert provisioner "/CN=git-sandbox-test-provisioner" clientAuth
	openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -out "$pki/sa.key"
	openssl ec -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
	kubeconfig "$run/kubeconfig" admin
	kubeconfig "$run/controller-manager.kubeconfig" controller-manager
	kubeconfig "$run/scheduler.kubeconfig" scheduler
	kubeconfig "$run/kubelet.kubeconfig" kubelet-client
	kubeconfig "$run/provisioner.kubeconfig" provisioner
}

# ---------------------------------------------------------------- host changes

# Every change to the host is recorded under state/ before it is made, so
# stop (after a crash too) knows exactly what to undo.

sysctls="kernel.panic kernel.panic_on_oops vm.overcommit_memory vm.panic_on_oom kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward"

save_sysctls() {
	local k
	: >"$run/state/sysctl.tmp"
	for k in $sysctls; do
		[ -e "/proc/sys/${k//.//}" ] || continue
		echo "$k=$(cat "/proc/sys/${k//.//}")" >>"$run/state/sysctl.tmp"
	done
	mv "$run/state/sysctl.tmp" "$run/state/sysctl"
}

# restore_sysctls puts back the values saved before the kubelet started:
# the kubelet sets kernel.panic, kernel.panic_on_oops and
# vm.overcommit_memory for its own nodes; this machine is not one.
restore_sysctls() {
	local line k v
	[ -f "$run/state/sysctl" ] || return 0
	while IFS= read -r line; do
		k=${line%%=*}
		v=${line#*=}
		if [ "$(cat "/proc/sys/${k//.//}")" != "$v" ]; then
			echo "$v" >"/proc/sys/${k//.//}" || log "could not restore $k to $v"
		fi
	done <"$run/state/sysctl"
}

# The firewall rules let pods on the bridge reach each other: Docker sets
# FORWARD's policy to DROP. Only these rules are ever added or removed.
fw_rules() {
	echo "-i $bridge -m comment --comment git-sandbox-test-k8s -j ACCEPT"
	echo "-o $bridge -m comment --comment git-sandbox-test-k8s -j ACCEPT"
}

add_network() {
	touch "$run/state/network"
	if ! ip link show "$bridge" >/dev/null 2>&1; then
		ip link add "$bridge" type bridge
	fi
	ip addr replace "$node_ip/24" dev "$bridge"
	ip link set "$bridge" up
	local r
	while IFS= read -r r; do
		# shellcheck disable=SC2086 # a rule is a list of words
		iptables -C FORWARD $r 2>/dev/null || iptables -I FORWARD 1 $r
	done < <(fw_rules)
}

remove_network() {
	[ -f "$run/state/network" ] || return 0
	local r
	while IFS= read -r r; do
		# shellcheck disable=SC2086 # a rule is a list of words
		while iptables -C FORWARD $r 2>/dev/null; do iptables -D FORWARD $r; done
	done < <(fw_rules)
	if ip link show "$bridge" >/dev/null 2>&1; then
		ip link del "$bridge"
	fi
	rm -f "$run/state/network"
}

cgroup_mounts() { findmnt -rn -t cgroup,cgroup2 -o TARGET; }

add_cgroups() {
	local m
	touch "$run/state/cgroups"
	while IFS= read -r m; do
		mkdir -p "$m/$cgroup_name"
		if [ -f "$m/cpuset.cpus" ] && [ -f "$m/$cgroup_name/cpuset.cpus" ] && [ -z "$(cat "$m/$cgroup_name/cpuset.cpus")" ]; then
			cat "$m/cpuset.cpus" >"$m/$cgroup_name/cpuset.cpus"
			cat "$m/cpuset.mems" >"$m/$cgroup_name/cpuset.mems"
		fi
	done < <(cgroup_mounts)
}

# cgroup_procs lists every process in the cluster's cgroups: the pods'
# containers, whatever started them.
cgroup_procs() {
	local m
	while IFS= read -r m; do
		[ -d "$m/$cgroup_name" ] || continue
		find "$m/$cgroup_name" -name cgroup.procs -exec cat {} + 2>/dev/null
	done < <(cgroup_mounts) | sort -un
}

remove_cgroups() {
	[ -f "$run/state/cgroups" ] || return 0
	local m ok=0
	while IFS= read -r m; do
		[ -d "$m/$cgroup_name" ] || continue
		find "$m/$cgroup_name" -depth -type d -exec rmdir {} + 2>/dev/null || true
		if [ -d "$m/$cgroup_name" ]; then
			log "could not remove the cgroup $m/$cgroup_name"
			ok=1
		fi
	done < <(cgroup_mounts)
	[ $ok = 1 ] || rm -f "$run/state/cgroups"
	return $ok
}

# ---------------------------------------------------------------- start

write_configs() {
	mkdir -p "$run/containerd" "$run/cni/net.d" "$run/kubelet"
	cat >"$run/containerd/config.toml" <<EOF
version = 2
root = "$run/containerd/root"
state = "$run/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "$run/containerd/containerd.sock"

[ttrpc]
  address = "$run/containerd/containerd.sock.ttrpc"

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "$run/containerd/opt"
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "docker.io/library/$pause_image"
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    enable_selinux = false
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = "$run/runc"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "$cni_bin"
      conf_dir = "$run/cni/net.d"
EOF
	cat >"$run/cni/net.d/10-$cni_name.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "$cni_name",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$bridge",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$run/cni/ipam",
        "ranges": [[{"subnet": "$subnet.0/24", "gateway": "$node_ip"}]]
      }
    }
  ]
}
EOF
	cat >"$run/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $kubelet_healthz_port
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: $run/pki/ca.crt
authorization:
  mode: AlwaysAllow
tlsCertFile: $run/pki/kubelet.crt
tlsPrivateKeyFile: $run/pki/kubelet.key
containerRuntimeEndpoint: unix://$run/containerd/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: /$cgroup_name
failCgroupV1: false
failSwapOn: false
makeIPTablesUtilChains: false
podLogsDir: $run/pod-logs
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
serializeImagePulls: false
EOF
	cat >"$run/scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $run/scheduler.kubeconfig
leaderElection:
  leaderElect: false
EOF
}

# import_images copies the pause image and the test images from Docker
# into the cluster's containerd. The pause image is built here (nothing can
# be pulled) from the pause binary, under a tag only the tests use.
import_images() {
	if ! docker image inspect "$pause_image" >/dev/null 2>&1; then
		local ctx
		ctx=$(mktemp -d)
		cp "$bin/pause" "$ctx/pause"
		tar -C "$ctx" -c pause | docker import --change 'ENTRYPOINT ["/pause"]' - "$pause_image" >/dev/null
		rm -rf "$ctx"
	fi
	load_images "$pause_image" "$images"
}

load_images() {
	local tag
	for tag in "$@"; do
		docker image inspect "$tag" >/dev/null 2>&1 ||
			die "image $tag is not in the Docker daemon" "build it first (make test-image builds git-sandbox-test-base:bookworm)"
		docker save "$tag" | quiet ctr_ images import - ||
			die "copying image $tag into the cluster failed (output above)"
	done
}

# remove_images removes images from the cluster's containerd, by the name
# an import of `docker save TAG` gives them (docker.io/library/ added to a
# name without a registry); one that is not there is not an error.
remove_images() {
	local tag name
	for tag in "$@"; do
		name=$tag
		case $tag in
		*/*) case ${tag%%/*} in *.* | *:* | localhost) ;; *) name=docker.io/$tag ;; esac ;;
		*) name=docker.io/library/$tag ;;
		esac
		ctr_ images rm "$name" >/dev/null 2>&1 || true
	done
}

# ---------------------------------------------------------------- NetworkPolicy

# Only kube-router's chains and sets are ever removed: its chains are
# named KUBE-ROUTER-*, KUBE-POD-FW-* and KUBE-NWPLCY-*, its sets KUBE-SRC-*
# and KUBE-DST-* (and TMP-* while it swaps one).
kr_chains='KUBE-ROUTER-|KUBE-POD-FW-|KUBE-NWPLCY-'

# firewall_manifest is what kube-router may read: the objects its
# controllers watch, nothing to write.
firewall_manifest() {
	cat <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: git-sandbox-test-kube-router
rules:
- apiGroups: [""]
  resources: [pods, namespaces, nodes, services, endpoints]
  verbs: [get, list, watch]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: git-sandbox-test-kube-router
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: git-sandbox-test-kube-router
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: git-sandbox-test-kube-router
EOF
}

# start_firewall starts kube-router's network policy controller once the
# node is registered (it finds its node's address there), with the legacy
# iptables commands first on its PATH.
start_firewall() {
	if [ ! -f "$run/kube-router.kubeconfig" ]; then
		cert kube-router "/CN=git-sandbox-test-kube-router" clientAuth
		kubeconfig "$run/kube-router.kubeconfig" kube-router
	fi
	firewall_manifest | quiet kubectl_ apply -f - ||
		die "adding kube-router's permissions failed (output above)"
	local c
	mkdir -p "$run/kube-router/bin"
	for c in iptables iptables-save iptables-restore; do
		ln -sfn "$(command -v "${c/iptables/iptables-legacy}")" "$run/kube-router/bin/$c"
	done
	touch "$run/state/kube-router"
	spawn kube-router env PATH="$run/kube-router/bin:$PATH" "$kr_bin" \
		--kubeconfig "$run/kube-router.kubeconfig" --hostname-override "$node" \
		--run-firewall=true --run-router=false --run-service-proxy=false --run-loadbalancer=false \
		--enable-cni=false --enable-pod-egress=false --enable-ipv4=true --enable-ipv6=false \
		--service-cluster-ip-range "$service_range" --health-port 0 --metrics-port 0
	wait_for "the NetworkPolicy enforcer (kube-router)" kube-router 60 iptables-legacy -S KUBE-ROUTER-FORWARD
}

# remove_firewall removes kube-router's rules and sets once it is stopped.
remove_firewall() {
	[ -f "$run/state/kube-router" ] || return 0
	command -v iptables-legacy-save >/dev/null 2>&1 || return 0
	iptables-legacy-save -t filter | grep -Ev -e "^:($kr_chains)" -e "^-A ($kr_chains)" -e "-j ($kr_chains)" |
		iptables-legacy-restore -T filter || { log "could not remove kube-router's rules"; return 1; }
	local set
	for set in $(ipset list -n 2>/dev/null | grep -E '^(KUBE-SRC-|KUBE-DST-|TMP-)'); do
		ipset destroy "$set" 2>/dev/null || log "could not remove the ipset $set"
	done
	rm -f "$run/state/kube-router"
}

# ---------------------------------------------------------------- storage

# The provisioner is built from this repository's module (it uses
# client-go, a dependency of the project), not with the cached Kubernetes
# binaries: a change to it costs a Go build of seconds at the next start,
# not a new build of Kubernetes.
build_provisioner() {
	command -v go >/dev/null 2>&1 ||
		die "go is missing: start builds the cluster's volume provisioner from this repository" \
			"install Go (the version go.mod names), or keep it on PATH under sudo: sudo env PATH=\"\$PATH\" $0 start"
	local t=$SECONDS
	mkdir -p "$run/bin"
	# -mod=readonly: cmd_build exports -mod=mod for its scratch modules;
	# this repository's go.mod is never changed by a build.
	(cd "$here/../.." && GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 \
		go build -trimpath -o "$run/bin/provisioner.tmp" ./e2e/k8s/provisioner) ||
		die "building the volume provisioner (e2e/k8s/provisioner) failed (output above)" "the Go module proxy must be reachable the first time (go env GOPROXY)"
	mv "$run/bin/provisioner.tmp" "$run/bin/provisioner"
	log "volume provisioner: built in $((SECONDS - t)) s"
}

# addons_manifest is what start adds to the API server: the provisioner's
# permissions (what the volume controller's own provisioners may do, no
# more), the default StorageClass it serves, and the RuntimeClass runc.
addons_manifest() {
	cat <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: git-sandbox-test-provisioner
rules:
- apiGroups: [""]
  resources: [persistentvolumes]
  verbs: [get, list, watch, create, delete]
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [get, list, watch]
- apiGroups: [storage.k8s.io]
  resources: [storageclasses]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: git-sandbox-test-provisioner
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: git-sandbox-test-provisioner
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: git-sandbox-test-provisioner
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: $storage_class
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: $provisioner_name
reclaimPolicy: Delete
volumeBindingMode: Immediate
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: $runtime_class
handler: runc
EOF
}

# start_storage adds the classes and starts the provisioner, once the API
# server runs and the provisioner is built. A cluster started by an older
# cluster.sh lacks the provisioner's identity: it is issued here.
start_storage() {
	if [ ! -f "$run/provisioner.kubeconfig" ]; then
		cert provisioner "/CN=git-sandbox-test-provisioner" clientAuth
		kubeconfig "$run/provisioner.kubeconfig" provisioner
	fi
	addons_manifest | quiet kubectl_ apply -f - ||
		die "adding the storage and runtime classes failed (output above)"
	mkdir -p "$run/volumes"
	chmod 700 "$run/volumes"
	spawn provisioner "$run/bin/provisioner" -kubeconfig "$run/provisioner.kubeconfig" \
		-root "$run/volumes" -name "$provisioner_name" -node "$node"
	wait_for "the volume provisioner" provisioner 60 grep -q 'ready:' "$run/logs/provisioner.log"
}

untainted() { [ -z "$(kubectl_ get node "$node" -o 'jsonpath={.spec.taints}')" ]; }

# core_running says the cluster's own daemons run and the API server is
# ready; running says its volume provisioner runs too.
core_running() {
	[ -f "$run/env" ] || return 1
	local d
	for d in etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet; do
		ours "$d" >/dev/null || return 1
	done
	kubectl_ get --raw /readyz >/dev/null 2>&1
}

running() { core_running && ours provisioner >/dev/null && ours kube-router >/dev/null; }

write_env() {
	cat >"$run/env.tmp" <<EOF
KUBECONFIG=$run/kubeconfig
GIT_SANDBOX_K8S_KUBECTL=$bin/kubectl
GIT_SANDBOX_K8S_VERSION=$k8s_version
GIT_SANDBOX_K8S_NODE=$node
GIT_SANDBOX_K8S_DIR=$run
GIT_SANDBOX_K8S_CONTAINERD=$run/containerd/containerd.sock
GIT_SANDBOX_K8S_CONTAINERD_NAMESPACE=k8s.io
GIT_SANDBOX_K8S_STORAGE_CLASS=$storage_class
GIT_SANDBOX_K8S_VOLUMES=$run/volumes
GIT_SANDBOX_K8S_RUNTIME_CLASS=$runtime_class
GIT_SANDBOX_K8S_NODE_IP=$node_ip
GIT_SANDBOX_K8S_KUBELET_PORT=$kubelet_port
GIT_SANDBOX_K8S_NETWORK_POLICY=kube-router
EOF
	mv "$run/env.tmp" "$run/env"
}

cmd_start() {
	need_root start
	check_run_dir
	exec 9>"$lockfile"
	flock 9
	settings
	if [ -e "$run" ]; then
		load_settings
		if running; then
			log "already running ($run/env)"
			return 0
		fi
		if core_running; then
			# Started by an older cluster.sh, or the provisioner or the
			# enforcer died: (re)start only that, the cluster may be in use.
			if ! ours provisioner >/dev/null; then
				log "running without its volume provisioner; starting it"
				halt provisioner
				build_provisioner
				start_storage
			fi
			if ! ours kube-router >/dev/null; then
				log "running without its NetworkPolicy enforcer; starting it"
				check_firewall_prereqs
				build_kube_router
				# The record of an older start may name no kube-router.
				kr_bin=$kr_cache/bin/kube-router
				save_settings
				halt kube-router
				start_firewall
			fi
			write_env
			log "running; KUBECONFIG=$run/kubeconfig, kubectl: $bin/kubectl"
			return 0
		fi
		log "cleaning up a cluster that is not running"
		teardown || die "could not clean up the previous cluster" "see the messages above; then run $0 stop"
		settings
	fi
	check_prereqs
	cmd_build
	started=$SECONDS

	check_port_free 127.0.0.1 "$etcd_port"
	check_port_free 127.0.0.1 "$etcd_peer_port"
	check_port_free 127.0.0.1 "$api_port"
	if ip -4 route show | grep -q "^$subnet\.0/24 " && ! ip link show "$bridge" >/dev/null 2>&1; then
		die "the subnet $subnet.0/24 is already routed on this machine" "set GIT_SANDBOX_K8S_SUBNET to a free /24 (its first three octets, like 10.203.0)"
	fi

	mkdir -p "$run"
	chmod 711 "$run"
	mkdir -p "$run/state" "$run/pids" "$run/logs"
	save_settings
	# From here on, a failure or an interrupt takes everything down again.
	trap 'rc=$?; trap - EXIT INT TERM; keep_logs; log "start failed; tearing down"; teardown || true; exit $rc' EXIT
	trap 'exit 130' INT TERM

	make_pki
	write_configs
	add_network
	add_cgroups
	save_sysctls
	# The kubelet links container logs into /var/log/containers and the CNI
	# plugins cache results in /var/lib/cni: remove those directories at stop
	# if they did not exist before.
	[ -e /var/log/containers ] || touch "$run/state/varlog-containers"
	[ -e /var/lib/cni ] || touch "$run/state/var-lib-cni"
	# containerd puts its shims' sockets in /run/containerd/s, whatever its
	# state directory; Docker's containerd may use it too.
	[ -e /run/containerd ] || touch "$run/state/run-containerd"
	# The kubelet's device plugin socket and checkpoint have a fixed path.
	[ -e /var/lib/kubelet ] || touch "$run/state/var-lib-kubelet"

	spawn containerd containerd --config "$run/containerd/config.toml"
	spawn etcd "$bin/etcd" --name default --data-dir "$run/etcd" \
		--listen-client-urls "https://127.0.0.1:$etcd_port" --advertise-client-urls "https://127.0.0.1:$etcd_port" \
		--listen-peer-urls "https://127.0.0.1:$etcd_peer_port" --initial-advertise-peer-urls "https://127.0.0.1:$etcd_peer_port" \
		--initial-cluster "default=https://127.0.0.1:$etcd_peer_port" \
		--cert-file "$run/pki/etcd.crt" --key-file "$run/pki/etcd.key" --trusted-ca-file "$run/pki/ca.crt" --client-cert-auth \
		--peer-cert-file "$run/pki/etcd.crt" --peer-key-file "$run/pki/etcd.key" --peer-trusted-ca-file "$run/pki/ca.crt" --peer-client-cert-auth \
		--unsafe-no-fsync --log-level warn
	wait_for "containerd" containerd 30 ctr_ version
	# Copy the images while the control plane comes up.
	import_images >"$run/logs/images.log" 2>&1 &
	local importer=$!
	# The provisioner builds while the control plane comes up, too.
	build_provisioner >"$run/logs/provisioner-build.log" 2>&1 &
	local builder=$!
	wait_for "etcd" etcd 30 port_open 127.0.0.1 "$etcd_port"
	spawn kube-apiserver "$bin/kube-apiserver" \
		--bind-address 127.0.0.1 --secure-port "$api_port" --advertise-address "$node_ip" \
		--etcd-servers "https://127.0.0.1:$etcd_port" --etcd-cafile "$run/pki/ca.crt" \
		--etcd-certfile "$run/pki/etcd-client.crt" --etcd-keyfile "$run/pki/etcd-client.key" \
		--client-ca-file "$run/pki/ca.crt" --tls-cert-file "$run/pki/apiserver.crt" --tls-private-key-file "$run/pki/apiserver.key" \
		--kubelet-client-certificate "$run/pki/apiserver-kubelet-client.crt" --kubelet-client-key "$run/pki/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority "$run/pki/ca.crt" --kubelet-preferred-address-types InternalIP \
		--service-account-issuer https://kubernetes.default.svc --service-account-key-file "$run/pki/sa.pub" \
		--service-account-signing-key-file "$run/pki/sa.key" --service-cluster-ip-range "$service_range" \
		--authorization-mode Node,RBAC --anonymous-auth=false --enable-admission-plugins NodeRestriction \
		--allow-privileged=false --profiling=false --cert-dir "$run/apiserver"
	wait_for "the API server" kube-apiserver 90 kubectl_ get --raw /readyz
	spawn kube-controller-manager "$bin/kube-controller-manager" \
		--kubeconfig "$run/controller-manager.kubeconfig" --secure-port 0 --leader-elect=false \
		--use-service-account-credentials \
		--service-account-private-key-file "$run/pki/sa.key" --root-ca-file "$run/pki/ca.crt" \
		--service-cluster-ip-range "$service_range" --profiling=false
	spawn kube-scheduler "$bin/kube-scheduler" --config "$run/scheduler.yaml" --secure-port 0 --profiling=false
	if ! wait "$builder"; then
		cat "$run/logs/provisioner-build.log" >&2
		die "building the volume provisioner failed (output above)"
	fi
	cat "$run/logs/provisioner-build.log" >&2
	start_storage
	if ! wait "$importer"; then
		cat "$run/logs/images.log" >&2
		die "copying the images into the cluster failed (output above)"
	fi
	log "images: copied at $((SECONDS - started)) s"
	spawn kubelet "$bin/kubelet" --config "$run/kubelet/config.yaml" --kubeconfig "$run/kubelet.kubeconfig" \
		--root-dir "$run/kubelet" --cert-dir "$run/kubelet/pki" --hostname-override "$node" --node-ip "$node_ip"
	wait_for "the node to register" kubelet 60 kubectl_ get node "$node"
	# The kubelet changed the sysctls when it started; put them back at once
	# (and again below, should it have been slow to get there).
	restore_sysctls
	wait_for "the node to be Ready" kubelet 90 kubectl_ wait --for=condition=Ready "node/$node" --timeout=1s
	wait_for "the node controller to lift the node's not-ready taint" kube-controller-manager 60 untainted
	restore_sysctls
	wait_for "the default service account" kube-controller-manager 60 kubectl_ get serviceaccount default --namespace default
	start_firewall

	write_env
	if [ -n "${GIT_SANDBOX_K8S_OWNER_PID:-}" ]; then
		[[ $GIT_SANDBOX_K8S_OWNER_PID =~ ^[0-9]+$ ]] || die "GIT_SANDBOX_K8S_OWNER_PID is not a PID: $GIT_SANDBOX_K8S_OWNER_PID"
		spawn watchdog "$here/cluster.sh" __watch "$GIT_SANDBOX_K8S_OWNER_PID" "$run/"
	fi
	trap - EXIT INT TERM
	log "running (started in $((SECONDS - started)) s); KUBECONFIG=$run/kubeconfig, kubectl: $bin/kubectl"
}

# ---------------------------------------------------------------- stop

# shims prints "PID ID" for every containerd shim of this cluster: a shim
# names the address of the containerd that started it on its command line,
# and that address (in the run directory) is the cluster's alone. Shims
# outlive containerd, so after a crash this is the only record of them.
shims() {
	local sock=$run/containerd/containerd.sock p args id
	for p in /proc/[0-9]*; do
		[ -r "$p/cmdline" ] || continue
		mapfile -d '' -t args <"$p/cmdline" 2>/dev/null || continue
		[ ${#args[@]} -gt 0 ] || continue
		case ${args[0]##*/} in containerd-shim*) ;; *) continue ;; esac
		local i addr='' id=''
		for ((i = 1; i < ${#args[@]} - 1; i++)); do
			case ${args[i]} in
			-address) addr=${args[i + 1]} ;;
			-id) id=${args[i + 1]} ;;
			esac
		done
		[ "$addr" = "$sock" ] && echo "${p#/proc/} $id"
	done
}

# kill_containers ends every process of the cluster's pods, then their
# shims, and removes the shims' sockets.
kill_containers() {
	local pid id i sock=$run/containerd/containerd.sock
	local found
	found=$(shims)
	# Pods' processes: everything in the cluster's cgroups.
	for ((i = 0; i < 10; i++)); do
		local procs
		procs=$(cgroup_procs)
		[ -n "$procs" ] || break
		for pid in $procs; do kill -KILL "$pid" 2>/dev/null || true; done
		sleep 0.1
	done
	# With containerd up, deleting the tasks makes the shims exit cleanly.
	if ours containerd >/dev/null && [ -S "$sock" ]; then
		local t
		for t in $(ctr_ tasks ls -q 2>/dev/null); do
			timeout 10 ctr_ tasks delete --force "$t" >/dev/null 2>&1 || true
		done
	fi
	# Whatever shim is left is killed. A killed shim leaves its socket in
	# /run/containerd/s (wherever containerd's state is), named by a hash of
	# containerd's address, the namespace and the shim's id.
	while read -r pid id; do
		[ -n "$pid" ] || continue
		if [ -r "/proc/$pid/cmdline" ] && tr '\0' '\n' <"/proc/$pid/cmdline" | grep -qxF -- "$sock"; then
			kill -KILL "$pid" 2>/dev/null || true
		fi
		rm -f "/run/containerd/s/$(printf '%s' "$sock/k8s.io/$id" | sha256sum | cut -d' ' -f1)"
	done <<<"$found"
	if [ -e "$run/state/run-containerd" ]; then
		rmdir /run/containerd/s /run/containerd 2>/dev/null || true
	fi
}

# unmount_all unmounts everything below the run directory (container root
# file systems, network namespaces, pod volumes), deepest first.
unmount_all() {
	local m i
	for ((i = 0; i < 3; i++)); do
		local mounts
		mounts=$(findmnt -rn -o TARGET | grep -F -- "$run/" | awk '{ print length, $0 }' | sort -rn | cut -d' ' -f2-) || true
		[ -n "$mounts" ] || return 0
		while IFS= read -r m; do
			umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
		done <<<"$mounts"
	done
	if findmnt -rn -o TARGET | grep -qF -- "$run/"; then
		log "mounts left below $run:"
		findmnt -rn -o TARGET | grep -F -- "$run/" >&2
		return 1
	fi
}

# remove_host_files removes what the kubelet and the CNI plugins write
# outside the run directory: log links in /var/log/containers pointing
# into it, the CNI result cache of its network, and the kubelet's device
# plugin socket.
remove_host_files() {
	local l
	if [ -d /var/log/containers ]; then
		for l in /var/log/containers/*; do
			[ -L "$l" ] || continue
			case $(readlink "$l") in "$run"/*) rm -f "$l" ;; esac
		done
		if [ -e "$run/state/varlog-containers" ]; then rmdir /var/log/containers 2>/dev/null || true; fi
	fi
	rm -f /var/lib/cni/results/"$cni_name"-* 2>/dev/null || true
	# containerd's own loopback network caches its results there too, by
	# sandbox id.
	local f id
	for f in /var/lib/cni/results/cni-loopback-*-lo; do
		[ -f "$f" ] || continue
		id=${f#/var/lib/cni/results/cni-loopback-}
		id=${id%-lo}
		if [ -e "$run/containerd/root/io.containerd.grpc.v1.cri/sandboxes/$id" ] ||
			[ -e "$run/containerd/state/io.containerd.grpc.v1.cri/sandboxes/$id" ]; then
			rm -f "$f"
		fi
	done
	if [ -e "$run/state/var-lib-kubelet" ]; then
		rm -f /var/lib/kubelet/device-plugins/kubelet.sock /var/lib/kubelet/device-plugins/kubelet_internal_checkpoint
		rmdir /var/lib/kubelet/device-plugins /var/lib/kubelet 2>/dev/null || true
	fi
	if [ -e "$run/state/var-lib-cni" ]; then
		rmdir /var/lib/cni/results /var/lib/cni 2>/dev/null || true
	fi
}

# teardown undoes everything start did, in reverse, from what the run
# directory recorded. It carries on past failures and reports them.
teardown() {
	load_settings
	local failed=0
	halt watchdog 2
	halt provisioner
	halt kube-router
	remove_firewall || failed=1
	halt kubelet 15
	halt kube-scheduler
	halt kube-controller-manager
	kill_containers
	halt containerd 15
	kill_containers
	halt kube-apiserver 15
	halt etcd
	restore_sysctls
	unmount_all || failed=1
	remove_cgroups || failed=1
	remove_network || failed=1
	remove_host_files
	local left
	left=$(for f in "$run"/pids/*.pid; do [ -f "$f" ] && basename "$f" .pid; done 2>/dev/null | tr '\n' ' ')
	if [ -n "$left" ]; then
		log "processes not stopped: $left"
		failed=1
	fi
	if [ $failed = 0 ]; then
		rm -rf --one-file-system "$run"
	fi
	return $failed
}

cmd_stop() {
	need_root stop
	check_run_dir
	if [ ! -e "$run" ]; then
		log "not running"
		return 0
	fi
	exec 9>"$lockfile"
	flock 9
	teardown || die "the cluster was not fully removed (see above)" "fix what blocks it and run $0 stop again"
	rm -f "$lockfile"
	log "stopped and removed"
}

cmd_status() {
	need_root status
	if [ ! -e "$run" ]; then
		echo "not running"
		return 1
	fi
	load_settings
	if running; then
		echo "running: $(tr '\n' ' ' <"$run/env")"
		return 0
	fi
	echo "not running (left over from an earlier run: $0 stop cleans it up)"
	return 1
}

cmd_env() {
	[ -f "$run/env" ] || die "the cluster is not running" "start it: $0 start"
	cat "$run/env"
}

# cmd_watch is the watchdog start leaves when GIT_SANDBOX_K8S_OWNER_PID
# names the process the cluster is for (a test run): when that process is
# gone, however it ended, the cluster is stopped.
cmd_watch() {
	local owner=$1
	while kill -0 "$owner" 2>/dev/null; do sleep 2; done
	rm -f "$run/pids/watchdog.pid"
	log "process $owner is gone; stopping the cluster"
	cmd_stop
}

cmd_load_image() {
	need_root load-image
	[ $# -gt 0 ] || die "load-image needs image tags"
	load_settings
	running || die "the cluster is not running" "start it: $0 start"
	load_images "$@"
}

cmd_remove_image() {
	need_root remove-image
	[ $# -gt 0 ] || die "remove-image needs image tags"
	load_settings
	running || die "the cluster is not running" "start it: $0 start"
	remove_images "$@"
}

# restart-containerd stops the cluster's containerd with SIGTERM, as a
# service manager does, and starts it again with the same configuration:
# the Pods' containers belong to their shims, which outlive it, and it
# finds them again; the kubelet reconnects. For the runtime-restart fault
# test: every exec or Pod start on the cluster fails while it is down.
cmd_restart_containerd() {
	need_root restart-containerd
	load_settings
	running || die "the cluster is not running" "start it: $0 start"
	exec 9>"$lockfile"
	flock 9
	halt containerd 30 || die "containerd did not stop"
	spawn containerd containerd --config "$run/containerd/config.toml"
	wait_for "containerd" containerd 30 ctr_ version
	exec 9>&-
}

main() {
	local cmd=${1:-}
	[ $# -eq 0 ] || shift
	case $cmd in
	build) cmd_build "$@" ;;
	start) cmd_start "$@" ;;
	stop) cmd_stop "$@" ;;
	status) cmd_status "$@" ;;
	env) cmd_env "$@" ;;
	load-image) cmd_load_image "$@" ;;
	remove-image) cmd_remove_image "$@" ;;
	restart-containerd) cmd_restart_containerd "$@" ;;
	__watch) cmd_watch "$@" ;;
	*)
		echo "usage: $0 build|start|stop|status|env|load-image TAG...|remove-image TAG...|restart-containerd" >&2
		exit 2
		;;
	esac
}

# One line with its exit: bash reads a script as it runs it, so a script
# edited while it runs would go on with whatever bytes now follow main.
main "$@"; exit
