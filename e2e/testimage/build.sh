#!/usr/bin/env bash
# Builds the offline base image the end-to-end tests use: a minimal Debian
# (debootstrap --variant=minbase) with git, imported into Docker. No registry
# is needed. The image is cached by tag: a second run returns at once.
set -euo pipefail

tag=${1:-git-sandbox-test-base:bookworm}
suite=${SUITE:-bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if docker image inspect "$tag" >/dev/null 2>&1; then
	echo "test base image $tag: present"
	exit 0
fi

if ! command -v debootstrap >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "installing debootstrap"
		apt-get install -y -qq debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }
	else
		echo "error: debootstrap is missing" >&2
		echo "hint: install it (sudo apt-get install debootstrap) and run again" >&2
		exit 1
	fi
fi

sudo=
[ "$(id -u)" = 0 ] || sudo=sudo

root=$(mktemp -d "${TMPDIR:-/tmp}/git-sandbox-rootfs.XXXXXX")
trap '$sudo rm -rf "$root"' EXIT

echo "building test base image $tag with debootstrap ($suite, minbase + git); this takes a few minutes once"
$sudo debootstrap --variant=minbase --include=git,ca-certificates,procps \
	"$suite" "$root" "$mirror" >"$root.log" 2>&1 || {
	tail -n 30 "$root.log" >&2
	echo "error: debootstrap failed (log above)" >&2
	exit 1
}
rm -f "$root.log"
$sudo rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
$sudo tar -C "$root" -c . | docker import \
	--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	--change 'ENV LANG=C.UTF-8' \
	--change 'CMD ["/bin/bash"]' \
	- "$tag" >/dev/null
echo "test base image $tag: built"
