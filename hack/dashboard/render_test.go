package main

import "testing"

func TestUnescapeHTML(t *testing.T) {
	for in, want := range map[string]string{
		`"a \u003e 1 \u0026\u0026 b \u003c 2"`: `"a > 1 && b < 2"`,
		`"\\u003e stays"`:                      `"\\u003e stays"`,
		`"\\\u003e"`:                           `"\\>"`,
		`"\n\"\u00b2"`:                         `"\n\"\u00b2"`,
	} {
		if got := string(unescapeHTML([]byte(in))); got != want {
			t.Errorf("unescapeHTML(%s) = %s, want %s", in, got, want)
		}
	}
}
