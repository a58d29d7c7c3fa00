// Package proxy is the embedded kube-proxy-compatible proxier: the shell around the
// pure rule generator in proxy/iptables.
//
// The speaker hands the proxier the full lists of Services and EndpointSlices from its
// informer cache (Update) whenever one changes; Run converts nothing itself but syncs:
//
//	Update ──▶ tracker (convert.go: API objects → model.Service, reused per
//	           resourceVersion) ──▶ latest state, wake
//	Run ──▶ schedule (≥ MinSyncPeriod apart) ──▶ syncAll, per family:
//	        full (first, after an error, canary gone, node changed, every SyncPeriod):
//	            iptables-save of filter and nat (stale chains, existing jumps), then
//	            canaries and missing jumps from built-in chains (go-iptables)
//	        partial: iptables.ChangedServices since the last success; stale chains
//	            from the previous payload's ActiveNATChains (no iptables-save)
//	        iptables.Generate ──▶ one iptables-restore -w 5 --noflush --counters
//	        ──▶ conntrack -D for stale UDP flows, health check node ports, metrics
//
// Coexistence: herald keeps its own canary chain (HERALD-PROXY-CANARY) and never
// creates kube-proxy's, so a KUBE-PROXY-CANARY means kube-proxy programs the node, and
// so do the nftables tables ip/ip6 kube-proxy of its nftables mode; the proxier then
// stays off (Status.Disabled, herald_proxy_disabled{reason="kube-proxy"}), frees
// kube-proxy's health port, and the speaker goes on announcing.
//
// Families: those of the node IPs whose tools (and, for IPv6, kernel support) the host
// has; a dual-stack node without ip6tables is programmed for IPv4 only
// (Status.MissingFamilies), a node without iptables is an error.
//
// Health: kube-proxy's /healthz and /livez on --healthz-bind-address, and the same
// verdict as serviceProxyHealthy of the health check node ports.
//
// Files: config.go (Config, flags), convert.go (API objects), tracker.go (conversion
// cache and change times), proxier.go (Proxier, Update, Run), schedule.go (rate
// limit), sync.go (one sync), families.go (which families), canary.go (flush
// detection, kube-proxy detection), nftables.go (kube-proxy's nftables mode),
// staleflows.go (UDP conntrack cleanup), healthcheck.go (health check node ports),
// proxyhealth.go and healthz.go (the proxier's own health), metrics.go. The commands
// themselves run in proxy/runner.
package proxy
