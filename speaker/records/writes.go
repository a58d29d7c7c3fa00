package records

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"herald.dev/herald/internal/memberkey"
)

// Why a speaker wrote its record: what an operator (and the scale benchmark) reads to
// tell what drives the records' API load.
const (
	// writeStart: the first write since the speaker started, or the stored record was
	// found deleted or changed by someone else and written again.
	writeStart = "start"
	// writeMode: its quorum mode changed.
	writeMode = "mode"
	// writeView: the members it hears, the expected ones it does not, or the known ones
	// it does not (its misses labels), changed.
	writeView = "view"
	// writeMACs: the MACs its responders answer with changed.
	writeMACs = "macs"
	// writeAnswer: nothing it says changed, but a peer newly asks whether it is alive
	// (quorum.AskedBy); the renewal is the answer.
	writeAnswer = "answer"
)

// writeReason says why wish w is written over what the record says (nil: unknown or
// nothing written yet). The first difference in this order names it.
func writeReason(written *Wish, w Wish) string {
	switch {
	case written == nil:
		return writeStart
	case written.Mode != w.Mode:
		return writeMode
	case !slices.Equal(written.Members, w.Members) || !slices.Equal(written.Unreachable, w.Unreachable) || !slices.Equal(written.Misses, w.Misses):
		return writeView
	case !slices.Equal(written.MACs, w.MACs):
		return writeMACs
	default:
		return writeAnswer
	}
}

// newRecordWrites is the counter of this speaker's record writes by reason.
func newRecordWrites() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_speaker_record_writes_total",
		Help: "Writes of this speaker's record (a Lease) to the API server, by reason: start (first write, or the stored record was found changed), mode (its quorum mode changed), view (the members it hears or misses changed), macs, answer (a peer newly asks whether it is alive). Heartbeat renewals are not counted.",
	}, []string{"reason"})
}

// coalesceWait is how long a write for reason waits, since the last write was
// sinceWrite ago, to go with the changes that follow: changes of view and new askers
// within window of the last write wait for its end (Config.Coalesce); the rest,
// and those after a quiet spell, are written at once (0).
func coalesceWait(window time.Duration, reason string, sinceWrite time.Duration) time.Duration {
	if (reason != writeView && reason != writeAnswer) || sinceWrite >= window {
		return 0
	}
	return window - sinceWrite
}

// Want sets what the record should say; a change, or a new peer asking whether this
// speaker is alive, wakes Run to write it (at once, or once Config.Coalesce
// has passed since the last write).
func (r *Keeper) Want(w Wish) {
	r.mu.Lock()
	now := !r.wish.sameContent(w) || w.newAsker(r.wish)
	r.wish = w
	r.mu.Unlock()
	if now {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// Wanted returns what the record should say, as Want last set it.
func (r *Keeper) Wanted() Wish {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wish
}

// RenewHeartbeat asks for the heartbeat to be written now rather than at the next
// renewal: what it reports changed (the memberlist keys).
func (r *Keeper) RenewHeartbeat() {
	select {
	case r.beatNow <- struct{}{}:
	default:
	}
}

// Run writes the record when Want asks (at once, or a change of view or a new asker
// within Config.Coalesce of the last write at that window's end, with what
// changed meanwhile), and the heartbeat every renewal period, until ctx ends. After a
// failed write both are retried every FastRenew.
func (r *Keeper) Run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	// held fires when a change held back (coalesceWait) may be written: at the
	// window's end after the last write, the same moment however often it is set.
	held := time.NewTimer(time.Hour)
	held.Stop()
	defer held.Stop()
	var written *Wish // what the record says, once written
	var writtenAt time.Time
	for {
		beat := false
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-r.beatNow:
			beat = true
		case <-held.C:
		case <-timer.C:
			beat = true
		}
		r.mu.Lock()
		w := r.wish
		r.mu.Unlock()
		// Once a renewal period, check the record is still what was written (deleted
		// by hand, say): nothing else would rewrite it while its content stays. Not
		// right after a write, which the cache may not show yet.
		if beat && written != nil && r.now().Sub(writtenAt) > r.cfg.FastRenew*2 && !r.recordStored(ctx, *written) {
			written = nil
		}
		var err error
		wrote := false
		if written == nil || !w.sameContent(*written) || w.newAsker(*written) {
			reason := writeReason(written, w)
			if wait := coalesceWait(r.cfg.Coalesce, reason, r.now().Sub(writtenAt)); wait > 0 {
				held.Reset(wait)
			} else {
				wrote = true
				if err = r.writeRecord(ctx, w); err == nil {
					r.writes.WithLabelValues(reason).Inc()
					written, writtenAt = &w, r.now()
				}
			}
		}
		if beat && err == nil {
			wrote = true
			err = r.writeHeartbeat(ctx)
		}
		if !wrote {
			continue // woken for a wish the record already says
		}
		r.mu.Lock()
		flipped := r.apiUp != (err == nil)
		r.apiUp = err == nil
		if err == nil {
			r.apiAt = r.now()
		}
		r.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			r.log.V(1).Info("writing this speaker's record", "error", err.Error())
		}
		if flipped {
			r.changed()
		}
		// A record written on request leaves the heartbeat's pace alone.
		if !beat && err == nil {
			continue
		}
		period := r.cfg.Renew
		if err != nil {
			period = r.cfg.FastRenew
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(period)
	}
}

// recordStored says whether the stored record says what w does; true when it cannot
// tell. Read from the API server: the cache does not hold a record that lists this
// speaker (watches.go), its own included.
func (r *Keeper) recordStored(ctx context.Context, w Wish) bool {
	var l coordinationv1.Lease
	if err := r.api.Get(ctx, types.NamespacedName{Namespace: r.namespace, Name: Name(r.self)}, &l); err != nil {
		return !apierrors.IsNotFound(err)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != r.self {
		return false
	}
	for k, v := range w.content() {
		if l.Annotations[k] != v {
			return false
		}
	}
	return true
}

// writeRecord creates or rewrites the record with the wish.
func (r *Keeper) writeRecord(ctx context.Context, w Wish) error {
	l, err := r.put(ctx, Name(r.self), recordLabels(w.Misses, w.Mode), w.content(), &r.lease)
	if err != nil {
		return err
	}
	r.newer(l)
	r.note(l, true)
	return nil
}

// writeHeartbeat creates or renews the heartbeat (see heartbeats).
func (r *Keeper) writeHeartbeat(ctx context.Context) error {
	var ann map[string]string
	if r.keysReport != nil {
		ann = map[string]string{memberkey.ReportAnnotation: r.keysReport()}
	}
	_, err := r.put(ctx, HeartbeatName(r.self), map[string]string{HeartbeatLabel: "true"}, ann, &r.beat)
	return err
}

// put creates or renews the Lease name with these labels (replacing the misses labels
// it had, see setLabels) and annotations; last is the version this speaker wrote last
// (nil: read it first).
func (r *Keeper) put(ctx context.Context, name string, labels, annotations map[string]string, last **coordinationv1.Lease) (*coordinationv1.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.FastRenew*2)
	defer cancel()
	r.mu.Lock()
	l := *last
	r.mu.Unlock()
	key := types.NamespacedName{Namespace: r.namespace, Name: name}
	if l == nil {
		l = &coordinationv1.Lease{}
		if err := r.api.Get(ctx, key, l); apierrors.IsNotFound(err) {
			l = nil
		} else if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
	}
	now := metav1.NewMicroTime(r.now())
	create := l == nil
	if create {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: name}}
		l.Spec.AcquireTime = &now
		var node corev1.Node
		if err := r.cache.Get(ctx, types.NamespacedName{Name: r.self}, &node); err == nil {
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		}
	} else {
		l = l.DeepCopy()
	}
	l.Labels = setLabels(l.Labels, labels)
	if len(annotations) > 0 {
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		maps.Copy(l.Annotations, annotations)
	}
	l.Spec.HolderIdentity = ptr.To(r.self)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(r.cfg.Duration / time.Second))
	l.Spec.RenewTime = &now
	// No managedFields: the API server would list in them every label and
	// annotation again, in every write stored and every watch event sent. Nothing
	// reads them, and one empty entry strips them (documented API behaviour; on an
	// update only: a create keeps them until the first rewrite).
	l.ManagedFields = []metav1.ManagedFieldsEntry{{}}
	var err error
	if create {
		err = r.writer.Create(ctx, l)
	} else {
		err = r.writer.Update(ctx, l)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		*last = nil // start from the stored object next time (a conflict, or deleted under us)
		return nil, fmt.Errorf("writing %s: %w", name, err)
	}
	*last = l
	r.noteOwnWrite(l.ResourceVersion, now.Time)
	return l, nil
}

// Remove deletes this speaker's record and heartbeat, on a graceful stop: the peers
// stop expecting it at once.
func (r *Keeper) Remove(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var errs []error
	for _, name := range []string{Name(r.self), HeartbeatName(r.self)} {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: name}}
		if err := r.writer.Delete(ctx, l); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
