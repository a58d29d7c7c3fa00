package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"herald.dev/herald/internal/lab/netlab"
)

// stateFile, in the run directory, is how the lab's later commands (status, faults,
// kubectl, down) find what Up built: the process that built it is gone by then.
const stateFile = "lab.json"

// ErrNoLab says that the run directory holds no lab.
var ErrNoLab = errors.New("no lab is up here")

// State is what Up built, as recorded in the run directory.
type State struct {
	Prefix     string    `json:"prefix"`
	RunDir     string    `json:"runDir"`
	Started    time.Time `json:"started"`
	Assets     string    `json:"assets"`
	KubectlBin string    `json:"kubectl"`
	Kubeconfig string    `json:"kubeconfig"` // cluster admin: the agents, kubectl, tests
	Herald     string    `json:"herald"`     // the herald binary the lab runs
	LabBin     string    `json:"labBin"`     // hack/lab, which runs the agents
	// ControllerKubeconfig and SpeakerKubeconfig hold tokens of the manifest's
	// ServiceAccounts herald-controller and herald-speaker, which the components run as.
	ControllerKubeconfig string                 `json:"controllerKubeconfig"`
	SpeakerKubeconfig    string                 `json:"speakerKubeconfig"`
	SpeakerArgs          []string               `json:"speakerArgs,omitempty"` // extra speaker flags
	DualStack            bool                   `json:"dualStack,omitempty"`   // Config.DualStack
	Proxy                string                 `json:"proxy,omitempty"`       // Config.Proxy; "" in labs from before it
	Hosts                []HostInfo             `json:"hosts"`
	Procs                map[string]netlab.Proc `json:"procs"` // by Proc.Key
}

// Role says what a host is for.
type Role string

const (
	RoleControlPlane Role = "control-plane"
	RoleWorker       Role = "worker"
	RoleClient       Role = "client"
)

// HostInfo is one of the lab's namespaces on the bridge.
type HostInfo struct {
	Name      string       `json:"name"`
	Role      Role         `json:"role"`
	Namespace string       `json:"namespace"`
	Addr      netip.Addr   `json:"addr"`
	MAC       string       `json:"mac"`
	PodCIDR   netip.Prefix `json:"podCIDR,omitzero"`
	// Addr6 and PodCIDR6 are the host's IPv6 address and a worker's IPv6 pod CIDR in a
	// dual-stack lab.
	Addr6    netip.Addr   `json:"addr6,omitzero"`
	PodCIDR6 netip.Prefix `json:"podCIDR6,omitzero"`
}

// Host returns the host called name.
func (s *State) Host(name string) (HostInfo, error) {
	for _, h := range s.Hosts {
		if h.Name == name {
			return h, nil
		}
	}
	return HostInfo{}, fmt.Errorf("lab: no host %q (hosts: %s)", name, s.hostNames())
}

// Worker returns the worker called name.
func (s *State) Worker(name string) (HostInfo, error) {
	h, err := s.Host(name)
	if err == nil && h.Role != RoleWorker {
		err = fmt.Errorf("lab: %s is the %s, not a worker", name, h.Role)
	}
	return h, err
}

// Workers are the worker hosts in order.
func (s *State) Workers() []HostInfo {
	var out []HostInfo
	for _, h := range s.Hosts {
		if h.Role == RoleWorker {
			out = append(out, h)
		}
	}
	return out
}

// HostByMAC names the host whose eth0 has mac.
func (s *State) HostByMAC(mac string) (HostInfo, bool) {
	for _, h := range s.Hosts {
		if h.MAC == mac {
			return h, true
		}
	}
	return HostInfo{}, false
}

func (s *State) hostNames() string {
	var names []byte
	for i, h := range s.Hosts {
		if i > 0 {
			names = append(names, ", "...)
		}
		names = append(names, h.Name...)
	}
	return string(names)
}

// BridgeNamespace holds the bridge and the bridge-side ends of the hosts' cables
// (netlab's naming: <prefix>br).
func (s *State) BridgeNamespace() string { return s.Prefix + "br" }

// agentDir is where the agent of a worker keeps its pod records.
func agentDir(runDir, worker string) string { return filepath.Join(runDir, "agents", worker) }

// memberlistDir is where worker's agent keeps the memberlist Secret mounted for its
// speaker, as the DaemonSet's Secret volume.
func memberlistDir(runDir, worker string) string { return filepath.Join(runDir, "memberlist", worker) }

// Save writes the state into its run directory, atomically.
func (s *State) Save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(s.RunDir, stateFile)
	if err := os.WriteFile(path+".tmp", append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("lab state: %w", err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("lab state: %w", err)
	}
	return nil
}

// Load reads the state of the lab in runDir; ErrNoLab when there is none.
func Load(runDir string) (*State, error) {
	b, err := os.ReadFile(filepath.Join(runDir, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w (no %s in %s): run `hack/lab up`", ErrNoLab, stateFile, runDir)
	}
	if err != nil {
		return nil, fmt.Errorf("lab state: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("lab state %s: %w", filepath.Join(runDir, stateFile), err)
	}
	if s.Procs == nil {
		s.Procs = map[string]netlab.Proc{}
	}
	return &s, nil
}
