// Package layer2 answers ARP (IPv4) and NDP (IPv6) for the IPs this node owns and sends
// gratuitous announcements on takeover. To be built in issue 3.
package layer2
