// Package speaker wires what runs on every node: it watches Services, EndpointSlices,
// Nodes and L2Advertisements, elects the owner of each LoadBalancer IP
// (speaker/election) among the live members (speaker/members), and hands the IPs this
// node owns to the layer-2 responders (speaker/layer2) and the proxier (proxy/).
// `herald speaker` is not implemented yet (issue 3); it exits with a message saying so.
package speaker
