#!/usr/bin/env bash
# Makes a Docker engine usable on a Debian machine, for kind: installs docker.io (and
# jq) with apt when missing, registers a runc wrapper where the kernel cannot grant
# CAP_SYS_RESOURCE (see runc-drop-sys-resource), starts dockerd when it is not running
# (no systemd is assumed: log in /var/log/herald-dockerd.log, pid in
# /run/herald-dockerd.pid) and waits until `docker info` answers. Idempotent: a machine
# where all is in place costs one `docker info`. Root only.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

WRAPPER=/usr/local/sbin/runc-drop-sys-resource
RUNTIME=runc-drop-sys-resource
DAEMON_JSON=/etc/docker/daemon.json
LOGFILE=/var/log/herald-dockerd.log
PIDFILE=/run/herald-dockerd.pid

# The wrapper is wanted where the kernel lacks the capability and nowhere else.
wrapper_in_place() {
	cmp -s "$(dirname "$0")/runc-drop-sys-resource" "$WRAPPER" &&
		[[ $(jq -r '."default-runtime" // ""' "$DAEMON_JSON" 2>/dev/null) == "$RUNTIME" ]]
}

ready() {
	docker info >/dev/null 2>&1 || return 1
	if lacks_sys_resource; then
		[[ $(docker info -f '{{.DefaultRuntime}}' 2>/dev/null) == "$RUNTIME" ]] && wrapper_in_place
	fi
}

if ready; then
	log "docker is ready ($(docker version -f '{{.Server.Version}}'), runtime $(docker info -f '{{.DefaultRuntime}}'))"
	exit 0
fi
[[ $(id -u) == 0 ]] || die "run as root: it installs packages and starts dockerd"

missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v jq >/dev/null || missing+=(jq)
if ((${#missing[@]})); then
	command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get: install Docker yourself"
	log "installing ${missing[*]} (apt)"
	# Keep the package from starting its own dockerd through the init scripts:
	# this script starts it, with the runtime configured first.
	policy=/usr/sbin/policy-rc.d
	[[ -e $policy ]] || { printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && trap 'rm -f "$policy"' EXIT; }
	[[ -n $(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -print -quit) ]] || apt-get update -q >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 ||
		die "apt-get install ${missing[*]} failed"
	rm -f "$policy" && trap - EXIT
fi

restart=no
if lacks_sys_resource && ! wrapper_in_place; then
	log "the kernel's bounding set lacks CAP_SYS_RESOURCE: registering $WRAPPER as dockerd's default runtime"
	install -m 0755 "$(dirname "$0")/runc-drop-sys-resource" "$WRAPPER"
	mkdir -p "$(dirname "$DAEMON_JSON")"
	[[ -s $DAEMON_JSON ]] || echo '{}' >"$DAEMON_JSON"
	jq --arg n "$RUNTIME" --arg p "$WRAPPER" '.runtimes[$n] = {path: $p} | ."default-runtime" = $n' \
		"$DAEMON_JSON" >"$DAEMON_JSON.new" && mv "$DAEMON_JSON.new" "$DAEMON_JSON"
	restart=yes
fi

pid=$(pgrep -xo dockerd || true)
if [[ -n $pid && $restart == yes ]]; then
	if [[ -f $PIDFILE && $(cat "$PIDFILE") == "$pid" ]]; then
		log "restarting the dockerd this script started (pid $pid) to load $DAEMON_JSON"
		kill "$pid"
		for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
		pid=
	else
		die "dockerd (pid $pid) was not started by this script: restart it yourself to load $DAEMON_JSON"
	fi
fi
if [[ -z $pid ]]; then
	log "starting dockerd (log: $LOGFILE)"
	# setsid: dockerd outlives this script and the shell that ran it. It gets no other
	# descriptor of theirs: one holding a lock (flock /tmp/herald-kind.lock make
	# test-kind) would keep the lock taken for as long as dockerd runs.
	(
		for fd in /proc/self/fd/*; do
			fd=${fd##*/}
			if ((fd > 2)); then eval "exec $fd>&-"; fi
		done
		exec setsid dockerd >>"$LOGFILE" 2>&1 </dev/null
	) &
	echo $! >"$PIDFILE"
fi
for _ in $(seq 60); do
	if ready; then
		log "docker is ready ($(docker version -f '{{.Server.Version}}'), runtime $(docker info -f '{{.DefaultRuntime}}'))"
		exit 0
	fi
	kill -0 "$(cat "$PIDFILE" 2>/dev/null || echo 0)" 2>/dev/null || pgrep -x dockerd >/dev/null ||
		die "dockerd exited: see the end of $LOGFILE"
	sleep 1
done
die "docker info still fails after 60s: see $LOGFILE"
