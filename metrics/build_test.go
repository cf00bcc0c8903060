package metrics

import (
	"maps"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestBuildOf(t *testing.T) {
	at := time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		info     debug.BuildInfo
		want     Build
		wantRevL string
	}{
		{
			name: "release",
			info: debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "75928e8"}, {Key: "vcs.time", Value: "2026-12-01T23:00:00Z"}, {Key: "vcs.modified", Value: "false"},
			}},
			want:     Build{Version: "v1.2.3", Revision: "75928e8", Time: at, GoVersion: "go1.26.0"},
			wantRevL: "75928e8",
		},
		{
			name: "modified tree",
			info: debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20261201230000-75928e8+dirty"}, Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "75928e8"}, {Key: "vcs.time", Value: "2026-12-01T23:00:00Z"}, {Key: "vcs.modified", Value: "true"},
			}},
			want:     Build{Version: "v0.0.0-20261201230000-75928e8+dirty", Revision: "75928e8", Time: at, Modified: true, GoVersion: "go1.26.0"},
			wantRevL: "75928e8+dirty",
		},
		{
			name:     "go run",
			info:     debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			want:     Build{Version: "(devel)", GoVersion: "go1.26.0"},
			wantRevL: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := buildOf(&tt.info)
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if got := got.RevisionLabel(); got != tt.wantRevL {
				t.Errorf("RevisionLabel: got %q, want %q", got, tt.wantRevL)
			}
		})
	}
}

func TestBuildInfoLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(BuildInfo(Build{Version: "v1.2.3", Revision: "75928e8", Modified: true, GoVersion: "go1.26.0"}))
	got := gatherBuildInfo(t, reg)
	want := map[string]string{"version": "v1.2.3", "revision": "75928e8+dirty", "goversion": "go1.26.0"}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// gatherBuildInfo gathers reg, checks that bouncer_build_info is its one
// gauge, with one series of value 1, and returns that series' labels.
func gatherBuildInfo(t *testing.T, reg prometheus.Gatherer) map[string]string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || mfs[0].GetName() != "bouncer_build_info" || mfs[0].GetType().String() != "GAUGE" || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("got %v, want one bouncer_build_info gauge series", mfs)
	}
	m := mfs[0].GetMetric()[0]
	if got := m.GetGauge().GetValue(); got != 1 {
		t.Errorf("value: got %v, want 1", got)
	}
	labels := map[string]string{}
	for _, lp := range m.GetLabel() {
		labels[lp.GetName()] = lp.GetValue()
	}
	return labels
}

func TestRegisterBuildInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	RegisterBuildInfo(reg)
	got := gatherBuildInfo(t, reg)
	b := ReadBuild()
	want := map[string]string{"version": b.Version, "revision": b.RevisionLabel(), "goversion": runtime.Version()}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
