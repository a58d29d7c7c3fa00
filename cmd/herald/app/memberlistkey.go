package app

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"herald.dev/herald/internal/beatsummary"
	"herald.dev/herald/internal/memberkey"
)

// MemberlistKeyOptions are the flags of `herald memberlist-key`.
type MemberlistKeyOptions struct {
	Kubeconfig string
	Context    string
	Namespace  string
	Secret     string
	Wait       time.Duration
	Poll       time.Duration
	Now        func() time.Time
}

func newMemberlistKeyCommand() *cobra.Command {
	o := MemberlistKeyOptions{Namespace: "herald-system", Secret: memberkey.SecretName, Wait: 5 * time.Minute, Poll: 2 * time.Second, Now: time.Now}
	cmd := &cobra.Command{
		Use:   "memberlist-key",
		Short: "Rotate the speakers' memberlist key without splitting them",
		Long: `The speakers encrypt memberlist with the primary key of the memberlist Secret and
accept every key it holds; they re-read the mounted Secret while running. A key is
rotated in three steps, each applied by every speaker before the next: add the new
key, make it primary, remove the old one. Each command edits the Secret, then waits
until every speaker's heartbeat reports the Secret's keys (fingerprints only), and
refuses a step that would leave a speaker unable to read another.`,
		Example: `  herald memberlist-key rotate
  herald memberlist-key status
  herald memberlist-key add next && herald memberlist-key use next && herald memberlist-key remove secretkey`,
	}
	f := cmd.PersistentFlags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then the in-cluster config)")
	f.StringVar(&o.Context, "context", "", "kubeconfig context to use (default: its current context)")
	f.StringVarP(&o.Namespace, "namespace", "n", o.Namespace, "herald's namespace")
	f.StringVar(&o.Secret, "secret", o.Secret, "the memberlist Secret")
	f.DurationVar(&o.Wait, "wait", o.Wait, "how long to wait for every speaker to apply a change (the kubelet takes up to a minute or two to update a mounted Secret); 0: do not wait")
	do := func(step func(context.Context, *keyEditor, []string) error) func(*cobra.Command, []string) error {
		return func(c *cobra.Command, a []string) error {
			e, err := newKeyEditor(o, c.OutOrStdout())
			if err != nil {
				return err
			}
			return step(c.Context(), e, a)
		}
	}
	cmd.AddCommand(
		&cobra.Command{Use: "status", Short: "The Secret's keys and what each speaker holds", Args: cobra.NoArgs,
			RunE: do(func(ctx context.Context, e *keyEditor, _ []string) error { return e.status(ctx) })},
		&cobra.Command{Use: "add [LABEL]", Short: "Add a fresh random key (entry secretkey.LABEL, not primary); wait until every speaker holds it", Args: cobra.MaximumNArgs(1),
			RunE: do(func(ctx context.Context, e *keyEditor, a []string) error {
				_, err := e.add(ctx, labelArg(a, o.Now))
				return err
			})},
		&cobra.Command{Use: "use KEY", Short: "Make KEY (entry name, label or fingerprint) primary once every speaker holds it; wait until every speaker sends with it", Args: cobra.ExactArgs(1),
			RunE: do(func(ctx context.Context, e *keyEditor, a []string) error { return e.use(ctx, a[0]) })},
		&cobra.Command{Use: "remove KEY", Short: "Remove KEY once no speaker sends with it; wait until every speaker dropped it", Args: cobra.ExactArgs(1),
			RunE: do(func(ctx context.Context, e *keyEditor, a []string) error { return e.remove(ctx, a[0]) })},
		&cobra.Command{Use: "rotate [LABEL]", Short: "Add a fresh key, make it primary, remove every other key, waiting for every speaker between the steps", Args: cobra.MaximumNArgs(1),
			RunE: do(func(ctx context.Context, e *keyEditor, a []string) error { return e.rotate(ctx, labelArg(a, o.Now)) })},
	)
	return cmd
}

func labelArg(args []string, now func() time.Time) string {
	if len(args) > 0 {
		return args[0]
	}
	return now().UTC().Format("20060102-150405")
}

// keyEditor edits the memberlist Secret and reads the speakers' reports.
type keyEditor struct {
	o   MemberlistKeyOptions
	c   kubernetes.Interface
	out io.Writer
}

func newKeyEditor(o MemberlistKeyOptions, out io.Writer) (*keyEditor, error) {
	cfg, err := loadRESTConfig(o.Kubeconfig, o.Context, "herald-memberlist-key", 30*time.Second)
	if err != nil {
		return nil, err
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return &keyEditor{o: o, c: c, out: out}, nil
}

// reports are the keys each live speaker reports, by node: from the heartbeats not
// expired (a speaker that stopped gracefully deletes its own).
func (e *keyEditor) reports(ctx context.Context) (map[string]string, error) {
	l, err := e.c.CoordinationV1().Leases(e.o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: beatsummary.HeartbeatLabel})
	if err != nil {
		return nil, fmt.Errorf("listing the speakers' heartbeats: %w", err)
	}
	now := e.o.Now()
	out := map[string]string{}
	for _, h := range l.Items {
		node, ok := strings.CutPrefix(h.Name, beatsummary.HeartbeatName(""))
		if !ok || h.Spec.RenewTime == nil || h.Spec.LeaseDurationSeconds == nil {
			continue
		}
		if h.Spec.RenewTime.Add(time.Duration(*h.Spec.LeaseDurationSeconds) * time.Second).Before(now) {
			continue
		}
		out[node] = h.Annotations[memberkey.ReportAnnotation]
	}
	return out, nil
}

func (e *keyEditor) secret(ctx context.Context) (*corev1.Secret, error) {
	s, err := e.c.CoreV1().Secrets(e.o.Namespace).Get(ctx, e.o.Secret, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the memberlist Secret %s/%s: %w", e.o.Namespace, e.o.Secret, err)
	}
	return s, nil
}

// keyring reads the memberlist Secret's keys.
func (e *keyEditor) keyring(ctx context.Context) (memberkey.Keyring, error) {
	s, err := e.secret(ctx)
	if err != nil {
		return nil, err
	}
	return memberkey.KeyringFromSecretData(s.Data)
}

// edit applies change to the Secret, then waits for every speaker. The write carries
// the version read, so the API server refuses it if the Secret changed meanwhile.
func (e *keyEditor) edit(ctx context.Context, change func(data map[string][]byte, reports map[string]string) (map[string][]byte, error)) error {
	s, err := e.secret(ctx)
	if err != nil {
		return err
	}
	reports, err := e.reports(ctx)
	if err != nil {
		return err
	}
	if s.Data, err = change(s.Data, reports); err != nil {
		return err
	}
	if _, err := e.c.CoreV1().Secrets(e.o.Namespace).Update(ctx, s, metav1.UpdateOptions{}); apierrors.IsConflict(err) {
		return fmt.Errorf("the memberlist Secret changed meanwhile; run the command again")
	} else if err != nil {
		return fmt.Errorf("writing the memberlist Secret: %w", err)
	}
	return e.wait(ctx)
}

// wait polls the speakers' reports until every one reports the Secret's keys.
func (e *keyEditor) wait(ctx context.Context) error {
	if e.o.Wait <= 0 {
		return nil
	}
	deadline := e.o.Now().Add(e.o.Wait)
	var last []string
	for {
		ring, err := e.keyring(ctx)
		if err != nil {
			return err
		}
		reports, err := e.reports(ctx)
		if err != nil {
			return err
		}
		pending := memberkey.Pending(ring, reports)
		if len(pending) == 0 {
			fmt.Fprintf(e.out, "all %d speakers hold %s\n", len(reports), memberkey.Report(ring.AES()))
			return nil
		}
		if !slices.Equal(pending, last) {
			fmt.Fprintf(e.out, "waiting for %d of %d speakers to hold %s: %s\n", len(pending), len(reports), memberkey.Report(ring.AES()), strings.Join(pending, "; "))
			last = pending
		}
		if e.o.Now().After(deadline) {
			return fmt.Errorf("after %v, speakers have not applied the memberlist Secret: %s", e.o.Wait, strings.Join(pending, "; "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(e.o.Poll):
		}
	}
}

func (e *keyEditor) status(ctx context.Context) error {
	ring, err := e.keyring(ctx)
	if err != nil {
		return err
	}
	for i, k := range ring {
		role := "accepted"
		if i == 0 {
			role = "primary"
		}
		fmt.Fprintf(e.out, "%s\t%s\t%s\n", memberkey.Fingerprint(k.AES), role, k.Name)
	}
	reports, err := e.reports(ctx)
	if err != nil {
		return err
	}
	nodes := slices.Sorted(func(yield func(string) bool) {
		for n := range reports {
			if !yield(n) {
				return
			}
		}
	})
	want := memberkey.Report(ring.AES())
	for _, n := range nodes {
		state := "in step"
		if reports[n] != want {
			state = "not in step"
		}
		fmt.Fprintf(e.out, "speaker %s: %s (%s)\n", n, reports[n], state)
	}
	return nil
}

func (e *keyEditor) add(ctx context.Context, label string) (memberkey.Key, error) {
	material, err := memberkey.New()
	if err != nil {
		return memberkey.Key{}, err
	}
	var k memberkey.Key
	err = e.edit(ctx, func(data map[string][]byte, _ map[string]string) (map[string][]byte, error) {
		next, key, err := memberkey.Add(data, label, material)
		k = key
		if err == nil {
			fmt.Fprintf(e.out, "added key %s (%s)\n", key.Name, memberkey.Fingerprint(key.AES))
		}
		return next, err
	})
	return k, err
}

func (e *keyEditor) use(ctx context.Context, ref string) error {
	return e.step(ctx, ref, memberkey.Use, "key %s (%s) is primary\n")
}

func (e *keyEditor) remove(ctx context.Context, ref string) error {
	return e.step(ctx, ref, memberkey.Remove, "removed key %s (%s)\n")
}

// step applies one edit of the key named ref and says what it did (done takes the
// key's name and fingerprint).
func (e *keyEditor) step(ctx context.Context, ref string,
	change func(data map[string][]byte, ref string, reports map[string]string) (map[string][]byte, memberkey.Key, error),
	done string) error {
	return e.edit(ctx, func(data map[string][]byte, reports map[string]string) (map[string][]byte, error) {
		next, k, err := change(data, ref, reports)
		if err == nil {
			fmt.Fprintf(e.out, done, k.Name, memberkey.Fingerprint(k.AES))
		}
		return next, err
	})
}

// rotate adds a key, makes it primary and removes every other, waiting for every
// speaker after each step (a step is refused unless the previous one was applied).
func (e *keyEditor) rotate(ctx context.Context, label string) error {
	if e.o.Wait <= 0 {
		return fmt.Errorf("rotate waits for every speaker between its steps: --wait must be positive")
	}
	k, err := e.add(ctx, label)
	if err != nil {
		return err
	}
	if err := e.use(ctx, k.Name); err != nil {
		return err
	}
	ring, err := e.keyring(ctx)
	if err != nil {
		return err
	}
	for _, old := range ring[1:] {
		if err := e.remove(ctx, old.Name); err != nil {
			return err
		}
	}
	return nil
}
