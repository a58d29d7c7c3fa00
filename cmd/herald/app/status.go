package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/scheme"
)

// StatusOptions are the flags of `herald status`, named as kubectl's.
type StatusOptions struct {
	Kubeconfig    string
	Context       string
	Namespace     string
	AllNamespaces bool
	Output        string // table, wide, json, yaml
	LBClass       string
	Timeout       time.Duration
}

func newStatusCommand() *cobra.Command {
	o := StatusOptions{Output: "table", Timeout: 15 * time.Second}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Print each LoadBalancer IP with its owner node",
		Long: `Print every LoadBalancer IP herald serves with the node that answers ARP/NDP for
it: one row per IP of each LoadBalancer Service, with the owner node, the MAC LAN hosts
send its traffic to, since when that node owns it, how often the IP changed owner, and
its pool. It reads only the API server: the Services and the VIPStatus objects the
speakers publish (kubectl get vips), so it works without Prometheus.

OWNER NODE is <none> when no node announces the IP; -o wide says why (REASON,
MESSAGE), or <not published> when no speaker has written the IP's VIPStatus yet.

Below the table, a line names each node whose endpoints the speakers withhold from
every Service: its speaker vanished and its host answers nothing, so they hold it dead
before the API server marks it NotReady (read from the Node's EndpointsWithheld and
EndpointsRestored Events).

Without -n it shows every namespace, like kubectl get -A.`,
		Example: `  herald status
  herald status -n default -o wide
  herald status --context kind-kind -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return RunStatus(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then the in-cluster config)")
	f.StringVar(&o.Context, "context", "", "kubeconfig context to use (default: its current context)")
	f.StringVarP(&o.Namespace, "namespace", "n", "", "show only this namespace's Services (default: every namespace)")
	f.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "show every namespace (the default; wins over -n)")
	f.StringVarP(&o.Output, "output", "o", o.Output, "output format: table, wide, json or yaml")
	f.StringVar(&o.LBClass, "lb-class", "", "loadBalancerClass herald serves besides Services without a class (the controller's --lb-class)")
	f.DurationVar(&o.Timeout, "request-timeout", o.Timeout, "give up on the API server after this long (0: never)")
	return cmd
}

// RunStatus prints the status of every VIP to out; warnings go to errOut.
func RunStatus(ctx context.Context, o StatusOptions, out, errOut io.Writer) error {
	switch o.Output {
	case "table", "wide", "json", "yaml":
	default:
		return fmt.Errorf("-o %s: want table, wide, json or yaml", o.Output)
	}
	ns := o.Namespace
	if o.AllNamespaces {
		ns = ""
	}
	ctx, cancel, cfg, c, err := connect(ctx, o.Kubeconfig, o.Context, "herald-status", o.Timeout)
	if err != nil {
		return err
	}
	defer cancel()
	var svcs corev1.ServiceList
	if err := c.List(ctx, &svcs, client.InNamespace(ns)); err != nil {
		return explainAPIError(err, cfg.Host, "Services")
	}
	var vips heraldv1.VIPStatusList
	if err := c.List(ctx, &vips, client.InNamespace(ns)); err != nil {
		// The Services alone still say which VIPs exist.
		fmt.Fprintf(errOut, "warning: %v; owners are shown as <none>\n", explainAPIError(err, cfg.Host, "VIPStatus objects"))
	}
	rows := StatusRows(svcs.Items, vips.Items, o.LBClass)
	withheld := listWithheldNodes(ctx, c, cfg.Host, o.Output != "table", errOut)
	switch o.Output {
	case "json":
		b, err := json.MarshalIndent(StatusReport{Items: rows, WithheldNodes: withheld}, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(StatusReport{Items: rows, WithheldNodes: withheld})
		if err != nil {
			return err
		}
		_, err = out.Write(b)
		return err
	}
	if len(rows) == 0 {
		where := "in any namespace"
		if ns != "" {
			where = "in namespace " + ns
		}
		fmt.Fprintf(errOut, "No LoadBalancer IPs found %s.\n", where)
		printWithheld(out, withheld, time.Now())
		return nil
	}
	if err := PrintStatusTable(out, rows, time.Now(), o.Output == "wide", ns == ""); err != nil {
		return err
	}
	printWithheld(out, withheld, time.Now())
	return nil
}

// statusClient reads Services and VIPStatus objects. Its REST mapping is fixed, so
// it needs no discovery round-trips, and a cluster without the VIPStatus CRD answers
// 404 to the list rather than failing the mapping.
func statusClient(cfg *rest.Config) (client.Client, error) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Service"), meta.RESTScopeNamespace)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Event"), meta.RESTScopeNamespace)
	mapper.Add(heraldv1.GroupVersion.WithKind("VIPStatus"), meta.RESTScopeNamespace)
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return client.New(cfg, client.Options{Scheme: scheme.New(), Mapper: mapper, HTTPClient: httpClient})
}

// explainAPIError turns the errors a user can act on into sentences naming the
// server and what was read.
func explainAPIError(err error, server, what string) error {
	var urlErr *url.Error
	var netErr net.Error
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("the API server at %s forbids listing %s to this kubeconfig's user (herald status needs list on services and on vipstatuses.herald.dev): %w", server, what, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the API server at %s refused the kubeconfig's credentials: %w", server, err)
	case apierrors.IsNotFound(err) && strings.Contains(what, "VIPStatus"):
		return fmt.Errorf("the API server at %s has no VIPStatus resource: install herald's CRDs of this version (config/manifests/herald.yaml)", server)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("cannot reach the API server at %s: no answer in time (--request-timeout): %w", server, err)
	case errors.As(err, &urlErr), errors.As(err, &netErr):
		return fmt.Errorf("cannot reach the API server at %s (check --kubeconfig and --context): %w", server, err)
	}
	return fmt.Errorf("listing %s at %s: %w", what, server, err)
}

// StatusReport is `herald status -o json|yaml`.
type StatusReport struct {
	Items []VIPRow `json:"items"`
	// WithheldNodes are the nodes whose endpoints the speakers withhold (dead to them
	// before the API server knows).
	WithheldNodes []WithheldNode `json:"withheldNodes,omitempty"`
}

// VIPRow is one LoadBalancer IP of one Service.
type VIPRow struct {
	Namespace string `json:"namespace"`
	Service   string `json:"service"`
	VIP       string `json:"vip"`
	// OwnerNode answers ARP/NDP for VIP; "" when none does or it is not published.
	OwnerNode string `json:"ownerNode"`
	Interface string `json:"interface,omitempty"`
	MAC       string `json:"mac,omitempty"`
	// Since is RFC 3339: when OwnerNode took VIP over (or since when nobody owns it).
	Since         string `json:"since,omitempty"`
	LeaderChanges int64  `json:"leaderChanges"`
	Pool          string `json:"pool,omitempty"`
	Reason        string `json:"reason,omitempty"`
	Message       string `json:"message,omitempty"`
	// Published says whether a speaker wrote the VIP's VIPStatus.
	Published  bool   `json:"published"`
	ObservedAt string `json:"observedAt,omitempty"`
}

// StatusRows joins LoadBalancer Services with the VIPStatus objects: one row per IP
// of each Service herald serves (no loadBalancerClass or lbClass, or allocated by
// herald), sorted by namespace, Service and IP.
func StatusRows(svcs []corev1.Service, vips []heraldv1.VIPStatus, lbClass string) []VIPRow {
	byKey := make(map[client.ObjectKey]*heraldv1.VIPStatus, len(vips))
	for i := range vips {
		byKey[client.ObjectKeyFromObject(&vips[i])] = &vips[i]
	}
	type sortable struct {
		row VIPRow
		ip  netip.Addr
	}
	var out []sortable
	for i := range svcs {
		svc := &svcs[i]
		// herald's own record says herald allocated it; MetalLB's only names the pool.
		_, allocated := svc.Annotations[heraldv1.AnnotationAllocatedFromPool]
		pool := heraldv1.LookupAnnotation(svc.Annotations, heraldv1.AnnotationAllocatedFromPool).Value
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer ||
			!(allocated || heraldv1.ServesClass(svc.Spec.LoadBalancerClass, lbClass)) {
			continue
		}
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			ip, err := netip.ParseAddr(ing.IP)
			if err != nil {
				continue // a hostname ingress: not an IP anybody announces
			}
			ip = ip.Unmap()
			r := VIPRow{Namespace: svc.Namespace, Service: svc.Name, VIP: ip.String(), Pool: pool}
			if v, ok := byKey[client.ObjectKey{Namespace: svc.Namespace, Name: heraldv1.VIPStatusName(ip)}]; ok {
				s := v.Status
				r.Published = true
				r.OwnerNode, r.Interface, r.MAC, r.LeaderChanges = s.Node, s.Interface, s.MAC, s.LeaderChanges
				r.Reason, r.Message = s.Reason, s.Message
				if s.Pool != "" {
					r.Pool = s.Pool
				}
				if s.Since != nil {
					r.Since = s.Since.UTC().Format(time.RFC3339)
				}
				if s.ObservedAt != nil {
					r.ObservedAt = s.ObservedAt.UTC().Format(time.RFC3339)
				}
			}
			out = append(out, sortable{r, ip})
		}
	}
	slices.SortFunc(out, func(a, b sortable) int {
		if c := strings.Compare(a.row.Namespace, b.row.Namespace); c != 0 {
			return c
		}
		if c := strings.Compare(a.row.Service, b.row.Service); c != 0 {
			return c
		}
		return a.ip.Compare(b.ip)
	})
	rows := make([]VIPRow, len(out))
	for i, s := range out {
		rows[i] = s.row
	}
	return rows
}

// PrintStatusTable prints rows as kubectl prints a table: NAMESPACE first when
// several namespaces are shown, SINCE as an age; wide adds INTERFACE, REASON and
// MESSAGE.
func PrintStatusTable(w io.Writer, rows []VIPRow, now time.Time, wide, namespaces bool) error {
	tw := tabwriter.NewWriter(w, 6, 4, 3, ' ', 0)
	header := []string{"SERVICE", "VIP", "OWNER NODE", "MAC", "SINCE", "LEADER CHANGES", "POOL"}
	if namespaces {
		header = append([]string{"NAMESPACE"}, header...)
	}
	if wide {
		header = append(header, "INTERFACE", "REASON", "MESSAGE")
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		owner := orNone(r.OwnerNode)
		if r.Reason == heraldv1.VIPReasonHandover {
			owner += " (handover)"
		}
		cells := []string{r.Service, r.VIP, owner, orNone(r.MAC), age(r.Since, now),
			fmt.Sprint(r.LeaderChanges), orNone(r.Pool)}
		if namespaces {
			cells = append([]string{r.Namespace}, cells...)
		}
		if wide {
			reason := r.Reason
			if !r.Published {
				reason = "<not published>"
			}
			cells = append(cells, orNone(r.Interface), orNone(reason), orNone(r.Message))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// age is kubectl's age of an RFC 3339 time ("5m12s"), <none> when there is none.
func age(rfc3339 string, now time.Time) string {
	t, err := time.Parse(time.RFC3339, rfc3339)
	if err != nil {
		return "<none>"
	}
	return duration.HumanDuration(now.Sub(t))
}
