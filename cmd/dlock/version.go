package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionInfo is what dlock version prints.
type versionInfo struct {
	Version  string `json:"version"`  // the module version, "(devel)" for a local build
	Revision string `json:"revision"` // the VCS revision it was built from, if known
	Modified bool   `json:"modified"` // built from a tree with uncommitted changes
	Go       string `json:"go"`
}

func buildVersion() versionInfo {
	v := versionInfo{Version: "(unknown)", Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Version = bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print dlock's module version, VCS revision and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := buildVersion()
			if jsonOutput() {
				return printJSON(cmd.OutOrStdout(), v)
			}
			rev := v.Revision
			if rev == "" {
				rev = "unknown revision"
			} else if v.Modified {
				rev += "+modified"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "dlock %s (%s, %s)\n", v.Version, rev, v.Go)
			return nil
		},
	}
}
