package vipstatus

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/speaker/layer2"
)

// +kubebuilder:rbac:groups=herald.dev,resources=vipstatuses,verbs=get;list;watch;create;update;delete

// leftoverGrace is how long after its last write a VIPStatus that no Service seems to
// hold is kept: the reporter's informers may lag behind those of the speaker that
// wrote it.
const leftoverGrace = 30 * time.Second

// Publisher writes the VIPStatus objects its Planner asks for. The election loop and
// the announcer only record what changed and queue the keys; workers write, so that a slow or unreachable API server never delays an election or a
// gratuitous ARP. A failed write is retried with backoff; the queue holds each key
// once and the task always holds the latest wish.
type Publisher struct {
	self   string
	log    logr.Logger
	cache  client.Reader // the informers' objects
	writer client.Writer
	grace  time.Duration
	now    func() time.Time

	mu   sync.Mutex
	plan *Planner

	queue workqueue.TypedRateLimitingInterface[Key]
}

func NewPublisher(self string, c client.Reader, w client.Writer, log logr.Logger) *Publisher {
	return &Publisher{
		self: self, log: log, cache: c, writer: w, grace: leftoverGrace, now: time.Now,
		plan: NewPlanner(self),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[Key](200*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[Key]{Name: "vipstatus"}),
	}
}

// Watch queues every VIPStatus that changes, so that the publisher notices objects
// deleted under it and leftovers written after the last election.
func (p *Publisher) Watch(ctx context.Context, c cache.Informers) error {
	inf, err := c.GetInformer(ctx, &heraldv1.VIPStatus{})
	if err != nil {
		return fmt.Errorf("watching VIPStatus: %w", err)
	}
	enqueue := func(obj any) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if v, ok := obj.(*heraldv1.VIPStatus); ok {
			p.queue.Add(Key{Namespace: v.Namespace, Name: v.Name})
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, o any) { enqueue(o) },
		DeleteFunc: enqueue,
	})
	if err != nil {
		return fmt.Errorf("watching VIPStatus: %w", err)
	}
	return nil
}

// Elected records an election (called from the election loop; never blocks on the API).
func (p *Publisher) Elected(ctx context.Context, e Election) {
	p.mu.Lock()
	changed := p.plan.Plan(e)
	p.mu.Unlock()
	for _, k := range changed {
		p.queue.Add(k)
	}
	if !e.Reporter {
		return
	}
	// Leftovers: objects of IPs no LoadBalancer Service holds any more.
	var list heraldv1.VIPStatusList
	if err := p.cache.List(ctx, &list); err != nil {
		p.log.V(1).Info("listing VIPStatus objects for leftovers", "error", err.Error())
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range list.Items {
		k := Key{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}
		if !p.plan.Held(k) {
			p.queue.Add(k)
		}
	}
}

// Announced records the first gratuitous frames of a takeover (called by the announcer).
func (p *Publisher) Announced(a layer2.Announcement) {
	p.mu.Lock()
	changed := p.plan.Announced(a)
	p.mu.Unlock()
	for _, k := range changed {
		p.queue.Add(k)
	}
}

// Run writes with that many workers until ctx ends.
func (p *Publisher) Run(ctx context.Context, workers int) {
	go func() {
		<-ctx.Done()
		p.queue.ShutDown()
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for p.next(ctx) {
			}
		})
	}
	wg.Wait()
}

func (p *Publisher) next(ctx context.Context) bool {
	key, quit := p.queue.Get()
	if quit {
		return false
	}
	defer p.queue.Done(key)
	err := p.sync(ctx, key)
	if err == nil {
		p.queue.Forget(key)
		return true
	}
	if ctx.Err() != nil {
		return true
	}
	// Quietly: conflicts and stale reads are expected (the cache trails our own
	// writes); an unreachable API server is said once every few tries.
	n := p.queue.NumRequeues(key)
	switch {
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		p.log.V(1).Info("VIPStatus write raced, retrying", "object", key, "error", err.Error())
	case n%10 == 0:
		p.log.Info("cannot write VIPStatus, retrying", "object", key, "tries", n+1, "error", err.Error())
	}
	p.queue.AddRateLimited(key)
	return true
}

// sync makes one object what this node wants of it.
func (p *Publisher) sync(ctx context.Context, key Key) error {
	p.mu.Lock()
	in := Input{Key: key, Self: p.self, Reporter: p.plan.Reporter(), Held: p.plan.Held(key), Now: p.now(), Grace: p.grace}
	task, ok := p.plan.Task(key)
	p.mu.Unlock()
	if ok {
		in.Task = &task
	}
	if !ok && !in.Reporter {
		return nil
	}
	var stored heraldv1.VIPStatus
	switch err := p.cache.Get(ctx, key, &stored); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	default:
		in.Stored = &stored
	}
	a := Reconcile(in)
	var err error
	switch a.Kind {
	case Create:
		err = p.writer.Create(ctx, a.Object)
	case Update:
		err = p.writer.Update(ctx, a.Object)
	case Delete:
		err = p.writer.Delete(ctx, in.Stored, client.Preconditions{UID: &a.UID, ResourceVersion: &a.ResourceVersion})
		if apierrors.IsNotFound(err) {
			err = nil
		}
		if err == nil {
			p.log.V(1).Info("deleted a VIPStatus no Service holds", "object", key)
		}
	case Later:
		p.queue.AddAfter(key, a.After)
	case Contested:
		p.mu.Lock()
		after, ok := p.plan.Contest(key, task.Gen, in.Now)
		p.mu.Unlock()
		if ok {
			// The first contest is mostly informers lagging; repeated ones are speakers
			// that disagree (a split brain), worth saying.
			log := p.log.V(1)
			if after > contestDelay {
				log = p.log
			}
			log.Info("another speaker published a different owner; taking it back unless this node's view changes",
				"object", key, "stored", in.Stored.Status.Node, "in", after.String())
			p.queue.AddAfter(key, after)
		}
	}
	if err != nil {
		return err
	}
	if a.Done && ok {
		p.mu.Lock()
		p.plan.Done(key, task.Gen)
		p.mu.Unlock()
	}
	if a.Kind == Create || a.Kind == Update {
		s := a.Object.Status
		p.log.V(1).Info("published VIPStatus", "object", key, "node", s.Node, "leaderChanges", s.LeaderChanges, "reason", s.Reason)
	}
	return nil
}
