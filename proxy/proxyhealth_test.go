package proxy

import (
	"testing"
	"time"

	"herald.dev/herald/proxy/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAssessHealth(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return start.Add(time.Duration(s) * time.Second) }
	const timeout = 60 * time.Second
	for _, tc := range []struct {
		name     string
		now      time.Time
		families map[model.Family]familyTimes
		healthy  bool
		perFam   map[string]bool
		last     time.Time
	}{
		{name: "synced long ago, nothing queued", now: at(3600),
			families: map[model.Family]familyTimes{model.IPv4: {lastUpdated: at(0)}},
			healthy:  true, perFam: map[string]bool{"IPv4": true}, last: at(0)},
		{name: "queued, not late yet", now: at(59),
			families: map[model.Family]familyTimes{model.IPv4: {lastUpdated: at(0), pendingSince: at(0)}},
			healthy:  true, perFam: map[string]bool{"IPv4": true}, last: at(0)},
		{name: "queued for exactly the timeout", now: at(60),
			families: map[model.Family]familyTimes{model.IPv4: {lastUpdated: at(0), pendingSince: at(0)}},
			healthy:  false, perFam: map[string]bool{"IPv4": false}, last: at(0)},
		{name: "one family overdue makes the proxier unhealthy", now: at(200),
			families: map[model.Family]familyTimes{
				model.IPv4: {lastUpdated: at(190)},
				model.IPv6: {lastUpdated: at(10), pendingSince: at(100)},
			},
			healthy: false, perFam: map[string]bool{"IPv4": true, "IPv6": false}, last: at(190)},
		{name: "not started: left out", now: at(500),
			families: map[model.Family]familyTimes{model.IPv4: {pendingSince: at(0)}},
			healthy:  true, perFam: map[string]bool{}},
		{name: "no families", now: at(0), healthy: true, perFam: map[string]bool{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := assessHealth(tc.now, timeout, tc.families)
			if h.Healthy != tc.healthy || !h.CurrentTime.Equal(tc.now) || !h.LastUpdated.Equal(tc.last) || h.NodeEligible != nil {
				t.Errorf("health %+v, want healthy %v, last %v", h, tc.healthy, tc.last)
			}
			if len(h.Status) != len(tc.perFam) {
				t.Errorf("status %+v, want %v", h.Status, tc.perFam)
			}
			for f, ok := range tc.perFam {
				if s, found := h.Status[f]; !found || s.Healthy != ok || !s.LastUpdated.Equal(tc.families[familyNamed(f)].lastUpdated) {
					t.Errorf("status[%s] = %+v, want healthy %v", f, s, ok)
				}
			}
		})
	}
}

func familyNamed(name string) model.Family {
	if name == "IPv6" {
		return model.IPv6
	}
	return model.IPv4
}

func TestNodeEligible(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name string
		node *corev1.Node
		want bool
	}{
		{"unknown Node", nil, false},
		{"plain Node", &corev1.Node{}, true},
		{"other taints", &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "node.kubernetes.io/unschedulable", Effect: corev1.TaintEffectNoSchedule}}}}, true},
		{"being deleted", &corev1.Node{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}, false},
		{"autoscaler will delete it", &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "ToBeDeletedByClusterAutoscaler", Value: "1700000000", Effect: corev1.TaintEffectNoSchedule}}}}, false},
	} {
		if got := nodeEligible(tc.node); got != tc.want {
			t.Errorf("%s: eligible %v, want %v", tc.name, got, tc.want)
		}
	}
}
