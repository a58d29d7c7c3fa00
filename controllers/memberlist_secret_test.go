package controllers_test

import (
	"bytes"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"herald.dev/herald/internal/memberkey"
	"herald.dev/herald/internal/testkit"
)

// The controller creates the speakers' memberlist Secret with a usable random key
// when it is missing, and never replaces an existing one (running speakers hold its
// key).
func TestMemberlistSecret(t *testing.T) {
	h := newHarness(t)
	o := defaultOptions()
	o.MemberlistSecret = "herald-memberlist"
	c := h.startController(o)
	key := types.NamespacedName{Namespace: ns, Name: "herald-memberlist"}
	var s corev1.Secret
	testkit.Eventually(t, waitFor, poll, "Secret "+key.String()+" created", func() error { return h.c.Get(h.ctx, key, &s) })
	k1, err := memberkey.FromSecretData(s.Data)
	if err != nil {
		t.Fatalf("created Secret is unusable: %v", err)
	}
	c.stop()

	// A second Secret set by the user is kept as it is.
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "own-key"},
		Data: map[string][]byte{memberkey.DataKey: []byte("0123456789abcdef0123")}}
	if err := h.c.Create(h.ctx, other); err != nil {
		t.Fatal(err)
	}
	o.MemberlistSecret = "own-key"
	c = h.startController(o)
	<-c.elected
	time.Sleep(500 * time.Millisecond) // the runnable starts once elected
	var got corev1.Secret
	if err := h.c.Get(h.ctx, types.NamespacedName{Namespace: ns, Name: "own-key"}, &got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Data[memberkey.DataKey], other.Data[memberkey.DataKey]) {
		t.Errorf("existing Secret was changed: %q", got.Data)
	}
	// And the first one survives a restart unchanged.
	if err := h.c.Get(h.ctx, key, &s); err != nil {
		t.Fatal(err)
	}
	if k2, _ := memberkey.FromSecretData(s.Data); !bytes.Equal(k1, k2) {
		t.Error("the controller replaced the memberlist key")
	}
}
