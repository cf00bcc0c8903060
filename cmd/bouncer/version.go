package main

import (
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/bouncerhq/bouncer/metrics"
)

func versionUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: bouncer version")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Prints the binary's version, the VCS commit and time it was built from")
	fmt.Fprintln(w, "(+dirty if the work tree had changes), and the Go version that built it. The")
	fmt.Fprintln(w, "version is the one a release build set (make release, make image, the")
	fmt.Fprintln(w, "Dockerfile's VERSION); otherwise the module version the Go toolchain recorded")
	fmt.Fprintln(w, "(a tag, or a pseudo-version). /metrics exports the same as bouncer_build_info.")
}

// version is the release's version, set by a release build with
// -ldflags "-X main.version=v1.2.3". When set it wins over the module
// version the Go toolchain records, which a build without VCS
// information (a Docker build context, a source archive) lacks.
var version string

// readBuild returns the running binary's build information, with the
// release's version when one was set.
func readBuild() metrics.Build {
	return withVersion(metrics.ReadBuild(), version)
}

// withVersion returns b with its Version replaced by v, unless v is empty.
func withVersion(b metrics.Build, v string) metrics.Build {
	if v != "" {
		b.Version = v
	}
	return b
}

func runVersion(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "bouncer version: unexpected argument %q\n", args[0])
		return exitUsage
	}
	writeVersion(stdout, readBuild())
	return exitOK
}

// writeVersion prints b as `bouncer version` does: one "key: value" line
// each for the version, the commit, its time and the Go toolchain.
func writeVersion(w io.Writer, b metrics.Build) {
	version := b.Version
	switch version {
	case "":
		version = "unknown (the binary carries no build information)"
	case "(devel)":
		version = "(devel) (no module version: go run, go test, -buildvcs=false or a build outside a VCS checkout)"
	}
	commit, at := "not recorded (go install of a module version, go run, go test and -buildvcs=false leave it out)", "not recorded"
	if b.Revision != "" {
		commit = b.RevisionLabel()
	}
	if !b.Time.IsZero() {
		at = b.Time.UTC().Format(time.RFC3339)
	}
	goVersion := b.GoVersion
	if goVersion == "" {
		goVersion = runtime.Version()
	}
	fmt.Fprintf(w, "version: %s\n", version)
	fmt.Fprintf(w, "commit:  %s\n", commit)
	fmt.Fprintf(w, "time:    %s\n", at)
	fmt.Fprintf(w, "go:      %s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
}
