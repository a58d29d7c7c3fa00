package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
)

// PodRecord is what the agent keeps on disk about a pod it set up: enough for the agent
// that runs next (after a crash or a restart) to take it down again, and for the lab's
// CLI to show the pod and run commands in its namespace.
type PodRecord struct {
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
	UID       string     `json:"uid"`
	Node      string     `json:"node"`
	NetNS     string     `json:"netns"`
	Veth      string     `json:"veth"` // node-side end, in the node's namespace
	IP        netip.Addr `json:"ip"`
	IP6       netip.Addr `json:"ip6,omitzero"` // on a dual-stack node
	Ports     []int32    `json:"ports"`
}

// ips are the pod's addresses, IPv4 first.
func (r PodRecord) ips() []netip.Addr {
	if r.IP6.IsValid() {
		return []netip.Addr{r.IP, r.IP6}
	}
	return []netip.Addr{r.IP}
}

// recordsDir is where an agent with state directory dir keeps its records.
func recordsDir(dir string) string { return filepath.Join(dir, "pods") }

func (r PodRecord) path(dir string) string {
	return filepath.Join(recordsDir(dir), r.Namespace+"_"+r.Name+".json")
}

func (r PodRecord) save(dir string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(recordsDir(dir), 0o755); err != nil {
		return fmt.Errorf("pod records: %w", err)
	}
	// Write then rename, so a reader never sees half a record.
	tmp := r.path(dir) + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("pod record %s/%s: %w", r.Namespace, r.Name, err)
	}
	return os.Rename(tmp, r.path(dir))
}

func (r PodRecord) remove(dir string) error {
	if err := os.Remove(r.path(dir)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pod record %s/%s: %w", r.Namespace, r.Name, err)
	}
	return nil
}

// ReadRecords returns the records of the pods an agent with state directory dir has set
// up, sorted by namespace and name. A missing directory means none.
func ReadRecords(dir string) ([]PodRecord, error) {
	files, err := filepath.Glob(filepath.Join(recordsDir(dir), "*.json"))
	if err != nil {
		return nil, err
	}
	var out []PodRecord
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) { // removed meanwhile
				continue
			}
			return nil, fmt.Errorf("pod record: %w", err)
		}
		var r PodRecord
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("pod record %s: %w", f, err)
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}
