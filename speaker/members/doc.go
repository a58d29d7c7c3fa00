// Package members is the speakers' hashicorp/memberlist membership: join, leave,
// encryption and failure detection. To be built in issue 3.
package members
