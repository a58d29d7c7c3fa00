package controllers

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// aggregate is one object the controller's leader writes alone, from what it reads of
// many (the heartbeat summary, the records digest): kept as last written, so that a
// rewrite is one update, and read again after an error.
type aggregate[T client.Object] struct {
	what    string // for errors: "heartbeat summary"
	key     types.NamespacedName
	api     client.Reader
	writer  client.Writer
	newObj  func() T
	written T // as last written or read; the zero value when unknown
	known   bool
}

// put writes fill's content over the object as last written, reading it first when
// unknown and creating it when missing.
func (a *aggregate[T]) put(ctx context.Context, fill func(T)) error {
	if !a.known {
		obj := a.newObj()
		switch err := a.api.Get(ctx, a.key, obj); {
		case apierrors.IsNotFound(err):
			obj = a.newObj()
			obj.SetNamespace(a.key.Namespace)
			obj.SetName(a.key.Name)
			obj.SetLabels(map[string]string{"app.kubernetes.io/part-of": "herald"})
			fill(obj)
			if err := a.writer.Create(ctx, obj); err != nil {
				return fmt.Errorf("creating %s %s: %w", a.what, a.key, err)
			}
			a.written, a.known = obj, true
			return nil
		case err != nil:
			return fmt.Errorf("reading %s %s: %w", a.what, a.key, err)
		}
		a.written, a.known = obj, true
	}
	obj := a.written.DeepCopyObject().(T)
	fill(obj)
	if err := a.writer.Update(ctx, obj); err != nil {
		a.known = false // read it again: another writer, or it was deleted
		return fmt.Errorf("updating %s %s: %w", a.what, a.key, err)
	}
	a.written = obj
	return nil
}

// current returns the object as last written or read, and whether it is known.
func (a *aggregate[T]) current() (T, bool) { return a.written, a.known }
