package runner

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// ErrNoNFT means the nft binary (Debian package nftables) is missing.
var ErrNoNFT = errors.New("nft binary not found (install the nftables package)")

// NFT lists nftables tables with the nft tool.
type NFT struct {
	path string
	do   Do
}

// NFTTable is one nftables table: its family (ip, ip6, inet, ...) and name.
type NFTTable struct {
	Family, Name string
}

func (t NFTTable) String() string { return t.Family + " " + t.Name }

// NewNFT finds the nft binary; the error wraps ErrNoNFT when it is missing.
func NewNFT(do Do) (*NFT, error) {
	if do == nil {
		do = direct
	}
	path, err := exec.LookPath("nft")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoNFT, err)
	}
	return &NFT{path: path, do: do}, nil
}

// Tables runs `nft list tables`: table names only, however many rules they hold.
func (n *NFT) Tables(ctx context.Context) ([]NFTTable, error) {
	out, err := run(ctx, n.do, nil, n.path, "list", "tables")
	if err != nil {
		return nil, fmt.Errorf("nft list tables: %w", err)
	}
	return ParseNFTTables(string(out)), nil
}

// ParseNFTTables reads the output of `nft list tables`, one "table <family> <name>"
// a line.
func ParseNFTTables(out string) []NFTTable {
	var tables []NFTTable
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "table" {
			tables = append(tables, NFTTable{Family: f[1], Name: f[2]})
		}
	}
	return tables
}

// Apply runs script with `nft -f -`: one transaction, all of it or nothing.
func (n *NFT) Apply(ctx context.Context, script string) error {
	if _, err := run(ctx, n.do, []byte(script), n.path, "-f", "-"); err != nil {
		return fmt.Errorf("nft -f: %w", err)
	}
	return nil
}

// ListJSON runs `nft -j list table FAMILY NAME`.
func (n *NFT) ListJSON(ctx context.Context, t NFTTable) ([]byte, error) {
	out, err := run(ctx, n.do, nil, n.path, "-j", "list", "table", t.Family, t.Name)
	if err != nil {
		return nil, fmt.Errorf("nft -j list table %s: %w", t, err)
	}
	return out, nil
}
