// Package deadnodes decides which nodes a speaker knows dead, so that its node's proxier
// withholds their endpoints long before the API server marks them not ready. It is pure:
// plain values in (Input), plain values out ([]Node); no client, no clock, no socket.
//
// Kubernetes learns that a node died from its missing Lease renewals: after
// node-monitor-grace-period (50 s) the node lifecycle controller marks it Unknown and
// its pods not ready, and only then do the EndpointSlices, and every proxier, drop its
// endpoints. Meanwhile every connection a proxier sends there is lost. The speakers
// know within a second: memberlist declares the node's speaker dead. But a speaker
// that vanishes is not always a dead node: the speaker may have been stopped on
// purpose (a rolling update), crashed on a healthy node, or been cut off from its peers
// on the memberlist port alone. Withholding the endpoints of a live node costs capacity
// and, worse, breaks its open connections, so this package withholds only what nothing
// proves alive.
//
// # The rule
//
// A speaker decides only while it hears a majority of the speakers (quorum.ModeQuorum):
// a speaker that is itself cut off must not take its peers' endpoints out of service.
// Then a node is withheld when all of these hold:
//
//   - it has a Node object and is not this speaker's node;
//   - its speaker is not a live memberlist member, and either memberlist lost it since
//     this speaker started (Lost), or its record in the API server is no longer fresh
//     (a node already dead when this speaker started);
//   - if its speaker said it was leaving (a graceful stop, which a restart and a node
//     shutting down both begin with), a probe sent after it left went unanswered: the
//     node is down, not restarting its speaker;
//   - its record did not change after memberlist lost it (a speaker cut off from
//     memberlist but alive renews it, fast, within a second);
//   - no probe of the node's address got an answer since it was lost and within
//     AliveFor: a refused connection, or a listener that answers or hangs up (a host
//     that refuses a connection is up: only its speaker is down; one whose kernel
//     accepts connections that nobody serves is frozen).
//
// A withheld node is Unreachable once a probe sent after it was lost went unanswered
// for ProbeTimeout: then its pods are gone from the network too, and the proxier also
// clears the flows it had sent to them, so that their clients see a reset instead of a
// hang. Until then its endpoints only get no new connection, which costs nothing but
// capacity if the node turns out alive.
//
// A withheld node's endpoints are withheld even when they are all the endpoints a
// Service has: its traffic is then rejected at once, as the proxier does for a Service
// without endpoints, and as every proxier will do once the API server marks the node's
// pods not ready; a connection that hangs helps nobody. The node's endpoints come back
// as soon as its speaker is live again or something proves it alive.
package deadnodes
