#!/usr/bin/env bash
# Prints the kind cluster config of the walkthrough, the one place it is written:
# one control plane and three workers with the walkthrough's labels, its API and
# metrics flags and NodePort mappings, podSubnet 10.10.0.0/16, serviceSubnet
# 10.200.1.0/24. hack/kind-demo.sh (kind's own images) and hack/kind/up.sh (the offline
# node image) both create their clusters from it.
#
# Usage: config.sh PROXY_MODE [offline]
#   PROXY_MODE  kind's kubeProxyMode: none (herald's proxier serves every Service),
#               iptables or nftables (kube-proxy does, herald's proxier stays off)
#   offline     the node image of hack/kind/node-image.sh: no kindnetd (static-cni.sh
#               wires the pod network), kubelet allowed on cgroup v1, and containerd
#               told to clamp OOM scores where the kernel lacks CAP_SYS_RESOURCE
set -euo pipefail
. "$(dirname "$0")/lib.sh"

mode=${1:?usage: config.sh PROXY_MODE [offline]}
offline=${2:-}
case $mode in none | iptables | nftables) ;; *) die "kubeProxyMode $mode: want none, iptables or nftables" ;; esac
[[ -z $offline || $offline == offline ]] || die "usage: config.sh PROXY_MODE [offline]"

cat <<YAML
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  kubeProxyMode: $mode
  podSubnet: $POD_SUBNET
  serviceSubnet: $SERVICE_SUBNET
YAML
if [[ -n $offline ]]; then
	cat <<-YAML
		  # kindnetd cannot be built offline: static-cni.sh wires the pod network instead.
		  disableDefaultCNI: true
		kubeadmConfigPatches:
		# kubelet 1.35+ refuses to start on cgroup v1 unless told otherwise.
		- |
		  kind: KubeletConfiguration
		  failCgroupV1: false
	YAML
	# Without CAP_SYS_RESOURCE nothing in a node may lower an OOM score below its own:
	# the kubelet asks -998 for every pod sandbox and runc's init then fails. containerd
	# clamps the scores to its own when told to (as kind sets it for rootless nodes).
	if lacks_sys_resource; then
		cat <<-YAML
			containerdConfigPatches:
			- |-
			  [plugins."io.containerd.grpc.v1.cri"]
			    restrict_oom_score_adj = true
		YAML
	fi
fi
cat <<YAML
nodes:
- role: control-plane
  labels: {mynode: control-plane, topology.kubernetes.io/zone: ap-northeast-2a}
  # The walkthrough's: every API, and metrics the monitoring can scrape from outside
  # the node. kind turns these map-form extraArgs into kubeadm v1beta4's lists.
  # (Its two feature gates are GA in v1.36 and left out.)
  kubeadmConfigPatches:
  - |
    kind: ClusterConfiguration
    apiServer:
      extraArgs: {runtime-config: api/all=true}
    controllerManager:
      extraArgs: {bind-address: 0.0.0.0}
    etcd:
      local:
        extraArgs: {listen-metrics-urls: http://0.0.0.0:2381}
    scheduler:
      extraArgs: {bind-address: 0.0.0.0}
  - |
    kind: KubeProxyConfiguration
    metricsBindAddress: 0.0.0.0
  # NodePorts of Prometheus (30001) and Grafana (30002) and three more, reachable
  # from the host as on the walkthrough's laptop.
  extraPortMappings:
  - {containerPort: 30000, hostPort: 30000}
  - {containerPort: 30001, hostPort: 30001}
  - {containerPort: 30002, hostPort: 30002}
  - {containerPort: 30003, hostPort: 30003}
  - {containerPort: 30004, hostPort: 30004}
- role: worker
  labels: {mynode: worker1, topology.kubernetes.io/zone: ap-northeast-2a}
- role: worker
  labels: {mynode: worker2, topology.kubernetes.io/zone: ap-northeast-2b}
- role: worker
  labels: {mynode: worker3, topology.kubernetes.io/zone: ap-northeast-2c}
YAML
