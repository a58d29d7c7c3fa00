//go:build linux

package nftoracle

import (
	"context"
	"strings"

	"sigs.k8s.io/knftables"
)

// recordingNFT passes every call to the knftables.Interface it wraps and
// keeps the text of each transaction the proxier runs.
type recordingNFT struct {
	knftables.Interface
	runs []runCall
}

// runCall is one transaction the proxier ran, as nft -f input.
type runCall struct {
	tx  string
	err error
}

// Run records tx and runs it.
func (r *recordingNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	err := r.Interface.Run(ctx, tx)
	r.runs = append(r.runs, runCall{tx: tx.String(), err: err})
	return err
}

// take returns and forgets the transactions recorded since the previous take.
func (r *recordingNFT) take() []runCall {
	runs := r.runs
	r.runs = nil
	return runs
}

// joinRuns concatenates the transactions' texts in the order they ran.
func joinRuns(runs []runCall) string {
	var b strings.Builder
	for _, run := range runs {
		b.WriteString(run.tx)
		if run.tx != "" && !strings.HasSuffix(run.tx, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}
