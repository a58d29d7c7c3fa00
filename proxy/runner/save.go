package runner

import "bytes"

// ParseChains returns the chains iptables-save declares (":NAME POLICY [p:b]") in the
// section of table, in order.
func ParseChains(save []byte, table string) []string {
	var chains []string
	in := false
	for len(save) > 0 {
		line := save
		if i := bytes.IndexByte(save, '\n'); i >= 0 {
			line, save = save[:i], save[i+1:]
		} else {
			save = nil
		}
		switch {
		case len(line) > 0 && line[0] == '*':
			in = string(line[1:]) == table
		case !in:
		case bytes.Equal(line, []byte("COMMIT")):
			in = false
		case len(line) > 1 && line[0] == ':':
			name := line[1:]
			if i := bytes.IndexByte(name, ' '); i >= 0 {
				name = name[:i]
			}
			chains = append(chains, string(name))
		}
	}
	return chains
}

// HasRule says whether an iptables-save text holds the rule "-A chain args..." exactly
// as iptables-save prints it: arguments with spaces in double quotes. A rule written
// differently reads as absent, which costs the caller a check, never a missing rule.
func HasRule(save []byte, chain string, args ...string) bool {
	var b bytes.Buffer
	b.WriteString("\n-A ")
	b.WriteString(chain)
	for _, a := range args {
		b.WriteByte(' ')
		if bytes.ContainsAny([]byte(a), " \t") {
			b.WriteByte('"')
			b.WriteString(a)
			b.WriteByte('"')
		} else {
			b.WriteString(a)
		}
	}
	b.WriteByte('\n')
	return bytes.Contains(save, b.Bytes())
}
