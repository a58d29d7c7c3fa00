// Package withhold is the shell around the pure speaker/deadnodes rule: it probes the
// hosts of speakers that vanished or said goodbye (prober.go: memberlist's port,
// kube-proxy's health port and the kubelet's), decides each election pass which nodes
// are dead, hands them to the proxier so that their endpoints get no new connection,
// and reports each change in the log and, from one speaker, in an Event on the Node
// (EndpointsWithheld, EndpointsRestored). The speaker reaches it through Update and
// Answers; it reaches back only through its Callbacks.
package withhold
