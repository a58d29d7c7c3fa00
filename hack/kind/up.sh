#!/usr/bin/env bash
# A walkthrough-shaped kind cluster from the offline node image: one control plane and
# three workers (labels and NodePort mappings as in hack/kind-demo.sh), podSubnet
# 10.10.0.0/16, serviceSubnet 10.200.1.0/24, the static CNI, and a smoke test (every
# node Ready, CoreDNS Running, a pod on one worker reaches a pod on another, a name
# resolves through CoreDNS). Reuses a running cluster of the same name.
# Environment: CLUSTER (herald-kind), KUBE_PROXY_MODE (iptables; `none` leaves the
# `kubernetes` Service to herald's proxier, the next step), SMOKE (1).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
KUBE_PROXY_MODE=${KUBE_PROXY_MODE:-iptables}
k() { "$KUBECTL" --context "kind-$CLUSTER" "$@"; }

"$root/hack/kind/check.sh"
t0=$SECONDS
node_image=$("$root/hack/kind/node-image.sh")
netshoot=$("$root/hack/kind/tool-images.sh" netshoot)

# kind would create the network with a pool address of Docker's choosing; the
# walkthrough's pool (172.18.255.200-250) assumes 172.18.0.0/16, so pin it first.
if ! docker network inspect "$NETWORK" >/dev/null 2>&1; then
	log "docker network $NETWORK: $NETWORK_V4 and $NETWORK_V6"
	docker network create -d bridge -o com.docker.network.bridge.enable_ip_masquerade=true \
		-o com.docker.network.driver.mtu=1500 --ipv6 --subnet "$NETWORK_V6" --subnet "$NETWORK_V4" "$NETWORK" >/dev/null
fi

# A cluster whose node containers stopped (dockerd restarted, the machine rebooted) is
# not reused: kind cannot start one again. Nor one whose nodes Docker started again by
# itself (a restart policy, when dockerd came back): they run, but pods hang in
# Terminating. Every node started more than a minute after it was created means that;
# one node started again is the failover tests' `docker stop` and `docker start`.
restarted_nodes() {
	local id created started n=0 again=0
	for id in $(docker ps -aq --filter "label=io.x-k8s.kind.cluster=$CLUSTER"); do
		read -r created started < <(docker inspect -f '{{.Created}} {{.State.StartedAt}}' "$id")
		n=$((n + 1))
		(($(date -d "$started" +%s) - $(date -d "$created" +%s) > 60)) && again=$((again + 1))
	done
	((n > 0 && again == n))
}
cluster_exists() { "$KIND" get clusters 2>/dev/null | grep -qx "$CLUSTER"; }
if cluster_exists &&
	{ docker ps -a --filter "label=io.x-k8s.kind.cluster=$CLUSTER" --format '{{.State}}' | grep -qvx running || restarted_nodes; }; then
	log "kind cluster $CLUSTER exists but some of its nodes are not running or were restarted: deleting it"
	"$KIND" delete cluster --name "$CLUSTER"
fi
# A cluster kept is reached through the kubeconfig entry kind wrote, which a `kind
# delete` of another cluster of that name, a new $HOME or a deleted ~/.kube/config may
# have removed, and whose port changes when the node containers restart: write it
# again. One whose API server still does not answer is made again.
if cluster_exists; then
	"$KIND" export kubeconfig --name "$CLUSTER" >/dev/null 2>&1 || true
	if ! k get --raw /readyz --request-timeout=10s >/dev/null 2>&1; then
		log "kind cluster $CLUSTER exists but its API server does not answer: deleting it"
		"$KIND" delete cluster --name "$CLUSTER"
	fi
fi
if cluster_exists; then
	log "kind cluster $CLUSTER exists: reusing it"
	# herald's proxier and kube-proxy would both program the nodes: refuse a mismatch.
	has=with want=with
	k -n kube-system get daemonset kube-proxy >/dev/null 2>&1 || has=without
	[[ $KUBE_PROXY_MODE != none ]] || want=without
	[[ $has == "$want" ]] ||
		die "cluster $CLUSTER runs $has kube-proxy, KUBE_PROXY_MODE=$KUBE_PROXY_MODE wants it $want: delete it first (make kind-down)"
else
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	"$root/hack/kind/config.sh" "$KUBE_PROXY_MODE" offline >"$tmp/kind.yaml"
	cp "$tmp/kind.yaml" "$KBIN/$CLUSTER.yaml" # for a look afterwards
	log "creating kind cluster $CLUSTER from $node_image (kube-proxy: $KUBE_PROXY_MODE)"
	timed "kind create cluster" "$KIND" create cluster --name "$CLUSTER" --image "$node_image" --config "$tmp/kind.yaml" --retain
fi

"$root/hack/kind/static-cni.sh" "$CLUSTER" "$POD_SUBNET"
timed "nodes Ready" k wait --for=condition=Ready node --all --timeout=5m
k get nodes -o wide
if [[ $KUBE_PROXY_MODE == none ]]; then
	# No ClusterIP works, the `kubernetes` Service's included, until something serves
	# them: CoreDNS stays unready until herald's speakers run their proxier.
	log "cluster $CLUSTER up in $((SECONDS - t0))s without kube-proxy: Services (and CoreDNS) wait for herald's proxier"
	exit 0
fi
timed "CoreDNS available" k -n kube-system rollout status deployment/coredns --timeout=5m
log "cluster $CLUSTER up in $((SECONDS - t0))s; kubectl: $KUBECTL --context kind-$CLUSTER"
[[ ${SMOKE:-1} == 1 ]] || exit 0
# The smoke test's pods run the netshoot stand-in: no registry to pull it from.
"$KIND" load docker-image --name "$CLUSTER" "$netshoot" >/dev/null

# ------------------------------------------------------------------------ smoke test
# A server pod on worker2 and a client pod on worker (two nodes: the route between
# podCIDRs and the ptp links), then a Service name through CoreDNS and kube-proxy.
log "smoke test: pod on $CLUSTER-worker -> pod on $CLUSTER-worker2, DNS, a ClusterIP"
k delete pod smoke-server smoke-client --ignore-not-found --wait >/dev/null
k delete service smoke-server --ignore-not-found >/dev/null
for p in server:worker2 client:worker; do
	k apply -f - >/dev/null <<-YAML
		apiVersion: v1
		kind: Pod
		metadata: {name: smoke-${p%%:*}, labels: {app: smoke-${p%%:*}}}
		spec:
		  nodeName: $CLUSTER-${p#*:}
		  terminationGracePeriodSeconds: 0
		  containers:
		  - name: c
		    image: $netshoot
		    command: [sh, -c, 'mkdir -p /www && hostname >/www/index.html && exec busybox httpd -f -p 8080 -h /www']
	YAML
done
k expose pod smoke-server --port 80 --target-port 8080 >/dev/null
k wait --for=condition=Ready pod/smoke-server pod/smoke-client --timeout=3m >/dev/null
k get pod -o wide -l 'app in (smoke-server, smoke-client)'
server_ip=$(k get pod smoke-server -o jsonpath='{.status.podIP}')
got=$(k exec smoke-client -- curl -sS --max-time 5 "http://$server_ip:8080/")
[[ $got == smoke-server ]] || die "pod to pod: got '$got' from $server_ip:8080"
log "pod to pod: $CLUSTER-worker -> $server_ip:8080 ($CLUSTER-worker2) answered '$got'"
got=$(k exec smoke-client -- curl -sS --max-time 5 "http://smoke-server.default.svc.cluster.local/")
[[ $got == smoke-server ]] || die "Service by name: got '$got'"
log "Service smoke-server by name (CoreDNS) and ClusterIP (kube-proxy): answered '$got'"
k delete pod smoke-server smoke-client --wait=false >/dev/null
k delete service smoke-server >/dev/null
log "smoke test passed"
