package netlab

import (
	"os"
	"strings"
)

// LogTail is the last lines of a log, for errors that say why a process failed.
func LogTail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}
