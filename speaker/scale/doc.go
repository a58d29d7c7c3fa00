// Package scale holds the speakers' scale benchmarks: many speaker.Headless control
// loops against a real kube-apiserver and etcd in one process (BenchmarkSpeakersAtScale,
// `make bench-scale`), and the heartbeats' cost during an even split
// (BenchmarkHeartbeatsAtSplit). docs/scale.md holds their figures. The package has
// no code of its own outside its tests.
package scale
