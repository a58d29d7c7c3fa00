#!/usr/bin/env bash
# `make demo`: the user's walkthrough (a kind cluster with MetalLB's layer-2 mode)
# with herald, in the network-namespace lab (hack/lab, internal/lab): a control plane
# at 172.18.0.2, workers worker, worker2, worker3, the pool 172.18.255.200-250,
# webpod1 on worker and webpod2 on worker2, svc1..svc3, and a client at 172.18.0.100
# standing in for netshoot. Needs root. Leaves the lab running.
# With DUAL_STACK=1 the lab is dual-stack (bin/lab up --dual-stack) and the walkthrough
# ends with one dual-stack Service, svc-dual (hack/demo/dualstack.yaml): both VIPs, one
# owner, curls per family, the IPv6 VIP's path, a failover of both families.
# With PROXY=nftables the speakers proxy in nftables mode (bin/lab up --proxy nftables)
# and the paths of svc1 (and svc-dual's IPv6 VIP) are shown in tables ip (ip6) herald
# instead of the nat tables of iptables (ip6tables).
#   hack/demo.sh        run the walkthrough
#   hack/demo.sh down   remove the lab
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export LAB_RUN_DIR="$root/.run/lab"
lab="$root/bin/lab"

if [[ $(id -u) -ne 0 ]]; then
  echo "the demo builds network namespaces and needs root: sudo make demo" >&2
  exit 1
fi
mkdir -p bin
go build -o "$lab" ./hack/lab

if [[ "${1:-}" == "down" ]]; then
  exec "$lab" down
fi

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '\033[2m$ %s\033[0m\n' "$*"; }
# nat_path TOOL NODE VIP shows, with TOOL (iptables or ip6tables) in NODE's namespace,
# the nat chains VIP goes through as the walkthrough does, with counters: it follows the
# jumps with -S from KUBE-SERVICES to KUBE-EXT, KUBE-SVC and KUBE-SEP.
nat_path() {
  local tool=$1 node=$2 vip=$3 ext svc sep
  nat() { "$lab" exec "$node" "$tool" -t nat "$@"; }
  chain_after() { nat -S "$1" | grep -- "$2" | grep -oE "$3-[A-Z0-9]+" | sort -u; }
  show() { run "$tool" -t nat -L "$1" -n -v; nat -L "$1" -n -v | grep -E -- "${2:-.}" || true; }
  show KUBE-SERVICES "pkts|$vip"
  for ext in $(chain_after KUBE-SERVICES "$vip" KUBE-EXT); do
    show "$ext"
    for svc in $(chain_after "$ext" . KUBE-SVC); do
      show "$svc"
      for sep in $(chain_after "$svc" . KUBE-SEP); do show "$sep"; done
    done
  done
}
# nft_path FAMILY NODE VIP shows, with nft in NODE's namespace, the way of VIP through
# table FAMILY herald (ip or ip6): its element of the service-ips map, then the
# external- and service- chains it goes to, with their rules.
nft_path() {
  local family=$1 node=$2 vip=$3 ext svc
  nft() { "$lab" exec "$node" nft "$@"; }
  run nft list map "$family" herald service-ips "| grep $vip"
  nft list map "$family" herald service-ips | grep -F "$vip " || true
  for ext in $(nft list map "$family" herald service-ips | grep -F "$vip " | grep -oE 'external-[^ ,}]+' | sort -u); do
    run nft list chain "$family" herald "$ext"
    nft list chain "$family" herald "$ext"
    for svc in $(nft list chain "$family" herald "$ext" | grep -oE 'service-[^ ,}]+' | sort -u); do
      run nft list chain "$family" herald "$svc"
      nft list chain "$family" herald "$svc"
    done
  done
}
k() { "$lab" kubectl "$@"; }

say "Building the lab (a previous one is removed first)"
"$lab" down >/dev/null
dual=${DUAL_STACK:-0}
[[ $dual == 1 ]] && up_flags=(--dual-stack) || up_flags=()
proxy=${PROXY:-iptables}
up_flags+=(--proxy "$proxy")
"$lab" up "${up_flags[@]}" >/dev/null # its progress goes to stderr; its hints are repeated at the end
herald="$LAB_RUN_DIR/herald"

say "kubectl get nodes -o wide"
k get nodes -o wide

say "kubectl apply: the IPAddressPool and L2Advertisement of config/samples/"
k apply -f config/samples/ipaddresspool.yaml -f config/samples/l2advertisement.yaml

say "webpod1 on worker, webpod2 on worker2 (hack/demo/webpods.yaml)"
k apply -f hack/demo/webpods.yaml
k wait --for=condition=Ready pod/webpod1 pod/webpod2 --timeout=60s >/dev/null
run kubectl get pod -o wide
k get pod -o wide

say "svc1, svc2, svc3: type LoadBalancer, selecting app=webpod (hack/demo/services.yaml)"
k apply -f hack/demo/services.yaml
for s in svc1 svc2 svc3; do
  k wait --for=jsonpath='{.status.loadBalancer.ingress[0].ip}' "service/$s" --timeout=60s >/dev/null
done

say "kubectl get ipaddresspools,l2advertisements,svc"
run kubectl get ipaddresspools,l2advertisements -n herald-system
k get ipaddresspools,l2advertisements -n herald-system
run kubectl get svc
k get svc
run kubectl get endpointslices
k get endpointslices

mapfile -t vips < <(k get svc svc1 svc2 svc3 -o jsonpath='{range .items[*]}{.status.loadBalancer.ingress[0].ip}{"\n"}{end}')

say "Which node answers ARP for each VIP, asked from the client (172.18.0.100)"
for v in "${vips[@]}"; do "$lab" who-has "$v" || true; done
run kubectl get events --field-selector involvedObject.name=svc1
k get events --field-selector involvedObject.name=svc1 -o custom-columns=TYPE:.type,REASON:.reason,FROM:.reportingComponent,MESSAGE:.message

say "100 curls per VIP from the client, counted by Hostname"
for v in "${vips[@]}"; do
  run "for i in {1..100}; do curl -s $v | grep Hostname; done | sort | uniq -c | sort -nr"
  "$lab" curl -n 100 --parallel 1 --timeout 2s "http://$v/" || true
done

say "The client's neighbour table: each VIP at its owner's MAC"
# Name the MACs after the lab's hosts, from `lab status`.
declare -A host_of
while read -r name _ _ _ mac _; do host_of[$mac]=$name; done < <("$lab" status | awk '$5 ~ /^02:42:/')
run ip neigh show dev eth0
"$lab" exec client ip neigh show dev eth0 | while read -r line; do
  mac=$(grep -oE '([0-9a-f]{2}:){5}[0-9a-f]{2}' <<<"$line" || true)
  echo "$line${mac:+   <- ${host_of[$mac]:-?}}"
done

owner=$("$lab" who-has "${vips[0]}" 2>/dev/null | sed -E 's/.*\((.*)\)$/\1/' | head -1 || true)
if [[ $proxy == nftables ]]; then
  say "svc1 on its owner ${owner:-(none)}, table ip herald: service-ips -> external- -> service- (DNAT)"
else
  say "svc1 on its owner ${owner:-(none)}: KUBE-SERVICES -> KUBE-EXT -> KUBE-SVC -> KUBE-SEP"
fi
if [[ -z $owner ]]; then
  echo "nobody answers ARP for ${vips[0]}: see bin/lab status and the speakers' logs."
elif [[ $proxy == nftables ]]; then
  nft_path ip "$owner" "${vips[0]}"
elif ! "$lab" exec "$owner" iptables -V >/dev/null 2>&1; then
  echo "iptables is not installed here (apt-get install iptables)."
else
  nat_path iptables "$owner" "${vips[0]}"
fi

# herald status reads only the API server: the VIPStatus objects the speakers publish.
status() {
  run herald status "$@"
  "$lab" exec cp "$herald" status "$@" 2>&1 || true
}
say "herald status: each VIP's owner node, as the speakers publish it in the API"
status
run kubectl get vips
k get vips

say "Failover: pulling the cable of svc1's owner (${owner:-none}), measured from the client"
if "$lab" failover "${vips[0]}" --fault link-down --restore=false; then
  sleep 1
  echo "herald status with ${owner:-the owner}'s cable pulled: a new owner, one more leader change"
  status -n default
fi
if [[ -n $owner ]]; then
  "$lab" link-up "$owner" >/dev/null
  sleep 2
  echo "after the link came back: ${owner} takes nothing back (no fail-back: a move would break open connections)"
  "$lab" who-has "${vips[0]}" || true
  status -n default
  echo "herald rebalance svc1: back to the node the hash places it on, on purpose"
  "$lab" exec cp "$herald" rebalance svc1 -n default || true
  sleep 2
  "$lab" who-has "${vips[0]}" || true
fi

if [[ $dual == 1 ]]; then
  source hack/demo/dualstack.sh
fi

v=${vips[0]}
printf '\nThe lab keeps running (state and logs in %s). Try:\n' "$LAB_RUN_DIR"
hint() { printf '  %-50s %s\n' "$1" "$2"; }
hint "bin/lab status" "what runs where, PIDs, pods"
hint "bin/lab kubectl get svc -w" "kubectl inside the lab"
hint "bin/lab curl -n 100 http://$v/" "the walkthrough's curl loop, from the client"
hint "bin/lab who-has $v" "which node answers ARP"
hint "bin/lab exec cp ${herald#"$root"/} status -o wide" "owners, MACs, leader changes (and why none)"
hint "bin/lab exec client ip neigh" "a command in a lab namespace (cp, worker..., client, webpod1)"
hint "bin/lab failover $v --fault kill" "measured failover: link-down, kill (SIGKILL), stop (SIGTERM)"
hint "bin/lab link-down worker2" "faults: link-up, kill-speaker, stop-speaker, start-speaker, restart-controller"
hint "bin/lab partition worker2" "cut worker2's memberlist (port 7946): one MAC still answers each VIP; bin/lab heal"
echo "Remove it with: make demo-down"
