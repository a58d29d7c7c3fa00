// Package version holds the build's version, stamped by the linker
// (-X herald.dev/herald/internal/version.Version=...).
package version

// Version is set at build time; "dev" for a plain `go build`.
var Version = "dev"
