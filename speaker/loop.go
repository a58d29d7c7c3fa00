package speaker

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/speaker/quorum"
)

// serve waits for the informers, joins the other speakers, then re-elects on every
// change until ctx ends.
func (s *Speaker) serve(ctx context.Context, c cache.Cache) error {
	if !c.WaitForCacheSync(ctx) {
		return ctx.Err()
	}
	s.synced.Store(true)
	// Join before the first election: alone, this node would elect itself for every IP.
	s.join(ctx)
	s.joined.Store(true)
	s.poke()

	joinTick := time.NewTicker(s.cfg.JoinInterval)
	defer joinTick.Stop()
	recheck := time.NewTicker(recheckDegraded)
	defer recheck.Stop()
	joinDone := make(chan struct{}, 1)
	joinDone <- struct{}{}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.trigger:
			s.runElection(ctx)
		case <-s.members.Events():
			s.runElection(ctx)
		case gap := <-s.stalls.reports:
			s.stalled(ctx, gap)
		case reached := <-s.stalls.synced:
			s.resumeAfterStall(ctx, reached)
		case <-recheck.C:
			// Hold ends with time, and a failed read of the records is retried; a
			// link losing its carrier is noticed here too.
			if s.decision.verdict.Mode != quorum.ModeQuorum || s.linkDown() {
				s.runElection(ctx)
			}
		case <-joinTick.C:
			// Joins to unreachable peers block up to the TCP timeout: never in the loop.
			select {
			case <-joinDone:
				go func() { s.join(ctx); joinDone <- struct{}{} }()
			default:
			}
		}
	}
}

func (s *Speaker) readyz(*http.Request) error {
	switch {
	case !s.synced.Load():
		return fmt.Errorf("Services, Nodes and advertisements not loaded yet")
	case !s.joined.Load():
		return fmt.Errorf("memberlist not joined yet")
	case !s.l2.Ready():
		return fmt.Errorf("ARP/NDP responders not up yet")
	}
	// A proxier turned off (--proxy=none, or kube-proxy runs here) does not hold
	// readiness back; one that is on must have programmed the Services once.
	if st := s.proxier.Status(); st.Disabled == "" && !st.Synced {
		if st.LastError != "" {
			return fmt.Errorf("service proxy not synced yet: %s", st.LastError)
		}
		return fmt.Errorf("service proxy not synced yet")
	}
	return nil
}

// electionSees says whether a Node update changes what the election reads of it
// (nodeView: its labels, NetworkUnavailable, cordon and taints). A kubelet's status updates do not:
// at 1,000 nodes they would run an election every few hundred milliseconds.
func electionSees(old, cur any) bool {
	o, ok1 := old.(*corev1.Node)
	c, ok2 := cur.(*corev1.Node)
	if !ok1 || !ok2 {
		return true
	}
	return !reflect.DeepEqual(nodeView(o), nodeView(c))
}

// watch makes every change of an object the election reads poke the loop.
func (s *Speaker) watch(ctx context.Context, c cache.Cache) error {
	h := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.poke() },
		UpdateFunc: func(any, any) { s.poke() },
		DeleteFunc: func(any) { s.poke() },
	}
	for _, obj := range []client.Object{
		&corev1.Service{}, &discoveryv1.EndpointSlice{}, &corev1.Node{},
		&heraldv1.L2Advertisement{}, &heraldv1.IPAddressPool{},
	} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
		h := h
		if _, ok := obj.(*corev1.Node); ok {
			h.UpdateFunc = func(old, cur any) {
				if electionSees(old, cur) {
					s.poke()
				} else {
					s.pokeProxier()
				}
			}
		}
		if _, err := inf.AddEventHandler(h); err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
	}
	return nil
}
