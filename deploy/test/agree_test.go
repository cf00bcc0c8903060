package deploytest

import (
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// essentials are what a component's manifests and the chart's render of
// it must have alike: how it starts, listens, is probed, is confined and
// drains.
func essentials(t *testing.T, o *objects, name string) map[string]any {
	t.Helper()
	d, w := deployment(t, o, name)
	i := slices.IndexFunc(o.Services, func(s *corev1.Service) bool { return s.Name == name })
	if i < 0 {
		t.Fatalf("no Service %s", name)
	}
	p := d.Spec.Template.Spec
	return map[string]any{
		"image":                         w.c.Image,
		"args":                          w.c.Args,
		"env":                           w.c.Env,
		"ports":                         w.c.Ports,
		"livenessProbe":                 w.c.LivenessProbe,
		"readinessProbe":                w.c.ReadinessProbe,
		"resources":                     w.c.Resources,
		"lifecycle":                     w.c.Lifecycle,
		"container securityContext":     w.c.SecurityContext,
		"pod securityContext":           p.SecurityContext,
		"terminationGracePeriodSeconds": p.TerminationGracePeriodSeconds,
		"enableServiceLinks":            p.EnableServiceLinks,
		"volumeMounts":                  w.c.VolumeMounts,
		"service ports":                 o.Services[i].Spec.Ports,
		"selector":                      d.Spec.Selector,
	}
}

// agree fails for each essential in which got and want differ.
func agree(t *testing.T, got, want map[string]any) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if !reflect.DeepEqual(got[k], want[k]) {
			g, _ := yaml.Marshal(got[k])
			w, _ := yaml.Marshal(want[k])
			t.Errorf("%s: the chart renders\n%s\nthe manifests have\n%s", k, g, w)
		}
	}
}

// TestManifestsAgreeWithChart checks that the plain manifests and the
// chart, at its defaults, run each command alike.
func TestManifestsAgreeWithChart(t *testing.T) {
	for _, tc := range []struct{ dir, values, name string }{
		{"serve", "", "bouncer"},
		{"gateway", "ci/gateway-values.yaml", "bouncer-gateway"},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			m := loadManifests(t, filepath.Join(manifestsDir, tc.dir))
			c := renderFile(t, tc.values)
			agree(t, essentials(t, c, tc.name), essentials(t, m, tc.name))
		})
	}
}
