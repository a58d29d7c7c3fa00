package vipstatus

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	heraldv1 "herald.dev/herald/api/v1beta1"
)

// ActionKind is what to do with one VIPStatus.
type ActionKind int

const (
	Nothing ActionKind = iota
	Create
	Update
	Delete
	// Later: look again after Action.After.
	Later
	// Contested: another speaker's write contradicts this node's view; ask
	// Planner.Contest when to take the object back.
	Contested
)

// Action is the write Reconcile asks for.
type Action struct {
	Kind ActionKind
	// Object to create, or to update (with the stored resourceVersion).
	Object *heraldv1.VIPStatus
	// Delete preconditions: the object as it was judged a leftover.
	UID             types.UID
	ResourceVersion string
	After           time.Duration
	// Done: the object is as the task asks once this action succeeds.
	Done bool
}

// Input is what Reconcile decides from.
type Input struct {
	Key  Key
	Self string
	// Task of this node for the key; nil when none.
	Task *Task
	// Reporter and Held: see Planner.
	Reporter, Held bool
	// Stored is the cached object; nil when there is none.
	Stored *heraldv1.VIPStatus
	Now    time.Time
	// Grace protects a fresh object from a reporter whose Services lag behind the
	// writer's: a leftover is deleted only once it was last written this long ago.
	Grace time.Duration
}

// Reconcile returns the write that brings the stored object to what this node
// wants of it.
func Reconcile(in Input) Action {
	t, stored := in.Task, in.Stored
	if t == nil {
		if stored == nil || !in.Reporter || in.Held {
			return Action{}
		}
		// The API server stamps creationTimestamp; observedAt is the writer's word, and a
		// stamp further ahead than the grace is no clock skew: it is not believed.
		last := stored.CreationTimestamp.Time
		if at := stored.Status.ObservedAt; at != nil && at.After(last) && !at.After(in.Now.Add(in.Grace)) {
			last = at.Time
		}
		if age := in.Now.Sub(last); age < in.Grace {
			return Action{Kind: Later, After: in.Grace - age}
		}
		return Action{Kind: Delete, UID: stored.UID, ResourceVersion: stored.ResourceVersion}
	}
	if t.Owned && !t.Announced {
		return Action{} // the takeover is not done until its first frame went out
	}
	// An object none of whose owners holds the IP now is a deleted Service's, which the
	// garbage collector has not removed yet: its history is not these Services'.
	fresh := stored == nil || !ownedByAny(stored.OwnerReferences, t.Services)
	var st heraldv1.VIPStatusStatus
	if !fresh {
		st = *stored.Status.DeepCopy()
	}
	node := ""
	if t.Owned {
		node = in.Self
	}
	if fresh || st.Node != node {
		if !fresh && !t.Assert {
			// Another speaker wrote its view after ours: take it back, but not at once.
			switch {
			case t.RetakeAt.IsZero():
				return Action{Kind: Contested}
			case in.Now.Before(t.RetakeAt):
				return Action{Kind: Later, After: t.RetakeAt.Sub(in.Now)}
			}
		}
		st.Node = node
		if t.Owned {
			st.Since = ptr.To(metav1.NewTime(t.At))
			st.LeaderChanges++
		} else {
			st.Since = ptr.To(metav1.NewTime(in.Now))
		}
	}
	st.IP = t.IP.String()
	st.Pool = t.Pool
	st.Services = make([]string, len(t.Services))
	for i, s := range t.Services {
		st.Services[i] = s.Name
	}
	st.Interface, st.MAC, st.Reason, st.Message = "", "", t.Reason, t.Message
	if t.Owned {
		st.Interface, st.MAC = t.Interface, t.MAC
	}
	refs := ownerRefs(t.Services)
	if stored != nil && sameStatus(stored.Status, st) && equalRefs(stored.OwnerReferences, refs) {
		return Action{Done: true}
	}
	st.ObservedAt = ptr.To(metav1.NewTime(in.Now))
	if stored == nil {
		return Action{Kind: Create, Done: true, Object: &heraldv1.VIPStatus{
			ObjectMeta: metav1.ObjectMeta{Namespace: in.Key.Namespace, Name: in.Key.Name, OwnerReferences: refs},
			Status:     st,
		}}
	}
	obj := stored.DeepCopy()
	obj.OwnerReferences = refs
	obj.Status = st
	return Action{Kind: Update, Done: true, Object: obj}
}

// ownerRefs make the garbage collector delete the object with the last of its
// Services. Not controller references, and blocking no deletion: the object is a
// report on the Services, never in their way.
func ownerRefs(svcs []ServiceRef) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	for _, s := range svcs {
		if s.UID == "" {
			continue
		}
		out = append(out, metav1.OwnerReference{APIVersion: "v1", Kind: "Service", Name: s.Name, UID: s.UID,
			Controller: ptr.To(false), BlockOwnerDeletion: ptr.To(false)})
	}
	return out
}

// ownedByAny says whether one of refs is one of the Services.
func ownedByAny(refs []metav1.OwnerReference, svcs []ServiceRef) bool {
	for _, r := range refs {
		for _, s := range svcs {
			if r.UID == s.UID && s.UID != "" {
				return true
			}
		}
	}
	return false
}

func equalRefs(a, b []metav1.OwnerReference) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.OwnerReference) bool {
		return x.APIVersion == y.APIVersion && x.Kind == y.Kind && x.Name == y.Name && x.UID == y.UID &&
			ptr.Deref(x.Controller, false) == ptr.Deref(y.Controller, false) &&
			ptr.Deref(x.BlockOwnerDeletion, false) == ptr.Deref(y.BlockOwnerDeletion, false)
	})
}

// sameStatus compares two statuses but for ObservedAt, and times to the second (the
// precision they keep in the API).
func sameStatus(a, b heraldv1.VIPStatusStatus) bool {
	sameTime := func(x, y *metav1.Time) bool {
		if x == nil || y == nil {
			return x == nil && y == nil
		}
		return x.Unix() == y.Unix()
	}
	return a.IP == b.IP && slices.Equal(a.Services, b.Services) && a.Pool == b.Pool && a.Node == b.Node &&
		a.Interface == b.Interface && a.MAC == b.MAC && sameTime(a.Since, b.Since) &&
		a.LeaderChanges == b.LeaderChanges && a.Reason == b.Reason && a.Message == b.Message
}
