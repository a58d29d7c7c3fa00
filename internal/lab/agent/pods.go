package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

// defaultPort is where a pod listens when its containers declare no TCP port: whoami's
// default, as in the walkthrough's Pods.
const defaultPort = 80

// servePods watches the Pods bound to this node and syncs each one that changes. One
// worker syncs, so the pod map and the address pool need no lock.
func (a *Agent) servePods(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(a.cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", a.cfg.Node).String()
		}))
	podInformer := factory.Core().V1().Pods()
	lister := podInformer.Lister()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return fmt.Errorf("lab agent: pod informer: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.Informer().HasSynced) {
		return fmt.Errorf("lab agent: pod cache never synced: %w", ctx.Err())
	}
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	go func() {
		t := time.NewTicker(podStatusRecheck)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				queue.Add(recheckKey)
			}
		}
	}()
	for {
		key, quit := queue.Get()
		if quit {
			return nil
		}
		if key == recheckKey {
			a.recheckStatuses(ctx)
			queue.Done(key)
			continue
		}
		if err := a.sync(ctx, lister, key); err != nil {
			a.log.Printf("pod %s: %v (retrying)", key, err)
			queue.AddRateLimited(key)
		} else {
			queue.Forget(key)
		}
		queue.Done(key)
	}
}

// sync brings the pod called key to what the API says: running and reported, or gone.
func (a *Agent) sync(ctx context.Context, lister listersv1.PodLister, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	pod, err := lister.Pods(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return a.stop(ctx, key)
	case err != nil:
		return err
	case pod.DeletionTimestamp != nil:
		if err := a.stop(ctx, key); err != nil {
			return err
		}
		return a.finishDeletion(ctx, pod)
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return a.stop(ctx, key)
	}
	p := a.pods[key]
	if p != nil && p.rec.UID != string(pod.UID) { // deleted and created again meanwhile
		if err := a.stop(ctx, key); err != nil {
			return err
		}
		p = nil
	}
	if p == nil {
		if p, err = a.start(ctx, pod); err != nil {
			return err
		}
		a.pods[key] = p
	}
	if reported(pod, p.rec) {
		return nil
	}
	return a.reportRunning(ctx, pod, p.rec)
}

// start gives the pod an address, a namespace and its servers, and records it.
func (a *Agent) start(ctx context.Context, pod *corev1.Pod) (*podNet, error) {
	addr, err := a.ipam.allocate()
	if err != nil {
		return nil, err
	}
	rec := PodRecord{
		Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID), Node: a.cfg.Node,
		NetNS: NamespaceFor(a.cfg.NetnsPrefix, pod.Namespace, pod.Name),
		Veth:  vethFor(string(pod.UID)), IP: addr, Ports: tcpPorts(pod),
	}
	if a.ipam6 != nil {
		if rec.IP6, err = a.ipam6.allocate(); err != nil {
			a.ipam.release(addr)
			return nil, err
		}
	}
	hostname := pod.Name
	if pod.Spec.Hostname != "" {
		hostname = pod.Spec.Hostname
	}
	p, err := setUpPod(ctx, rec, a.ipam.gateway(), hostname)
	if err != nil {
		a.release(rec)
		return nil, err
	}
	if err := rec.save(a.cfg.Dir); err != nil {
		a.release(rec)
		return nil, errors.Join(err, p.tearDown(ctx))
	}
	a.log.Printf("pod %s/%s: running at %v in %s, serving on TCP %v", pod.Namespace, pod.Name, rec.ips(), rec.NetNS, rec.Ports)
	return p, nil
}

// release gives the pod's addresses back to the pools.
func (a *Agent) release(rec PodRecord) {
	a.ipam.release(rec.IP)
	if a.ipam6 != nil && rec.IP6.IsValid() {
		a.ipam6.release(rec.IP6)
	}
}

// stop removes the pod's namespace and record, if the agent runs it.
func (a *Agent) stop(ctx context.Context, key string) error {
	p := a.pods[key]
	if p == nil {
		return nil
	}
	if err := p.tearDown(ctx); err != nil {
		return err
	}
	delete(a.pods, key)
	a.release(p.rec)
	a.log.Printf("pod %s: stopped, %s removed", key, p.rec.NetNS)
	return p.rec.remove(a.cfg.Dir)
}

// finishDeletion deletes the Pod for good once its namespace is gone, as a kubelet does
// after its containers stopped: the API server waits for that before the Pod disappears.
// The UID precondition spares a Pod created again under the same name.
func (a *Agent) finishDeletion(ctx context.Context, pod *corev1.Pod) error {
	err := a.cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting: %w", err)
	}
	return nil
}

// tcpPorts are the TCP container ports of every container, or whoami's default.
func tcpPorts(pod *corev1.Pod) []int32 {
	var ports []int32
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if (p.Protocol == "" || p.Protocol == corev1.ProtocolTCP) && !slices.Contains(ports, p.ContainerPort) {
				ports = append(ports, p.ContainerPort)
			}
		}
	}
	if len(ports) == 0 {
		ports = []int32{defaultPort}
	}
	return ports
}

// syncTimeout bounds each status write.
const syncTimeout = 10 * time.Second
