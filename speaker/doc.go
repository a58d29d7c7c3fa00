// Package speaker wires what runs on every node: it watches Services, EndpointSlices,
// Nodes and L2Advertisements, elects the owner of each LoadBalancer IP
// (speaker/election) among the live members (speaker/members), and hands the IPs this
// node owns to the layer-2 responders (speaker/layer2) and the proxier (proxy/).
// Whom it elects among is speaker/quorum's decision: memberlist's view while it hears
// a majority of the speakers, the speakers' records in the API server otherwise.
package speaker
