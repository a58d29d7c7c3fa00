package election

// fit says how well a node can serve a Service: not at all, only through endpoints that
// are terminating but still serving, or with a ready endpoint (or any node, for
// externalTrafficPolicy Cluster).
type fit uint8

const (
	fitNone fit = iota
	fitServing
	fitReady
)

// CanServe reports whether an endpoint with these conditions can take traffic: ready
// (nil means unknown and counts as ready, as the EndpointSlice API says), or not ready
// but serving (terminating, still serving; MetalLB's EndpointCanServe). A nil serving
// defers to ready.
func CanServe(ready, serving *bool) bool {
	return endpointFit(Endpoint{Ready: ready, Serving: serving}) != fitNone
}

func endpointFit(ep Endpoint) fit {
	switch {
	case ep.Ready == nil || *ep.Ready:
		return fitReady
	case ep.Serving != nil && *ep.Serving:
		return fitServing
	}
	return fitNone
}
