package members

import (
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
)

func TestLogWriterLevels(t *testing.T) {
	var lines []string
	l := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 1})
	std := newStdLogger(l)
	std.Print("[ERR] memberlist: failed to receive: boom")
	std.Print("[WARN] memberlist: refuting a suspect message")
	std.Print("[DEBUG] memberlist: stream connection")
	std.Print("no level")
	got := strings.Join(lines, "\n")
	for _, want := range []string{
		`"msg"="failed to receive: boom" "error"=null`,
		`"level"=0 "msg"="refuting a suspect message"`,
		`"level"=1 "msg"="stream connection"`,
		`"level"=1 "msg"="no level"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log lines\n%s\nlack %s", got, want)
		}
	}
}
