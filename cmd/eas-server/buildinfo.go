package main

import (
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/eas-server/eas-server/internal/server"
)

// buildVersion says which build this binary is, for --version: the
// server's version, the Go version and the VCS revision it was built
// from, e.g. "eas-server 0.1.0 (go1.26.0, revision 7680aca1b2c3, 2026-12-01T16:00:00Z, modified)".
func buildVersion() string {
	parts := []string{runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.GoVersion != "" {
			parts[0] = bi.GoVersion
		}
		set := map[string]string{}
		for _, s := range bi.Settings {
			set[s.Key] = s.Value
		}
		if rev := set["vcs.revision"]; rev != "" {
			parts = append(parts, "revision "+rev)
			if t := set["vcs.time"]; t != "" {
				parts = append(parts, t)
			}
			if set["vcs.modified"] == "true" {
				parts = append(parts, "modified")
			}
		} else {
			parts = append(parts, "no VCS revision recorded")
		}
	}
	return "eas-server " + server.Version + " (" + strings.Join(parts, ", ") + ")"
}
