package testkit

import "runtime"

// HeapInUse is the bytes of heap spans in use after two full collections: the second
// frees what finalizers kept alive through the first. Spans in use, rather than bytes
// of live objects, count what the process pays for the heap, fragmentation included,
// which is what sizing a node needs; ReadMemStats stops the world, so the figure is
// one consistent reading of the heap the collections left.
func HeapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// MiB is bytes in mebibytes, the unit benchmarks report heap in.
func MiB(bytes int64) float64 { return float64(bytes) / (1 << 20) }
