package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/cmd/herald/app"
	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/testkit"
)

// `herald status`, the binary the lab runs, reading the lab's API server: the owner
// it shows is the node answering ARP for the VIP, with that node's MAC, before a
// failover (worker3's speaker killed), after it, and after worker3 came back; each
// takeover adds one leader change. The VIPStatus goes with its Service.
func TestLabStatus(t *testing.T) {
	f := fullLabFor(t)
	svc, vip := f.serviceFirstFor(t, "status", "worker3")

	f.expectOwner(t, vip, "worker3", "before the failover")
	before := f.expectStatus(t, svc.Name, vip, "worker3", "before the failover")
	if before.LeaderChanges < 1 || before.Since == "" || before.Interface != "eth0" || before.Pool == "" {
		t.Errorf("before the failover: %+v, want at least one leader change, since, interface eth0 and a pool", before)
	}

	table := f.heraldStatus(t)
	t.Logf("herald status before the failover:\n%s", table)
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if h := strings.Fields(lines[0]); strings.Join(h, " ") != "NAMESPACE SERVICE VIP OWNER NODE MAC SINCE LEADER CHANGES POOL" {
		t.Errorf("herald status header: %q", lines[0])
	}
	found := false
	for _, l := range lines[1:] {
		if cols := strings.Fields(l); len(cols) >= 8 && cols[0] == "default" && cols[1] == svc.Name {
			found = true
			if cols[2] != vip.String() || cols[3] != "worker3" || cols[4] != before.MAC || cols[6] != fmt.Sprint(before.LeaderChanges) {
				t.Errorf("herald status row of %s: %q", svc.Name, l)
			}
		}
	}
	if !found {
		t.Errorf("herald status has no row for default/%s:\n%s", svc.Name, table)
	}

	res, err := f.s.MeasureFailover(t.Context(), vip, lab.FaultKill)
	restarted := false
	restart := func() {
		if !restarted {
			restarted = true
			if err := f.s.StartSpeaker(context.Background(), "worker3"); err != nil {
				t.Errorf("starting worker3's speaker again: %v", err)
			}
		}
	}
	defer restart()
	if err != nil {
		t.Fatalf("killing the owner's speaker: %v", err)
	}
	next := f.owner(vip, without(f.nodes, "worker3")...)
	if res.OldOwner != "worker3" || res.NewOwner != next {
		t.Fatalf("ARP: owner went from %s to %s, want worker3 to %s", res.OldOwner, res.NewOwner, next)
	}
	f.expectOwner(t, vip, next, "after worker3's speaker was killed")
	after := f.expectStatus(t, svc.Name, vip, next, "after worker3's speaker was killed")
	t.Logf("after the failover: %+v", after)
	if after.LeaderChanges != before.LeaderChanges+1 {
		t.Errorf("after the failover: %d leader changes, want %d", after.LeaderChanges, before.LeaderChanges+1)
	}
	if after.Since <= before.Since {
		t.Errorf("after the failover: since %s, not after %s", after.Since, before.Since)
	}

	// worker3 comes back and takes nothing back (no fail-back): no leader change.
	restart()
	f.expectOwner(t, vip, next, "after worker3's speaker came back")
	stayed := f.expectStatus(t, svc.Name, vip, next, "after worker3's speaker came back")
	if stayed.LeaderChanges != after.LeaderChanges {
		t.Errorf("after worker3 came back: %d leader changes, want still %d", stayed.LeaderChanges, after.LeaderChanges)
	}

	// herald rebalance, run as a user would, sends the VIP back to worker3.
	out, err := f.s.Exec(t.Context(), lab.CPHost, f.s.Herald, "rebalance", "--kubeconfig", f.s.Kubeconfig, "-n", "default", svc.Name)
	if err != nil || !strings.Contains(string(out), "rebalance requested") {
		t.Fatalf("herald rebalance %s: %v\n%s", svc.Name, err, out)
	}
	f.expectOwner(t, vip, "worker3", "after herald rebalance")
	back := f.expectStatus(t, svc.Name, vip, "worker3", "after herald rebalance")
	if back.LeaderChanges != before.LeaderChanges+2 {
		t.Errorf("after the rebalance: %d leader changes, want %d", back.LeaderChanges, before.LeaderChanges+2)
	}

	f.deleteService(t, svc.Name)
	testkit.Eventually(t, labtest.Wait, labtest.Interval, "the VIPStatus of "+vip.String()+" is deleted with its Service (garbage collection)", func() error {
		var v heraldv1.VIPStatus
		err := f.c.Get(t.Context(), keyIn("default", heraldv1.VIPStatusName(vip)), &v)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there: %+v", v.Status)
	})
}

// heraldStatus runs the lab's herald binary's `status` with the lab's kubeconfig in
// the control plane's namespace (the API server is reachable only inside the lab)
// and returns its standard output.
func (f *fullLab) heraldStatus(tb testing.TB, args ...string) string {
	tb.Helper()
	out, err := f.s.Exec(tb.Context(), lab.CPHost, append([]string{f.s.Herald, "status", "--kubeconfig", f.s.Kubeconfig}, args...)...)
	if err != nil {
		tb.Fatalf("herald status %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// expectStatus waits until `herald status -n default -o json` shows node, with its
// MAC, as the owner of the Service's vip, and returns that row.
func (f *fullLab) expectStatus(tb testing.TB, service string, vip netip.Addr, node, when string) app.VIPRow {
	tb.Helper()
	var row app.VIPRow
	testkit.Eventually(tb, labtest.Wait, labtest.Interval, fmt.Sprintf("%s: herald status shows %s as the owner of %s", when, node, vip), func() error {
		var rep app.StatusReport
		out := f.heraldStatus(tb, "-n", "default", "-o", "json")
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			return fmt.Errorf("herald status -o json: %w:\n%s", err, out)
		}
		for _, r := range rep.Items {
			if r.Service == service && r.VIP == vip.String() {
				row = r
				if r.OwnerNode != node || r.MAC != f.macs[node] {
					return fmt.Errorf("row %+v; want owner %s, MAC %s", r, node, f.macs[node])
				}
				if _, err := time.Parse(time.RFC3339, r.Since); err != nil {
					return fmt.Errorf("since %q: %w", r.Since, err)
				}
				return nil
			}
		}
		return fmt.Errorf("no row for default/%s %s in %+v", service, vip, rep.Items)
	})
	return row
}

// A user who may only view the default namespace (the built-in ClusterRole view, bound
// there) can run `herald status -n default`: herald-view aggregates VIPStatus into
// view. Without that binding the command fails and says it was forbidden.
func TestLabStatusForViewers(t *testing.T) {
	f := fullLabFor(t)
	ctx := t.Context()
	viewer := types.NamespacedName{Namespace: "default", Name: "status-viewer"}
	stranger := types.NamespacedName{Namespace: "default", Name: "status-stranger"}
	for _, sa := range []types.NamespacedName{viewer, stranger} {
		f.createObject(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: sa.Namespace, Name: sa.Name}})
	}
	f.createObject(t, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "status-viewer-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: viewer.Namespace, Name: viewer.Name}},
	})
	kubeconfig := func(sa types.NamespacedName) string {
		path := filepath.Join(t.TempDir(), sa.Name+".kubeconfig")
		if err := lab.ServiceAccountKubeconfig(ctx, f.CP, sa, time.Hour, path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	viewerKC, strangerKC := kubeconfig(viewer), kubeconfig(stranger)

	vip := f.vips["svc1"]
	owner := f.owner(vip)
	testkit.Eventually(t, labtest.Wait, labtest.Interval, "a viewer of default sees the owner of svc1 in herald status", func() error {
		out, err := f.s.Exec(ctx, lab.CPHost, f.s.Herald, "status", "--kubeconfig", viewerKC, "-n", "default", "-o", "json")
		if err != nil {
			return err // the aggregation into view may not have happened yet
		}
		var rep app.StatusReport
		if err := json.Unmarshal(out, &rep); err != nil {
			return fmt.Errorf("herald status -o json: %w:\n%s", err, out)
		}
		for _, r := range rep.Items {
			if r.Service == "svc1" && r.VIP == vip.String() && r.OwnerNode == owner {
				return nil
			}
		}
		return fmt.Errorf("no row of svc1 with owner %s: %+v", owner, rep.Items)
	})
	out, err := f.s.Exec(ctx, lab.CPHost, f.s.Herald, "status", "--kubeconfig", strangerKC, "-n", "default")
	if err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("herald status as a ServiceAccount bound to nothing: err %v, output %q; want an error saying forbidden", err, out)
	}
}
