package metrics

import (
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Build describes how the running binary was built, as
// runtime/debug.ReadBuildInfo reports it.
type Build struct {
	// Version is the main module's version: a release tag (v1.2.3) or a
	// pseudo-version for a go install or go build, "(devel)" under go run
	// and go test, "" when the binary carries no build information.
	Version string
	// Revision is the VCS commit the binary was built from; "" when the
	// build did not stamp it (go run, go test, -buildvcs=false).
	Revision string
	// Time is the commit's time; zero when not stamped.
	Time time.Time
	// Modified reports that the work tree had uncommitted changes.
	Modified bool
	// GoVersion is the toolchain that built the binary (go1.26.0).
	GoVersion string
}

// ReadBuild returns the running binary's Build.
func ReadBuild() Build {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return Build{}
	}
	return buildOf(info)
}

func buildOf(info *debug.BuildInfo) Build {
	b := Build{Version: info.Main.Version, GoVersion: info.GoVersion}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time, _ = time.Parse(time.RFC3339, s.Value)
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// RevisionLabel is Revision with "+dirty" appended when Modified, so that
// a binary built from a modified tree is not mistaken for the commit's.
func (b Build) RevisionLabel() string {
	if b.Modified && b.Revision != "" {
		return b.Revision + "+dirty"
	}
	return b.Revision
}

// RegisterBuildInfo registers the gauge bouncer_build_info on reg: 1,
// labelled with the running binary's version, revision and goversion
// (see Build). It is shorthand for reg.MustRegister(BuildInfo(ReadBuild())),
// and panics if reg already has it, as New does.
func RegisterBuildInfo(reg prometheus.Registerer) {
	reg.MustRegister(BuildInfo(ReadBuild()))
}

// BuildInfo returns the gauge bouncer_build_info for b: 1, labelled with
// b's Version, RevisionLabel and GoVersion. A binary whose release build
// set a version of its own registers it with that Version.
func BuildInfo(b Build) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "bouncer_build_info",
		Help: "1, labelled with the binary's module version, VCS revision (+dirty if built from a modified tree) and Go version.",
		ConstLabels: prometheus.Labels{
			"version":   b.Version,
			"revision":  b.RevisionLabel(),
			"goversion": b.GoVersion,
		},
	}, func() float64 { return 1 })
}
