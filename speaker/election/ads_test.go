package election

import "testing"

// TestElectAdvertisements: which advertisements cover a Service (pools, serviceSelectors)
// and the interfaces the owner answers on.
func TestElectAdvertisements(t *testing.T) {
	const a = "10.20.30.1"
	nodes := []Node{mkNode("iris1"), mkNode("iris2")}
	both := hashOrder(a, "iris1", "iris2")
	svc := []Service{mkSvc("ns/a", ips(a), svcLabel("app", "web"))}

	runElect(t, []electCase{
		{name: "no advertisement: nobody",
			view: view(nil, nodes...), services: svc,
			want: map[string]want{a: none(ReasonNoAdvertisement)}},
		{name: "advertisement of another pool: nobody",
			view: view(ads(mkAd("l2", []string{"other"})), nodes...), services: svc,
			want: map[string]want{a: none(ReasonNoAdvertisement)}},
		{name: "advertisement naming the pool",
			view: view(ads(mkAd("l2", []string{"other", "default"})), nodes...), services: svc,
			want: map[string]want{a: owned(both)}},
		{name: "AllPools covers every pool",
			view: view(ads(allPools("l2")), nodes...), services: svc,
			want: map[string]want{a: owned(both)}},
		{name: "pool selectors that matched nothing cover nothing",
			view: view(ads(mkAd("l2", nil)), nodes...), services: svc,
			want: map[string]want{a: none(ReasonNoAdvertisement)}},
		{name: "IP in no pool: nobody, even with AllPools",
			view: view(ads(allPools("l2")), nodes...), services: []Service{mkSvc("ns/a", ips(a), inPool(""))},
			want: map[string]want{a: none(ReasonNoPool)}},
		{name: "serviceSelectors selecting the Service",
			view: view(ads(mkAd("l2", []string{"default"}, forSvcs("app=web"))), nodes...), services: svc,
			want: map[string]want{a: owned(both)}},
		{name: "serviceSelectors are OR-ed",
			view: view(ads(mkAd("l2", []string{"default"}, forSvcs("app=db", "app in (web,api)"))), nodes...), services: svc,
			want: map[string]want{a: owned(both)}},
		{name: "serviceSelectors refusing the Service: nobody",
			view: view(ads(mkAd("l2", []string{"default"}, forSvcs("app=db"))), nodes...), services: svc,
			want: map[string]want{a: none(ReasonNoAdvertisement)}},
		{name: "only the ad selecting the Service brings its nodes",
			view: view(ads(
				mkAd("l2-web", []string{"default"}, forSvcs("app=web"), onNodes("kubernetes.io/hostname=iris1")),
				mkAd("l2-db", []string{"default"}, forSvcs("app=db"), onNodes("kubernetes.io/hostname=iris2"))), nodes...),
			services: svc,
			want:     map[string]want{a: owned([]string{"iris1"})}},
		{name: "ads per node (MetalLB TestL2ElectionConsistentButAdsPerNode): every ad counts",
			view: view(ads(
				mkAd("l2-1", []string{"default"}, onNodes("kubernetes.io/hostname=iris1")),
				mkAd("l2-2", []string{"default"}, onNodes("kubernetes.io/hostname=iris2"))), nodes...),
			services: svc,
			want:     map[string]want{a: owned(both)}},
		{name: "interfaces: the union of the ads selecting the owner",
			view: view(ads(
				mkAd("l2-a", []string{"default"}, ifaces("eth1", "eth0")),
				mkAd("l2-b", []string{"default"}, ifaces("eth2", "eth0")),
				mkAd("l2-other", []string{"other"}, ifaces("eth9"))), nodes...),
			services: svc,
			want:     map[string]want{a: {candidates: both, interfaces: []string{"eth0", "eth1", "eth2"}}}},
		{name: "interfaces: an ad naming none means every interface",
			view: view(ads(
				mkAd("l2-a", []string{"default"}, ifaces("eth1")),
				mkAd("l2-b", []string{"default"})), nodes...),
			services: svc,
			want:     map[string]want{a: owned(both)}},
		{name: "interfaces: ads not selecting the owner do not count",
			view: view(ads(
				mkAd("l2-a", []string{"default"}, ifaces("eth1"), onNodes("kubernetes.io/hostname="+both[0])),
				mkAd("l2-b", []string{"default"}, ifaces("eth2"), onNodes("kubernetes.io/hostname="+both[1]))), nodes...),
			services: svc,
			want:     map[string]want{a: {candidates: both, interfaces: []string{"eth1"}}}},
		{name: "interfaces: an all-interfaces ad for another node does not widen",
			view: view(ads(
				mkAd("l2-a", []string{"default"}, ifaces("eth1"), onNodes("kubernetes.io/hostname="+both[0])),
				mkAd("l2-b", []string{"default"}, onNodes("kubernetes.io/hostname="+both[1]))), nodes...),
			services: svc,
			want:     map[string]want{a: {candidates: both, interfaces: []string{"eth1"}}}},
		{name: "interfaces: ads refusing the Service do not count",
			view: view(ads(
				mkAd("l2-a", []string{"default"}, ifaces("eth1"), forSvcs("app=web")),
				mkAd("l2-b", []string{"default"}, forSvcs("app=db"))), nodes...),
			services: svc,
			want:     map[string]want{a: {candidates: both, interfaces: []string{"eth1"}}}},
	})
}
