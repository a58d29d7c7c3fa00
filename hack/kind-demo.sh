#!/usr/bin/env bash
# The walkthrough on a real kind cluster, for users with Docker and kind (the lab of
# `make demo` stands in for it where Docker cannot run):
#
#   hack/kind-demo.sh        # cluster, images, herald, pool, webpods, Services, curls
#   hack/kind-demo.sh down   # delete the cluster and the client container
#
# The cluster is shaped like the walkthrough's: one control plane and three workers,
# podSubnet 10.10.0.0/16, serviceSubnet 10.200.1.0/24, and no kube-proxy
# (kubeProxyMode: none): herald's speakers program kube-proxy's iptables rules instead.
# Without kube-proxy the `kubernetes` Service's ClusterIP works only once the speakers'
# proxier runs, so the script points herald at the control-plane node's address itself
# (ConfigMap herald-apiserver, read by config/default) and creates the memberlist
# Secret up front (the speakers would otherwise wait for the controller, a pod that
# needs the pod network and the cluster DNS). Once the speakers run, CoreDNS and
# everything else reach the API server through the ClusterIP as usual.
#
# Environment: CLUSTER (myk8s), NODE_IMAGE (kind's default node image), CLIENT (mypc,
# the netshoot container), MONITORING (auto: kube-prometheus-stack if helm is
# installed; yes; no), KPS_VERSION (the chart's version, default latest), KUBECTL,
# BUILD_IMAGES (yes; no: herald-controller:dev and herald-speaker:dev exist already, as
# hack/kind/herald-images.sh makes them where no registry is reachable), CLIENT_IMAGE
# (nicolaka/netshoot), WHOAMI_IMAGE (traefik/whoami, the webpods'; a local one is
# loaded into the cluster), OFFLINE (auto: where Docker Hub does not answer, run
# hack/kind/demo.sh, which builds everything kind needs here and then runs this on its
# offline cluster; yes; no), FAILOVER (yes: docker stop the node that owns svc1's VIP
# while the client curls it, then start it again; no), AFTER_NODE_START (a command run
# after that docker start: the offline cluster's static CNI).
set -euo pipefail

CLUSTER=${CLUSTER:-myk8s}
CLIENT=${CLIENT:-mypc}
MONITORING=${MONITORING:-auto}
BUILD_IMAGES=${BUILD_IMAGES:-yes}
CLIENT_IMAGE=${CLIENT_IMAGE:-nicolaka/netshoot}
WHOAMI_IMAGE=${WHOAMI_IMAGE:-traefik/whoami}
NETWORK=${KIND_EXPERIMENTAL_DOCKER_NETWORK:-kind}
POD_SUBNET=10.10.0.0/16 # config/kind gives the speakers the same --cluster-cidr
SERVICE_SUBNET=10.200.1.0/24
TAG=dev # the image tag of config/default
root=$(cd "$(dirname "$0")/.." && pwd)
VERSION=${VERSION:-$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)}

log() { printf '\n\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { echo "kind-demo: $*" >&2; exit 1; }
need() { command -v "$1" >/dev/null || die "$1 is needed: $2"; }

if [[ ${1:-} == down ]]; then
	need kind "https://kind.sigs.k8s.io/docs/user/quick-start/#installation"
	docker rm -f "$CLIENT" >/dev/null 2>&1 || true
	kind delete cluster --name "$CLUSTER"
	exit 0
fi
[[ $# -eq 0 ]] || die "usage: $0 [down]"

# Without a registry kind can pull neither its node image nor the images the
# walkthrough runs: build them here instead.
OFFLINE=${OFFLINE:-auto}
if [[ $OFFLINE == auto ]]; then
	OFFLINE=yes
	if command -v curl >/dev/null && curl -s --max-time 5 -o /dev/null https://registry-1.docker.io/v2/; then OFFLINE=no; fi
fi
if [[ $OFFLINE == yes ]]; then
	log "no container registry answers: building kind's images here (hack/kind/demo.sh; about 30 minutes the first time)"
	exec "$root/hack/kind/demo.sh"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Where Docker cannot run, the lab of `make demo` shows the same walkthrough; where no
# registry is reachable, `make kind-demo-offline` builds everything kind needs first.
need docker "https://docs.docker.com/get-docker/ (no Docker here? make demo runs the walkthrough in a lab of network namespaces)"
docker info >/dev/null 2>&1 || die "docker cannot reach its daemon (is dockerd running?); make demo runs the walkthrough without Docker, make kind-demo-offline starts Docker and builds kind's images offline"
need kind "https://kind.sigs.k8s.io/docs/user/quick-start/#installation (or make kind-demo-offline, which builds it)"
if [[ -z ${KUBECTL:-} ]]; then
	if command -v kubectl >/dev/null; then
		KUBECTL=kubectl
	else
		log "no kubectl in PATH: building one (hack/setup-test-binaries.sh, minutes the first time)"
		KUBECTL="$("$root/hack/setup-test-binaries.sh")/kubectl"
	fi
fi
k() { "$KUBECTL" --context "kind-$CLUSTER" "$@"; }

# ---------------------------------------------------------------------------- cluster
if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
	log "kind cluster $CLUSTER exists: reusing it"
else
	log "creating kind cluster $CLUSTER (1 control plane, 3 workers, no kube-proxy)"
	# The walkthrough's cluster, as hack/kind/up.sh makes it offline; herald's speakers
	# replace kube-proxy (its iptables mode, same chains and rules).
	"$root/hack/kind/config.sh" none >"$tmp/kind.yaml"
	kind create cluster --name "$CLUSTER" --config "$tmp/kind.yaml" ${NODE_IMAGE:+--image "$NODE_IMAGE"}
fi

# ----------------------------------------------------------------------------- images
if [[ $BUILD_IMAGES == yes ]]; then
	log "building the images herald-controller:$TAG and herald-speaker:$TAG (version $VERSION)"
	for target in controller speaker; do
		docker build --target "$target" --build-arg VERSION="$VERSION" -t "herald-$target:$TAG" "$root"
	done
fi
kind load docker-image --name "$CLUSTER" "herald-controller:$TAG" "herald-speaker:$TAG"

# ----------------------------------------------------------------------------- herald
cp_ip=$(docker inspect -f "{{(index .NetworkSettings.Networks \"$NETWORK\").IPAddress}}" "$CLUSTER-control-plane")
[[ -n $cp_ip ]] || die "no IPv4 address of $CLUSTER-control-plane on the docker network $NETWORK"
log "installing herald (kube-apiserver at $cp_ip:6443 for herald itself)"
k apply --server-side -k "$root/config/namespace"
k -n herald-system create configmap herald-apiserver --from-literal=host="$cp_ip" --from-literal=port=6443 \
	--dry-run=client -o yaml | k apply --server-side -f -
if ! k -n herald-system get secret herald-memberlist >/dev/null 2>&1; then
	# What the controller would create: 32 random bytes, base64. It never replaces it.
	k -n herald-system create secret generic herald-memberlist \
		--from-literal=secretkey="$(head -c 32 /dev/urandom | base64)"
fi
k apply --server-side -k "$root/config/kind"
k -n herald-system rollout status daemonset/herald-speaker --timeout=5m
k -n herald-system rollout status deployment/herald-controller --timeout=5m
log "waiting for CoreDNS, which reaches the API server through herald's proxier"
k -n kube-system rollout status deployment/coredns --timeout=5m

# ------------------------------------------------------------------------------- pool
# The free end of the kind network's IPv4 subnet, as the walkthrough picks
# 172.18.255.200-172.18.255.250 out of 172.18.0.0/16: docker hands out addresses from
# the start.
subnet=$(docker network inspect -f '{{range .IPAM.Config}}{{.Subnet}} {{end}}' "$NETWORK" | tr ' ' '\n' | grep -m1 -E '^[0-9]+\.' || true)
[[ -n $subnet ]] || die "the docker network $NETWORK has no IPv4 subnet"
ip2int() { local IFS=.; read -r a b c d <<<"$1"; echo $(((a << 24) | (b << 16) | (c << 8) | d)); }
int2ip() { echo "$((($1 >> 24) & 255)).$((($1 >> 16) & 255)).$((($1 >> 8) & 255)).$(($1 & 255))"; }
bits=${subnet#*/}
((bits <= 24)) || die "the docker network $NETWORK ($subnet) is smaller than a /24: no room for a pool at its end"
last=$(($(ip2int "${subnet%/*}") | ((1 << (32 - bits)) - 1)))
pool="$(int2ip $((last - 55)))-$(int2ip $((last - 5)))"
log "IPAddressPool my-ippool: $pool (from $subnet) and an L2Advertisement"
"$KUBECTL" kustomize "$root/config/samples" | sed "s/172\.18\.255\.200-172\.18\.255\.250/$pool/" | k apply -f -

# --------------------------------------------------------------- webpods and Services
log "webpods on $CLUSTER-worker and $CLUSTER-worker2, three LoadBalancer Services"
# A whoami image that is local (no registry to pull it from) goes to the nodes first.
if docker image inspect "$WHOAMI_IMAGE" >/dev/null 2>&1; then kind load docker-image --name "$CLUSTER" "$WHOAMI_IMAGE"; fi
sed -E -e "s/nodeName: (worker[0-9]*)/nodeName: $CLUSTER-\1/" -e "s#image: traefik/whoami#image: $WHOAMI_IMAGE#" \
	"$root/hack/demo/webpods.yaml" | k apply -f -
k apply -f "$root/hack/demo/services.yaml"
k wait --for=condition=Ready pod -l app=webpod --timeout=5m
services=(svc1 svc2 svc3)
vips=()
for svc in "${services[@]}"; do
	ip=
	for _ in $(seq 120); do
		ip=$(k get service "$svc" -o jsonpath='{.status.loadBalancer.ingress[0].ip}')
		[[ -n $ip ]] && break
		sleep 1
	done
	[[ -n $ip ]] || die "Service $svc got no external IP: kubectl describe service $svc"
	vips+=("$ip")
done
k get service -o wide

# ------------------------------------------------------------------------------ curls
log "netshoot container $CLIENT on the $NETWORK network (outside the cluster, like a LAN client)"
if [[ $(docker inspect -f '{{.State.Running}}' "$CLIENT" 2>/dev/null) != true ]]; then
	docker rm -f "$CLIENT" >/dev/null 2>&1 || true
	docker run -d --rm --name "$CLIENT" --network "$NETWORK" "$CLIENT_IMAGE" sleep infinity >/dev/null
fi
# "name mac" of every node of the cluster, to say whose MAC answers for a VIP.
nodes=$(docker ps -q --filter "label=io.x-k8s.kind.cluster=$CLUSTER" |
	xargs docker inspect -f "{{.Name}} {{(index .NetworkSettings.Networks \"$NETWORK\").MacAddress}}")
for i in "${!services[@]}"; do
	svc=${services[$i]} ip=${vips[$i]}
	log "$svc: curl http://$ip 100 times from $CLIENT"
	docker exec "$CLIENT" sh -c "for i in \$(seq 100); do curl -s --connect-timeout 1 http://$ip | grep Hostname; done | sort | uniq -c | sort -nr"
	mac=$(docker exec "$CLIENT" ip neigh show "$ip" | awk '{for (i = 1; i < NF; i++) if ($i == "lladdr") print $(i + 1)}')
	node=$(awk -v mac="$mac" '$2 == mac {sub("^/", "", $1); print $1}' <<<"$nodes")
	echo "$ip is at ${mac:-?}: ${node:-no kind node has that MAC}"
done
log "who announces what (the latest Announcing Event of each Service, from the speakers)"
# A reused cluster keeps the Events of earlier runs: the latest per Service tells.
k get events --field-selector reason=Announcing --sort-by=.metadata.creationTimestamp \
	-o custom-columns=SERVICE:.involvedObject.name,MESSAGE:.message --no-headers |
	awk '{last[$1] = $0} END {for (s in last) print last[s]}' | sort

# --------------------------------------------------------------------------- failover
if [[ ${FAILOVER:-yes} == yes ]]; then
	ip=${vips[0]}
	mac=$(docker exec "$CLIENT" ip neigh show "$ip" | awk '{for (i = 1; i < NF; i++) if ($i == "lladdr") print $(i + 1)}')
	owner=$(awk -v mac="$mac" '$2 == mac {sub("^/", "", $1); print $1}' <<<"$nodes")
	[[ -n $owner ]] || die "no kind node has the MAC $mac that answers for $ip"
	log "failover: docker stop $owner (it answers for svc1's $ip) while $CLIENT curls $ip ten times a second"
	docker exec "$CLIENT" sh -c "rm -f /tmp/failover; for i in \$(seq 100); do
		r=\$(curl -s --max-time 0.5 http://$ip | grep Hostname || echo FAILED); echo \"\$(date +%s.%N | cut -c1-14) \$r\" >>/tmp/failover; sleep 0.1
	done" &
	curling=$!
	sleep 2
	t0=$(date +%s.%N | cut -c1-14)
	docker stop "$owner" >/dev/null
	wait "$curling"
	docker exec "$CLIENT" awk -v t0="$t0" '
		{ at = $1 - t0; ok = $2 != "FAILED" }
		at >= 0 && !ok { failed++; last = at }
		at >= 0 { n++ }
		END { printf "%d of %d requests after the stop failed%s\n", failed, n, failed ? sprintf(", the last one %.1f s after it", last) : "" }' /tmp/failover
	mac=$(docker exec "$CLIENT" ip neigh show "$ip" | awk '{for (i = 1; i < NF; i++) if ($i == "lladdr") print $(i + 1)}')
	echo "$ip is now at $mac: $(awk -v mac="$mac" '$2 == mac {sub("^/", "", $1); print $1}' <<<"$nodes")"
	log "docker start $owner: it comes back and takes nothing back"
	docker start "$owner" >/dev/null
	${AFTER_NODE_START:-}
	k wait --for=condition=Ready "node/$owner" --timeout=5m >/dev/null
	k -n herald-system rollout status daemonset/herald-speaker --timeout=5m >/dev/null
	k get vips -A
fi

# ------------------------------------------------------------------------- monitoring
if [[ $MONITORING == yes || ($MONITORING == auto && -n $(command -v helm || true)) ]]; then
	need helm "https://helm.sh/docs/intro/install/ (or MONITORING=no)"
	log "kube-prometheus-stack: Prometheus at http://localhost:30001, Grafana at http://localhost:30002 (admin/herald)"
	cat >"$tmp/values.yaml" <<'EOF'
prometheus:
  service: {type: NodePort, nodePort: 30001}
  prometheusSpec:
    # Pick up herald's PodMonitors and PrometheusRule (config/prometheus), whatever their labels.
    podMonitorSelectorNilUsesHelmValues: false
    serviceMonitorSelectorNilUsesHelmValues: false
    ruleSelectorNilUsesHelmValues: false
    nodeSelector: {mynode: control-plane}
    tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]
grafana:
  adminPassword: herald
  sidecar: {dashboards: {searchNamespace: ALL}}
  service: {type: NodePort, nodePort: 30002}
  nodeSelector: {mynode: control-plane}
  tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]
# There is no kube-proxy to scrape: herald's speakers export herald_proxy_* instead.
kubeProxy: {enabled: false}
alertmanager: {enabled: false}
defaultRules: {create: false}
EOF
	helm repo add prometheus-community https://prometheus-community.github.io/helm-charts >/dev/null
	helm repo update prometheus-community >/dev/null
	helm upgrade --install kube-prometheus-stack prometheus-community/kube-prometheus-stack \
		--kube-context "kind-$CLUSTER" --namespace monitoring --create-namespace ${KPS_VERSION:+--version "$KPS_VERSION"} \
		--wait --timeout 10m -f "$tmp/values.yaml"
	# PodMonitors and alerts (config/prometheus), and the dashboard as a ConfigMap that
	# Grafana's sidecar loads (config/grafana; searchNamespace ALL above).
	k apply --server-side -k "$root/config/prometheus"
	k apply --server-side -k "$root/config/grafana"
fi

log "done. kubectl --context kind-$CLUSTER get svc,pods -o wide; $0 down removes it all"
