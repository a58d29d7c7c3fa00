package main

import (
	"bytes"
	"encoding/json"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// schemaVersion is the dashboard schema the file declares: Grafana 10.4's, so that Grafana
// 10 and later load it; newer releases migrate it forward on load.
const schemaVersion = 39

// render returns the dashboard as the JSON file herald ships.
func render() ([]byte, error) {
	d, err := heraldDashboard().Build()
	if err != nil {
		return nil, err
	}
	d.SchemaVersion = schemaVersion
	numberPanels(d.Panels)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return unescapeHTML(buf.Bytes()), nil
}

// htmlEscapes are the escapes encoding/json writes for <, > and & even with SetEscapeHTML
// off, in what the SDK's own MarshalJSON methods return (the queries among them).
var htmlEscapes = map[string]byte{`\u003c`: '<', `\u003e`: '>', `\u0026`: '&'}

// unescapeHTML writes <, > and & as themselves in JSON text, so that PromQL such as
// `count(...) > 1` reads as written. It steps over every other escape whole, so that an
// escaped backslash followed by "u003e" stays as it is.
func unescapeHTML(in []byte) []byte {
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); i++ {
		if in[i] != '\\' || i+1 == len(in) {
			out = append(out, in[i])
			continue
		}
		if i+6 <= len(in) {
			if c, ok := htmlEscapes[string(in[i:i+6])]; ok {
				out = append(out, c)
				i += 5
				continue
			}
		}
		out = append(out, in[i], in[i+1])
		i++
	}
	return out
}

// numberPanels gives rows and panels the ids 1, 2, … in dashboard order: ids must be
// unique, and links to a panel (viewPanel=N) stay valid as long as the order does.
func numberPanels(panels []dashboard.PanelOrRowPanel) {
	for i, p := range panels {
		id := uint32(i + 1)
		switch {
		case p.RowPanel != nil:
			p.RowPanel.Id = id
		case p.Panel != nil:
			p.Panel.Id = &id
		}
	}
}
