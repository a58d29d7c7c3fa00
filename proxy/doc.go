// Package proxy is the embedded kube-proxy-compatible proxier: the shell around the
// pure rule generator in proxy/iptables.
//
// The speaker hands the proxier the full lists of Services and EndpointSlices from its
// informer cache (Update) whenever one changes; Run converts nothing itself but syncs:
//
//	Update ──▶ tracker (convert.go: API objects → iptables.Service, reused per
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
// creates kube-proxy's, so a KUBE-PROXY-CANARY means kube-proxy programs the node; the
// proxier then stays off (Status.Disabled, herald_proxy_disabled{reason="kube-proxy"})
// and the speaker goes on announcing.
//
// Files: config.go (Config, flags), convert.go (API objects), tracker.go (conversion
// cache and change times), proxier.go (Proxier, Update, Run), schedule.go (rate
// limit), sync.go (one sync), canary.go (flush detection, kube-proxy detection),
// staleflows.go (UDP conntrack cleanup), healthcheck.go (health check node ports),
// metrics.go. The commands themselves run in proxy/runner.
package proxy
