package deploytest

import (
	"fmt"
	"github.com/Masterminds/semver/v3"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

const chartDir = "../helm/bouncer"

// render renders the chart as `helm install bouncer` would with vals,
// Helm's schema validation included, and decodes what it renders. The
// release is named bouncer, so that the objects are named as the
// manifests' are.
func render(t *testing.T, vals map[string]any) (*objects, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := util.ToRenderValuesWithSchemaValidation(ch, vals, common.ReleaseOptions{Name: "bouncer", Namespace: "default", IsInstall: true}, nil, false)
	if err != nil {
		return nil, err
	}
	files, err := engine.Engine{Strict: true}.RenderWithContext(t.Context(), ch, rv)
	if err != nil {
		return nil, err
	}
	var o objects
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if strings.HasSuffix(name, "NOTES.txt") {
			continue
		}
		if err := o.decode(name, []byte(files[name])); err != nil {
			t.Fatal(err)
		}
	}
	return &o, nil
}

// renderFile renders the chart with a values file of its ci/ directory
// ("" for the defaults).
func renderFile(t *testing.T, file string) *objects {
	t.Helper()
	vals := map[string]any{}
	if file != "" {
		v, err := common.ReadValuesFile(filepath.Join(chartDir, file))
		if err != nil {
			t.Fatal(err)
		}
		vals = v
	}
	o, err := render(t, vals)
	if err != nil {
		t.Fatalf("render %s: %v", file, err)
	}
	return o
}

func deployment(t *testing.T, o *objects, name string) (*appsv1.Deployment, *workload) {
	t.Helper()
	for _, d := range o.Deployments {
		if d.Name == name {
			w, err := newWorkload(d)
			if err != nil {
				t.Fatal(err)
			}
			return d, w
		}
	}
	t.Fatalf("no Deployment %s", name)
	return nil, nil
}

func names[T any](list []*T, name func(*T) string) []string {
	var out []string
	for _, v := range list {
		out = append(out, name(v))
	}
	slices.Sort(out)
	return out
}

// counts summarises a set as "Deployments [...] ConfigMaps [...] ...".
func counts(o *objects) string {
	return fmt.Sprintf("Deployments %v ConfigMaps %v Services %v PDBs %v HPAs %v ServiceMonitors %v",
		names(o.Deployments, func(d *appsv1.Deployment) string { return d.Name }),
		names(o.ConfigMaps, func(c *corev1.ConfigMap) string { return c.Name }),
		names(o.Services, func(s *corev1.Service) string { return s.Name }),
		len(o.PDBs), len(o.HPAs), len(o.ServiceMonitors))
}

// The documented cases: the chart's defaults and each values file of its
// ci/ directory (README.md), with what each must render.
var chartCases = []struct {
	name, file string
	objects    string // counts of what it renders
	check      func(t *testing.T, o *objects)
}{
	{"default", "", "Deployments [bouncer] ConfigMaps [bouncer] Services [bouncer] PDBs 1 HPAs 0 ServiceMonitors 0", checkDefault},
	{"memory", "ci/memory-values.yaml", "Deployments [bouncer] ConfigMaps [bouncer] Services [bouncer] PDBs 1 HPAs 0 ServiceMonitors 0", checkMemoryCase},
	{"redis-tls", "ci/redis-tls-values.yaml", "Deployments [bouncer] ConfigMaps [bouncer] Services [bouncer] PDBs 1 HPAs 0 ServiceMonitors 0", checkRedisTLS},
	{"existing-configmap", "ci/existing-configmap-values.yaml", "Deployments [bouncer] ConfigMaps [] Services [bouncer] PDBs 1 HPAs 0 ServiceMonitors 0", checkExistingConfigMap},
	{"gateway", "ci/gateway-values.yaml", "Deployments [bouncer bouncer-gateway] ConfigMaps [bouncer bouncer-gateway] Services [bouncer bouncer-gateway] PDBs 2 HPAs 0 ServiceMonitors 0", nil},
	{"autoscaling", "ci/autoscaling-values.yaml", "Deployments [bouncer bouncer-gateway] ConfigMaps [bouncer bouncer-gateway] Services [bouncer bouncer-gateway] PDBs 2 HPAs 2 ServiceMonitors 2", checkAutoscaling},
}

func TestChart(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tested []string
	for _, tc := range chartCases {
		if tc.file != "" {
			tested = append(tested, filepath.Join(chartDir, tc.file))
		}
		t.Run(tc.name, func(t *testing.T) {
			o := renderFile(t, tc.file)
			if got := counts(o); got != tc.objects {
				t.Errorf("rendered %s\nwant     %s", got, tc.objects)
			}
			checkSet(t, o)
			if tc.check != nil {
				tc.check(t, o)
			}
		})
	}
	if slices.Sort(tested); !slices.Equal(files, tested) {
		t.Errorf("values files: got %v, tested %v", files, tested)
	}
}

func checkDefault(t *testing.T, o *objects) {
	d, w := deployment(t, o, "bouncer")
	if w.flag["store"] != "memory" || w.flag["mode"] != "strict" {
		t.Errorf("store, mode: got %q, %q; want memory, strict", w.flag["store"], w.flag["mode"])
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas: got %v, want 2", d.Spec.Replicas)
	}
	if img := w.c.Image; img != "bouncer:0.1.0" {
		t.Errorf("image: got %q, want bouncer:0.1.0 (the chart's appVersion)", img)
	}
}

func checkMemoryCase(t *testing.T, o *objects) {
	d, w := deployment(t, o, "bouncer")
	if w.flag["store"] != "memory" || d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("store, replicas: got %q, %v; want memory, 1", w.flag["store"], d.Spec.Replicas)
	}
}

func checkRedisTLS(t *testing.T, o *objects) {
	d, w := deployment(t, o, "bouncer")
	if e, _ := w.env("BOUNCER_STORE"); e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
		e.ValueFrom.SecretKeyRef.Name != "bouncer-redis" || e.ValueFrom.SecretKeyRef.Key != "url" {
		t.Errorf("BOUNCER_STORE: got %+v, want from the Secret bouncer-redis, key url", e)
	}
	if w.flag["mode"] != "lease" {
		t.Errorf("mode: got %q, want lease", w.flag["mode"])
	}
	for flag, want := range map[string]string{"store-tls-ca": "/etc/bouncer-tls/ca.crt", "store-tls-cert": "/etc/bouncer-tls/tls.crt", "store-tls-key": "/etc/bouncer-tls/tls.key"} {
		if got := w.flag[flag]; got != want {
			t.Errorf("--%s: got %q, want %q", flag, got, want)
		}
	}
	i := slices.IndexFunc(w.c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/etc/bouncer-tls" })
	if i < 0 || !w.c.VolumeMounts[i].ReadOnly {
		t.Fatalf("no read-only mount at /etc/bouncer-tls: %+v", w.c.VolumeMounts)
	}
	j := slices.IndexFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == w.c.VolumeMounts[i].Name })
	if j < 0 || d.Spec.Template.Spec.Volumes[j].Secret == nil || d.Spec.Template.Spec.Volumes[j].Secret.SecretName != "bouncer-redis-tls" {
		t.Errorf("the TLS volume: want the Secret bouncer-redis-tls, got %+v", d.Spec.Template.Spec.Volumes)
	}
}

func checkExistingConfigMap(t *testing.T, o *objects) {
	_, w := deployment(t, o, "bouncer")
	if v := configVolume(w); v == nil || v.ConfigMap.Name != "my-bouncer-rules" {
		t.Errorf("config volume: got %+v, want the ConfigMap my-bouncer-rules", v)
	}
}

func checkAutoscaling(t *testing.T, o *objects) {
	for _, d := range o.Deployments {
		if d.Spec.Replicas != nil {
			t.Errorf("Deployment %s: replicas %d, want none: the autoscaler owns the count", d.Name, *d.Spec.Replicas)
		}
	}
	for _, m := range o.ServiceMonitors {
		if m.Labels["release"] != "prometheus" {
			t.Errorf("ServiceMonitor %s: labels %v, want release=prometheus from serviceMonitor.labels", m.Name, m.Labels)
		}
	}
}

// TestChartRefuses checks that what cannot work is refused at install:
// by Helm's schema validation, or by the chart itself.
func TestChartRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		vals map[string]any
		want string // in the error
	}{
		{"replicas as a word", map[string]any{"serve": map[string]any{"replicas": "three"}}, "replicas"},
		{"an unknown value", map[string]any{"serve": map[string]any{"replica": 2}}, "replica"},
		{"an unknown mode", map[string]any{"store": map[string]any{"mode": "fast"}}, "mode"},
		{"a GOMEMLIMIT Go cannot read", map[string]any{"serve": map[string]any{"goMemLimit": "460Mi"}}, "goMemLimit"},
		{"autoscaling on the memory store", map[string]any{"autoscaling": map[string]any{"enabled": true}}, "needs a Redis store"},
		{"TLS with a plain URL", map[string]any{"store": map[string]any{"url": "redis://redis:6379", "tls": map[string]any{"secretName": "tls"}}}, "needs a rediss:// store.url"},
		{"a certificate without its key", map[string]any{"store": map[string]any{"url": "rediss://redis:6379", "tls": map[string]any{"secretName": "tls", "certKey": "tls.crt"}}}, "needs store.tls.keyKey"},
		{"a grace period shorter than the drain", map[string]any{"terminationGracePeriodSeconds": 15}, "terminationGracePeriodSeconds must be above"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(t, tc.vals)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error about %q", err, tc.want)
			}
		})
	}
}

// TestChartKubeVersion checks that the chart asks for the Kubernetes
// whose kubelet runs a preStop sleep (1.30, where it is on by default):
// the image has no shell to sleep in. Helm checks kubeVersion with the
// same semver constraints.
func TestChartKubeVersion(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := semver.NewConstraint(ch.Metadata.KubeVersion)
	if err != nil {
		t.Fatalf("kubeVersion %q: %v", ch.Metadata.KubeVersion, err)
	}
	for v, want := range map[string]bool{"v1.29.9": false, "v1.30.0": true, "v1.30.1-eks-1234": true, "v1.37.0": true} {
		if got := c.Check(semver.MustParse(v)); got != want {
			t.Errorf("kubeVersion %q with %s: got %v, want %v", ch.Metadata.KubeVersion, v, got, want)
		}
	}
}
