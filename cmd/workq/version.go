package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// stampedVersion is set at build time by `make build`, `make run` and `make
// release` (-ldflags "-X main.stampedVersion=..."): the checkout's `git
// describe`, or v0.0.0-dev+COMMIT while no version is tagged. Empty in a
// plain `go build`.
var stampedVersion string

// versionInfo is what the binary knows about its own build
// (runtime/debug.ReadBuildInfo): the module version (a tag when installed
// with `go install ...@vX`, else the version make stamped, else "(devel)"
// for a plain go build of a checkout) and, when built from a checkout with
// VCS stamping, the commit and its time.
type versionInfo struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Time     string `json:"revision_time,omitempty"`
	Modified bool   `json:"modified,omitempty"` // the checkout had uncommitted changes
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

func buildVersion() versionInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return versionFrom(bi, stampedVersion)
}

// versionFrom reads bi (nil: the binary carries none) and the version make
// stamped (empty: none), which wins when set: only make sets it, and go
// build's own stamp of a checkout is a pseudo-version of no tag (Go 1.24
// and later) or "(devel)".
func versionFrom(bi *debug.BuildInfo, stamped string) versionInfo {
	v := versionInfo{Version: "unknown", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if stamped != "" {
		v.Version = stamped
	}
	if bi == nil {
		return v
	}
	if bi.Main.Version != "" && stamped == "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String is the one-line form: "workq v1.2.3 (abc123def456, 2030-01-02T15:04:05Z, modified) go1.26 linux/amd64".
func (v versionInfo) String() string {
	var vcs []string
	if v.Revision != "" {
		vcs = append(vcs, v.Revision[:min(len(v.Revision), 12)])
	}
	if v.Time != "" {
		vcs = append(vcs, v.Time)
	}
	if v.Modified {
		vcs = append(vcs, "modified")
	}
	s := "workq " + v.Version
	if len(vcs) > 0 {
		s += " (" + strings.Join(vcs, ", ") + ")"
	}
	return s + " " + v.Go + " " + v.Platform
}

func newVersionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version [--json]",
		Short: "Print the version of this binary: module version, commit and its time when known, Go version",
		Args:  cobra.NoArgs,
	}
	asJSON := cmd.Flags().Bool("json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		v := buildVersion()
		if *asJSON {
			return printJSON(cmd.OutOrStdout(), v)
		}
		_, err := fmt.Fprintln(cmd.OutOrStdout(), v)
		return err
	}
	return cmd
}
