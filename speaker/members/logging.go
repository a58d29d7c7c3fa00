package members

import (
	"bytes"
	"log"
	"strings"

	"github.com/go-logr/logr"
)

// logWriter feeds memberlist's standard-library log lines ("[LEVEL] memberlist: …")
// into logr: ERR as errors, WARN at V(0), everything else at V(1).
type logWriter struct{ log logr.Logger }

func newStdLogger(l logr.Logger) *log.Logger {
	return log.New(logWriter{l}, "", 0)
}

func (w logWriter) Write(p []byte) (int, error) {
	msg := string(bytes.TrimSpace(p))
	level := ""
	if strings.HasPrefix(msg, "[") {
		if i := strings.IndexByte(msg, ']'); i > 0 {
			level, msg = msg[1:i], strings.TrimSpace(msg[i+1:])
		}
	}
	msg = strings.TrimPrefix(msg, "memberlist: ")
	switch level {
	case "ERR", "ERROR":
		w.log.Error(nil, msg)
	case "WARN":
		w.log.Info(msg)
	default:
		w.log.V(1).Info(msg)
	}
	return len(p), nil
}
