// Command lab runs the herald lab: a kind-like cluster in network namespaces on this
// machine (see internal/lab). It needs root.
//
//	lab up [--workers 3]         build and start the lab, then return; it keeps running
//	lab status                   what runs, where the state and logs are
//	lab kubectl ARGS...          kubectl against the lab's API server
//	lab exec HOST|POD CMD...     a command in a lab namespace (cp, worker, client, webpod1)
//	lab kill-speaker NODE        SIGKILL, stop-speaker NODE (SIGTERM), start-speaker NODE
//	lab freeze-speaker NODE      SIGSTOP (a paused VM); thaw-speaker NODE sends SIGCONT
//	lab link-down NODE           pull a node's cable; link-up NODE plugs it back
//	lab partition NODE...        drop the nodes' memberlist traffic; heal [NODE...] undoes it
//	lab split A,B C,D            cut memberlist between two groups of nodes only
//	lab death-rumour TO ABOUT    tell TO's speaker that ABOUT's is dead (one memberlist packet)
//	lab restart-controller       SIGTERM herald's controller and start it again
//	lab curl URL [-n 100]        the walkthrough's curl loop from the client, counted
//	lab who-has IP               which node answers ARP for IP, seen from the client
//	lab failover VIP... --fault F measure a failover of the VIPs' one owner from the client (ARP, NDP)
//	lab down                     remove everything the lab made
//
// The run directory (default .run/lab in the repository, or $LAB_RUN_DIR) holds the
// state, the logs and the binaries.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/lab/netlab"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot().ExecuteContext(ctx)
	stop()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) { // a command run in the lab failed and said why
			os.Exit(exit.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "lab:", strings.TrimPrefix(err.Error(), "lab: "))
		os.Exit(1)
	}
}

// opts are the flags every verb shares.
type opts struct {
	runDir string
	prefix string
}

// dir is the run directory: the flag, $LAB_RUN_DIR, or .run/lab in the repository.
func (o *opts) dir(ctx context.Context) (string, error) {
	if o.runDir == "" {
		o.runDir = os.Getenv("LAB_RUN_DIR")
	}
	if o.runDir == "" {
		root, err := netlab.RepoRoot(ctx)
		if err != nil {
			return "", fmt.Errorf("%w (or pass --run-dir)", err)
		}
		o.runDir = filepath.Join(root, ".run", "lab")
	}
	return filepath.Abs(o.runDir)
}

func (o *opts) state(ctx context.Context) (*lab.State, error) {
	dir, err := o.dir(ctx)
	if err != nil {
		return nil, err
	}
	return lab.Load(dir)
}

func newRoot() *cobra.Command {
	o := &opts{}
	root := &cobra.Command{
		Use:           "lab",
		Short:         "The herald lab: a kind-like cluster in network namespaces",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&o.runDir, "run-dir", "", "run directory with the lab's state, logs and binaries (default $LAB_RUN_DIR or <repo>/.run/lab)")
	root.PersistentFlags().StringVar(&o.prefix, "prefix", lab.DefaultPrefix, "network namespace prefix, used when the run directory has no state")
	root.AddCommand(upCmd(o), downCmd(o), statusCmd(o), kubectlCmd(o), execCmd(o), agentCmd())
	root.AddCommand(faultCmds(o)...)
	root.AddCommand(curlCmd(o), whoHasCmd(o), failoverCmd(o))
	return root
}
