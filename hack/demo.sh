#!/usr/bin/env bash
# `make demo` until the network-namespace lab exists: a local control plane (etcd,
# kube-apiserver, kube-controller-manager built from the Go module proxy), herald's
# controller, the walkthrough's pool and three LoadBalancer Services, and their
# EXTERNAL-IPs.
#   hack/demo.sh        run the demo, leave it running, print how to use it
#   hack/demo.sh down   stop everything the demo started
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
run="$root/.run/demo"
cd "$root"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

stop_pid() { # stop_pid NAME: stop the process whose pid the demo recorded in NAME.pid
  local f="$run/$1.pid"
  [[ -f "$f" ]] || return 0
  local pid; pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

down() {
  stop_pid controller
  stop_pid controlplane
  rm -f "$run/ready" "$run/kubeconfig"
}

if [[ "${1:-}" == "down" ]]; then
  down
  echo "demo stopped"
  exit 0
fi

down # a previous run's leftovers
mkdir -p "$run"
assets=$(hack/setup-test-binaries.sh)
kubectl="$assets/kubectl"
[[ -x bin/herald ]] || make build
go build -o bin/controlplane ./hack/controlplane

say "Starting etcd, kube-apiserver and kube-controller-manager v1.36.3 on loopback"
bin/controlplane --dir "$run" --assets "$assets" >"$run/controlplane.log" 2>&1 &
echo $! >"$run/controlplane.pid"
for _ in $(seq 300); do
  [[ -f "$run/ready" ]] && break
  kill -0 "$(cat "$run/controlplane.pid")" 2>/dev/null || { cat "$run/controlplane.log"; exit 1; }
  sleep 0.2
done
[[ -f "$run/ready" ]] || { echo "control plane did not come up; see $run/controlplane.log"; exit 1; }
export KUBECONFIG="$run/kubeconfig"
"$kubectl" get --raw /version | head -c 200; echo

say "kubectl apply -f config/samples/  (IPAddressPool my-ippool 172.18.255.200-172.18.255.250, L2Advertisement)"
"$kubectl" create namespace herald-system
"$kubectl" apply -f config/samples/ipaddresspool.yaml -f config/samples/l2advertisement.yaml

say "Starting herald controller"
bin/herald controller --kubeconfig "$KUBECONFIG" --namespace herald-system \
  --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 \
  >"$run/controller.log" 2>&1 &
echo $! >"$run/controller.pid"

say "Creating svc1, svc2, svc3 (type LoadBalancer)"
"$kubectl" apply -f hack/demo/services.yaml
for s in svc1 svc2 svc3; do
  "$kubectl" wait --for=jsonpath='{.status.loadBalancer.ingress[0].ip}' "service/$s" --timeout=60s >/dev/null
done

say "kubectl get ipaddresspools,l2advertisements -n herald-system"
"$kubectl" get ipaddresspools,l2advertisements -n herald-system
say "kubectl get svc"
"$kubectl" get svc
say "Events of svc1"
"$kubectl" get events --field-selector involvedObject.name=svc1 -o custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message

say "kubectl explain ipaddresspools.spec.addresses"
"$kubectl" explain ipaddresspools.spec.addresses | sed -n '/DESCRIPTION/,$p'

say "Bad input is refused at admission"
cat <<'YAML' | "$kubectl" apply -f - 2>&1 || true
apiVersion: herald.dev/v1beta1
kind: IPAddressPool
metadata: {name: bad, namespace: herald-system}
spec:
  addresses: ["172.18.255.250-172.18.255.200"]
YAML

cat <<MSG

The demo keeps running. Try:
  export KUBECONFIG=$KUBECONFIG
  $kubectl get svc -w
  $kubectl describe ipaddresspool my-ippool -n herald-system
Logs are in $run. Stop it with: make demo-down
MSG
