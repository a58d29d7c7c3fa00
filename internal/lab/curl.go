package lab

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"herald.dev/herald/internal/netns"
)

// CurlResult counts the answers of repeated requests: by their Hostname line (what the
// walkthrough's `grep Hostname | sort | uniq -c` counts), and failures by their error.
type CurlResult struct {
	Counts map[string]int
	OK     int
	Failed int
}

// Curl sends n GET requests to url from inside the namespace ns, parallel at a time,
// each on a new connection as separate curl runs would be, each bounded by timeout. The
// URL's host must be an IP address (names would be resolved outside the namespace).
// It is the walkthrough's loop of curls, without needing curl in the lab.
func Curl(ctx context.Context, ns, url string, n, parallel int, timeout time.Duration) CurlResult {
	hc := &http.Client{
		Transport: &http.Transport{DialContext: netns.Dialer(ns), DisableKeepAlives: true},
		Timeout:   timeout,
	}
	res := CurlResult{Counts: map[string]int{}}
	var mu sync.Mutex
	jobs := make(chan struct{})
	var wg sync.WaitGroup
	for range max(parallel, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				line, err := getHostname(ctx, hc, url)
				mu.Lock()
				if err != nil {
					res.Failed++
					res.Counts["error: "+normalizeError(err)]++
				} else {
					res.OK++
					res.Counts[line]++
				}
				mu.Unlock()
			}
		}()
	}
	for range n {
		if ctx.Err() != nil {
			break
		}
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	return res
}

// getHostname makes one request and returns the answer's Hostname line.
func getHostname(ctx context.Context, hc *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("User-Agent", "herald-lab-curl")
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %s", resp.Status)
	}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 64<<10))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "Hostname:") {
			return sc.Text(), nil
		}
	}
	return "(no Hostname line)", sc.Err()
}

// ephemeral matches the client's address and port in socket errors, which differ with
// every connection and would split one failure into a hundred counts.
var ephemeral = regexp.MustCompile(`(\d+\.\d+\.\d+\.\d+|\[[0-9a-fA-F:.]+\]):\d+->`)

func normalizeError(err error) string {
	return ephemeral.ReplaceAllString(err.Error(), "")
}

// Print writes the counts as `sort | uniq -c | sort -nr` would.
func (r CurlResult) Print(w io.Writer) {
	lines := make([]string, 0, len(r.Counts))
	for l := range r.Counts {
		lines = append(lines, l)
	}
	slices.SortFunc(lines, func(a, b string) int {
		if r.Counts[a] != r.Counts[b] {
			return r.Counts[b] - r.Counts[a]
		}
		return strings.Compare(a, b)
	})
	for _, l := range lines {
		fmt.Fprintf(w, "%7d %s\n", r.Counts[l], l)
	}
}
