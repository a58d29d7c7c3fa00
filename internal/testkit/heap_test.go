package testkit

import (
	"runtime"
	"testing"
)

func TestHeapInUseCountsWhatIsHeld(t *testing.T) {
	const size = 64 << 20
	before := HeapInUse()
	held := make([]byte, size)
	for i := range held {
		held[i] = 1
	}
	grown := HeapInUse() - before
	runtime.KeepAlive(held)
	if grown < size || grown > 2*size {
		t.Errorf("heap grew by %.1f MiB holding %.0f MiB", MiB(grown), MiB(size))
	}
	held = nil
	if freed := HeapInUse() - before; freed > size/2 {
		t.Errorf("heap still %.1f MiB above the start once nothing is held", MiB(freed))
	}
}
