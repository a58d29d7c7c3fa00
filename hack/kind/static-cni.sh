#!/usr/bin/env bash
# Pod networking for a kind cluster created with disableDefaultCNI (kindnetd, kind's
# CNI, is its own module and cannot be built here). It does statically what kindnetd
# does: on every node a ptp + host-local conflist for the node's .spec.podCIDR (plus
# portmap for hostPorts), a route to every other node's podCIDR via that node's
# address (all nodes share one Docker bridge, so no overlay is needed), and
# masquerading of pod traffic that leaves the pod network. Idempotent; run again after
# nodes are added or restarted. IPv4 only. Usage: static-cni.sh CLUSTER POD_SUBNET
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cluster=${1:-$CLUSTER} pod_subnet=${2:-10.10.0.0/16}
k() { "$KUBECTL" --context "kind-$cluster" "$@"; }

# "name podCIDR ipv4" of every node; the podCIDR appears once the controller-manager
# has allocated it (seconds after the node registers).
for _ in $(seq 60); do
	nodes=$(k get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.spec.podCIDR} {range .status.addresses[?(@.type=="InternalIP")]}{.address} {end}{"\n"}{end}' |
		awk '{ip = ""; for (i = 3; i <= NF; i++) if ($i ~ /^[0-9.]+$/) { ip = $i; break } print $1, $2, ip}')
	[[ -n $nodes ]] && ! awk '$2 == "" || $3 == "" {bad = 1} END {exit !bad}' <<<"$nodes" && break
	sleep 2
done
awk '$2 == "" || $3 == "" {bad = 1} END {exit bad}' <<<"$nodes" || die "nodes without a podCIDR or an InternalIP: $nodes"

while read -r node cidr ip; do
	conf=$(jq -n --arg cidr "$cidr" '{
		cniVersion: "0.4.0", name: "herald-static",
		plugins: [
			{type: "ptp", mtu: 1500, ipMasq: false,
			 ipam: {type: "host-local", ranges: [[{subnet: $cidr}]], routes: [{dst: "0.0.0.0/0"}]}},
			{type: "portmap", capabilities: {portMappings: true}}
		]}')
	routes=$(awk -v self="$node" '$1 != self {printf "ip route replace %s via %s; ", $2, $3}' <<<"$nodes")
	docker exec -i "$node" sh -euc "
		mkdir -p /etc/cni/net.d
		cat >/etc/cni/net.d/.10-herald-static.conflist.tmp
		mv /etc/cni/net.d/.10-herald-static.conflist.tmp /etc/cni/net.d/10-herald-static.conflist
		$routes
		rule='-s $pod_subnet ! -d $pod_subnet -m comment --comment herald-static-cni -j MASQUERADE'
		iptables -t nat -C POSTROUTING \$rule 2>/dev/null || iptables -t nat -A POSTROUTING \$rule
	" <<<"$conf"
	log "$node: podCIDR $cidr via $ip"
done <<<"$nodes"
