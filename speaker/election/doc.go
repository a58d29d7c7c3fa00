// Package election is the pure owner election: for each IP, the live eligible node with
// the smallest sha256(nodeName + "#" + ip). To be built in issue 3.
package election
