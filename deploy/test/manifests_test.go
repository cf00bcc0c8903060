package deploytest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"
)

const manifestsDir = "../kubernetes"

// The manifests' directories, one per command, and the files of each that
// kustomization.yaml leaves out for the user to add.
var (
	manifestDirs = []string{"serve", "gateway"}
	optional     = []string{"hpa.yaml", "servicemonitor.yaml"}
)

// kustomization is the part of a kustomization.yaml the manifests use,
// decoded strictly: a field it does not list fails.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

// loadManifests decodes every YAML file of a manifests directory but its
// kustomization.yaml, and checks that the kustomization lists all of them
// but the optional ones.
func loadManifests(t *testing.T, dir string) *objects {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("kustomization.yaml: %s %s, want kustomize.config.k8s.io/v1beta1 Kustomization", k.APIVersion, k.Kind)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var o objects
	var want []string
	for _, f := range files {
		name := filepath.Base(f)
		if name == "kustomization.yaml" {
			continue
		}
		if !slices.Contains(optional, name) {
			want = append(want, name)
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := o.decode(name, data); err != nil {
			t.Error(err)
		}
	}
	if got := slices.Sorted(slices.Values(k.Resources)); !slices.Equal(got, want) {
		t.Errorf("kustomization.yaml resources: got %v, want %v (every file but %v)", got, want, optional)
	}
	return &o
}

func TestManifests(t *testing.T) {
	for _, dir := range manifestDirs {
		t.Run(dir, func(t *testing.T) {
			o := loadManifests(t, filepath.Join(manifestsDir, dir))
			if len(o.Deployments) != 1 || len(o.Services) != 1 || len(o.PDBs) != 1 || len(o.ConfigMaps) != 1 || len(o.HPAs) != 1 || len(o.ServiceMonitors) != 1 {
				t.Errorf("got %d Deployments, %d Services, %d PDBs, %d ConfigMaps, %d HPAs, %d ServiceMonitors; want one of each",
					len(o.Deployments), len(o.Services), len(o.PDBs), len(o.ConfigMaps), len(o.HPAs), len(o.ServiceMonitors))
			}
			checkSet(t, o)
			if cmd := o.Deployments[0].Spec.Template.Spec.Containers[0].Args[0]; cmd != dir {
				t.Errorf("command: got %q, want %q", cmd, dir)
			}
		})
	}
}
