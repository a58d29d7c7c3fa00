package app

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"herald.dev/herald/internal/beatsummary"
	"herald.dev/herald/internal/memberkey"
	"herald.dev/herald/internal/testenv"
	"herald.dev/herald/internal/testkit"
)

// TestMemberlistKeyRotation runs the steps against a real API server, with speakers
// stood in for by loops that apply the Secret to their heartbeat report as a speaker
// does (speaker/keyfollow.go); b can be frozen, as a speaker whose kubelet has not
// updated the mounted Secret yet.
func TestMemberlistKeyRotation(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	const ns = "herald-system"
	env.CreateNamespace(t, ns)
	old, err := memberkey.New()
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: memberkey.SecretName}, Data: map[string][]byte{memberkey.DataKey: old}}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	admin := env.Kubeconfig(t, "admin", "system:masters")
	o := MemberlistKeyOptions{Kubeconfig: admin, Namespace: ns, Secret: memberkey.SecretName, Wait: 20 * time.Second, Poll: 50 * time.Millisecond, Now: time.Now}
	var out bytes.Buffer
	e, err := newKeyEditor(o, &out)
	if err != nil {
		t.Fatal(err)
	}

	var frozenB atomic.Bool
	speakers, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, node := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for speakers.Err() == nil {
				if !(node == "b" && frozenB.Load()) {
					beat(ctx, t, e, node)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()
	ring := func() memberkey.Keyring {
		r, err := e.keyring(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	oldRing := ring()
	if err := e.wait(ctx); err != nil {
		t.Fatalf("speakers do not report the first key: %v", err)
	}

	// b does not apply the new key: add times out naming it, and use is refused.
	frozenB.Store(true)
	e.o.Wait = time.Second
	if _, err := e.add(ctx, "next"); err == nil || !strings.Contains(err.Error(), "b: ") {
		t.Fatalf("add with b frozen: %v, want a timeout naming b", err)
	}
	if err := e.use(ctx, "next"); err == nil || !strings.Contains(err.Error(), "[b] do not hold") {
		t.Fatalf("use while b lacks the key: %v", err)
	}
	if ring()[0].Name != memberkey.DataKey {
		t.Fatal("a refused use changed the primary")
	}
	frozenB.Store(false)
	e.o.Wait = 20 * time.Second
	if err := e.wait(ctx); err != nil {
		t.Fatal(err)
	}

	// Now b holds it: use goes through. b is frozen again before it applies it, so
	// it still sends with the old key: removing the old key is refused.
	if err := e.remove(ctx, memberkey.DataKey); err == nil || !strings.Contains(err.Error(), "is the primary") {
		t.Fatalf("remove of the primary: %v", err)
	}
	frozenB.Store(true)
	e.o.Wait = 0
	if err := e.use(ctx, "next"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "a sends with the new key", func() error {
		reports, err := e.reports(ctx)
		if err != nil {
			return err
		}
		if p, _ := memberkey.ParseReport(reports["a"]); p != memberkey.Fingerprint(ring().Primary()) {
			return fmt.Errorf("a reports %s", reports["a"])
		}
		return nil
	})
	if err := e.remove(ctx, memberkey.DataKey); err == nil || !strings.Contains(err.Error(), "[b] still send") {
		t.Fatalf("remove of the key b sends with: %v", err)
	}
	frozenB.Store(false)
	e.o.Wait = 20 * time.Second
	if err := e.wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.remove(ctx, memberkey.DataKey); err != nil {
		t.Fatal(err)
	}
	r := ring()
	if len(r) != 1 || r[0].Name != "secretkey.next" {
		t.Fatalf("after the steps: %v", r)
	}

	// rotate does all three, waiting between them.
	if err := e.rotate(ctx, "third"); err != nil {
		t.Fatalf("rotate: %v\n%s", err, out.String())
	}
	r = ring()
	if len(r) != 1 || r[0].Name != "secretkey.third" || r.Index(oldRing.Primary()) >= 0 {
		t.Fatalf("after rotate: %v", r)
	}
	for _, line := range []string{"added key secretkey.third", "key secretkey.third", "removed key secretkey.next", "all 2 speakers hold"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("output lacks %q:\n%s", line, out.String())
		}
	}
	if strings.Contains(out.String(), string(old)) {
		t.Error("the output shows a key")
	}

	// A Secret changed between the read and the write is not written over.
	e.o.Wait = 0
	before := ring()
	err = e.edit(ctx, func(data map[string][]byte, _ map[string]string) (map[string][]byte, error) {
		s, err := e.secret(ctx)
		if err != nil {
			return nil, err
		}
		s.Annotations = map[string]string{"touched": "meanwhile"}
		if _, err := e.c.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return nil, err
		}
		return map[string][]byte{}, nil
	})
	if err == nil || !strings.Contains(err.Error(), "changed meanwhile") {
		t.Fatalf("an edit over a concurrent change: %v, want it refused", err)
	}
	if r := ring(); len(r) != len(before) || r[0].Name != before[0].Name {
		t.Fatalf("the refused edit changed the keys: %v", r)
	}
}

// beat writes node's heartbeat reporting the keys of the Secret as it is now.
func beat(ctx context.Context, t *testing.T, e *keyEditor, node string) {
	ring, err := e.keyring(ctx)
	if err != nil {
		return
	}
	leases := e.c.CoordinationV1().Leases(e.o.Namespace)
	name := beatsummary.HeartbeatName(node)
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	create := err != nil
	if create {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{beatsummary.HeartbeatLabel: "true"}}}
	}
	l.Annotations = map[string]string{memberkey.ReportAnnotation: memberkey.Report(ring.AES())}
	l.Spec.HolderIdentity = ptr.To(node)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(30))
	l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if create {
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
	} else {
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	_ = err // a conflict is retried on the next beat
}
