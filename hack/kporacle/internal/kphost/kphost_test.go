//go:build linux

package kphost

import (
	"strings"
	"testing"
)

type owner struct {
	count int
	name  string
}

func TestReplaceChecksNameAndType(t *testing.T) {
	o := &owner{count: 1}
	old, err := Replace(o, "count", 5)
	if err != nil || old != 1 || o.count != 5 {
		t.Fatalf("Replace count: old=%d err=%v count=%d", old, err, o.count)
	}
	if _, err := Replace(o, "name", 5); err == nil || !strings.Contains(err.Error(), `field "name" has type string, want int`) {
		t.Errorf("Replace with the wrong type: err=%v", err)
	}
	if _, err := Replace(o, "gone", 5); err == nil || !strings.Contains(err.Error(), `has no field "gone"`) {
		t.Errorf("Replace of a missing field: err=%v", err)
	}
	if _, err := Get[int](*o, "count"); err == nil {
		t.Error("Get on a struct value, not a pointer: no error")
	}
}
