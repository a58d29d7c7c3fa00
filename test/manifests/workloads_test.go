package manifests

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"herald.dev/herald/cmd/herald/app"
)

// TestWorkloadArgsParse: the container arguments of the rendered workloads are a
// herald subcommand and flags it has (as parsed by the binary's own command line).
func TestWorkloadArgsParse(t *testing.T) {
	objs := readObjects(t, rendered)
	d := into[appsv1.Deployment](t, find(t, objs, "Deployment", heraldNS, "herald-controller"))
	ds := into[appsv1.DaemonSet](t, find(t, objs, "DaemonSet", heraldNS, "herald-speaker"))
	for _, tc := range []struct {
		sub  string
		spec corev1.PodSpec
	}{{"controller", d.Spec.Template.Spec}, {"speaker", ds.Spec.Template.Spec}} {
		args := tc.spec.Containers[0].Args
		if len(args) == 0 || args[0] != tc.sub {
			t.Errorf("%s container args %v: want the subcommand %q first", tc.sub, args, tc.sub)
			continue
		}
		cmd, rest, err := app.NewRootCommand().Find(args)
		if err != nil || cmd.Name() != tc.sub {
			t.Errorf("%s container args %v: %v", tc.sub, args, err)
			continue
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Errorf("%s container args %v: %v", tc.sub, args, err)
		}
	}
}

// TestWorkloadShape states what the two workloads must be, so that an edit of
// config/ cannot quietly drop it.
func TestWorkloadShape(t *testing.T) {
	objs := readObjects(t, rendered)
	t.Run("controller", func(t *testing.T) {
		d := into[appsv1.Deployment](t, find(t, objs, "Deployment", heraldNS, "herald-controller"))
		spec := d.Spec.Template.Spec
		c := spec.Containers[0]
		check(t, d.Spec.Replicas != nil && *d.Spec.Replicas == 2, "2 replicas")
		check(t, slices.Contains(c.Args, "--leader-elect=true"), "leader election")
		check(t, spec.SecurityContext != nil && ptrTrue(spec.SecurityContext.RunAsNonRoot), "runAsNonRoot")
		check(t, spec.SecurityContext != nil && spec.SecurityContext.SeccompProfile != nil &&
			spec.SecurityContext.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault, "seccomp RuntimeDefault")
		sc := c.SecurityContext
		check(t, sc != nil && ptrTrue(sc.ReadOnlyRootFilesystem), "read-only root filesystem")
		check(t, sc != nil && sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation, "no privilege escalation")
		check(t, sc != nil && sc.Capabilities != nil && slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) &&
			len(sc.Capabilities.Add) == 0, "every capability dropped, none added")
		checkProbes(t, c, 7473)
		check(t, !c.Resources.Requests.Cpu().IsZero() && !c.Resources.Requests.Memory().IsZero(), "CPU and memory requests")
		check(t, hasFieldEnv(c, "POD_NAMESPACE", "metadata.namespace"), "POD_NAMESPACE from the downward API")
		check(t, hasPort(c, 7472, corev1.ProtocolTCP), "metrics port 7472 declared")
		check(t, slices.Contains(c.Args, "--metrics-secure=true"), "metrics over HTTPS behind authentication and authorization, said explicitly")
	})
	t.Run("speaker", func(t *testing.T) {
		ds := into[appsv1.DaemonSet](t, find(t, objs, "DaemonSet", heraldNS, "herald-speaker"))
		spec := ds.Spec.Template.Spec
		c := spec.Containers[0]
		check(t, spec.HostNetwork, "hostNetwork")
		check(t, spec.DNSPolicy == corev1.DNSClusterFirstWithHostNet, "dnsPolicy ClusterFirstWithHostNet")
		sc := c.SecurityContext
		check(t, sc != nil && (sc.Privileged == nil || !*sc.Privileged), "not privileged")
		check(t, sc != nil && sc.Capabilities != nil && slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}), "every capability dropped...")
		if sc != nil && sc.Capabilities != nil {
			add := slices.Clone(sc.Capabilities.Add)
			slices.Sort(add)
			check(t, slices.Equal(add, []corev1.Capability{"NET_ADMIN", "NET_RAW"}), "...but NET_RAW and NET_ADMIN")
		}
		check(t, sc != nil && ptrTrue(sc.ReadOnlyRootFilesystem), "read-only root filesystem")
		check(t, tolerates(spec.Tolerations, corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}),
			"runs on control-plane nodes")
		check(t, tolerates(spec.Tolerations, corev1.Taint{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute}),
			"stays on nodes tainted NoExecute")
		for _, env := range [][2]string{{"NODE_NAME", "spec.nodeName"}, {"NODE_IP", "status.hostIP"}, {"POD_NAMESPACE", "metadata.namespace"}} {
			check(t, hasFieldEnv(c, env[0], env[1]), env[0]+" from the downward API")
		}
		check(t, hasPort(c, 7946, corev1.ProtocolTCP) && hasPort(c, 7946, corev1.ProtocolUDP), "memberlist port 7946 TCP and UDP declared")
		check(t, hasPort(c, 7474, corev1.ProtocolTCP), "metrics port 7474 declared")
		check(t, slices.Contains(c.Args, "--metrics-secure=true"), "metrics over HTTPS behind authentication and authorization, said explicitly")
		checkProbes(t, c, 7475)
		check(t, spec.TerminationGracePeriodSeconds != nil && *spec.TerminationGracePeriodSeconds >= 5,
			"a termination grace period that leaves time to leave memberlist (1 s) and stop")
		var mounted bool
		for _, m := range c.VolumeMounts {
			for _, v := range spec.Volumes {
				if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == "herald-memberlist" &&
					ptrTrue(v.Secret.Optional) && m.MountPath == "/etc/herald/memberlist" {
					mounted = true
				}
			}
		}
		check(t, mounted, "the memberlist Secret mounted, optional, at /etc/herald/memberlist")
		check(t, !c.Resources.Requests.Cpu().IsZero() && !c.Resources.Requests.Memory().IsZero(), "CPU and memory requests")
	})
}

func check(t *testing.T, ok bool, what string) {
	t.Helper()
	if !ok {
		t.Errorf("missing: %s", what)
	}
}

func ptrTrue(b *bool) bool { return b != nil && *b }

func checkProbes(t *testing.T, c corev1.Container, port int32) {
	t.Helper()
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		ok := p != nil && p.HTTPGet != nil
		if ok {
			pp := p.HTTPGet.Port
			ok = pp.IntValue() == int(port) || hasNamedPort(c, pp.String(), port)
		}
		check(t, ok, name+" probe on the health port")
	}
}

func hasNamedPort(c corev1.Container, name string, port int32) bool {
	return slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == name && p.ContainerPort == port })
}

func hasPort(c corev1.Container, port int32, proto corev1.Protocol) bool {
	return slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == port && p.Protocol == proto })
}

func hasFieldEnv(c corev1.Container, name, path string) bool {
	return slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == path
	})
}

func tolerates(ts []corev1.Toleration, taint corev1.Taint) bool {
	return slices.ContainsFunc(ts, func(t corev1.Toleration) bool { return t.ToleratesTaint(klog.Background(), &taint, false) })
}
