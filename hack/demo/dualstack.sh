# The dual-stack part of hack/demo.sh, sourced by it when the lab is dual-stack: one
# Service with an IPv4 and an IPv6 VIP, both owned by one node.

say "Dual-stack: svc-dual, RequireDualStack, at two addresses of the pool dual-pool (hack/demo/dualstack.yaml)"
k apply -f hack/demo/dualstack.yaml
k wait --for=jsonpath='{.status.loadBalancer.ingress[1].ip}' service/svc-dual --timeout=60s >/dev/null
run kubectl get svc svc-dual
k get svc svc-dual
mapfile -t dvips < <(k get svc svc-dual -o jsonpath='{range .status.loadBalancer.ingress[*]}{.ip}{"\n"}{end}')
url_of() { if [[ $1 == *:* ]]; then echo "http://[$1]/"; else echo "http://$1/"; fi; }

say "Which node answers for each VIP of svc-dual, asked from the client: ARP for IPv4, NDP for IPv6"
for v in "${dvips[@]}"; do "$lab" who-has "$v" || true; done
downer=""
for v in "${dvips[@]}"; do
  o=$("$lab" who-has "$v" 2>/dev/null | sed -E 's/.*\((.*)\)$/\1/' | head -1 || true)
  if [[ -n $downer && $o != "$downer" ]]; then echo "the two VIPs have different owners: $downer and $o"; fi
  downer=${o:-$downer}
done
echo "one owner for both families: ${downer:-(none)}"

say "100 curls per family from the client, counted by Hostname"
for v in "${dvips[@]}"; do
  run "for i in {1..100}; do curl -s $(url_of "$v") | grep Hostname; done | sort | uniq -c | sort -nr"
  "$lab" curl -n 100 --parallel 1 --timeout 2s "$(url_of "$v")" || true
done

v6=""
for v in "${dvips[@]}"; do if [[ $v == *:* ]]; then v6=$v; fi; done
if [[ $proxy == nftables ]]; then
  say "svc-dual's IPv6 VIP on its owner ${downer:-(none)}, table ip6 herald: service-ips -> external- -> service- (DNAT)"
else
  say "svc-dual's IPv6 VIP on its owner ${downer:-(none)}: ip6tables KUBE-SERVICES -> KUBE-EXT -> KUBE-SVC -> KUBE-SEP"
fi
if [[ -z $downer || -z $v6 ]]; then
  echo "nobody answers for ${v6:-the IPv6 VIP}: see bin/lab status and the speakers' logs."
elif [[ $proxy == nftables ]]; then
  nft_path ip6 "$downer" "$v6"
elif ! "$lab" exec "$downer" ip6tables -V >/dev/null 2>&1; then
  echo "ip6tables is not installed here (apt-get install iptables)."
else
  run "ip6tables-save -t nat | grep -- $v6"
  "$lab" exec "$downer" ip6tables-save -t nat | grep -- "$v6" || true
  nat_path ip6tables "$downer" "$v6"
fi

say "Failover of both families: pulling the cable of svc-dual's owner (${downer:-none}), measured from the client"
"$lab" failover "${dvips[@]}" --fault link-down || true
sleep 2
echo "after the link came back:"
for v in "${dvips[@]}"; do "$lab" who-has "$v" || true; done
