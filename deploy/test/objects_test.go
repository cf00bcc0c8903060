package deploytest

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// objects are the Kubernetes objects of one set (a directory of
// manifests, or one render of the chart), decoded into their API types.
type objects struct {
	Deployments     []*appsv1.Deployment
	Services        []*corev1.Service
	ConfigMaps      []*corev1.ConfigMap
	PDBs            []*policyv1.PodDisruptionBudget
	HPAs            []*autoscalingv2.HorizontalPodAutoscaler
	ServiceMonitors []*monitoringv1.ServiceMonitor
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decode adds the objects of a multi-document YAML file to o. Every
// document must be one of the kinds objects holds, and decode strictly:
// a field its type does not have, or a key given twice, fails.
func (o *objects) decode(name string, data []byte) error {
	for i, doc := range docSeparator.Split(string(data), -1) {
		if isBlank(doc) {
			continue
		}
		if err := o.decodeOne([]byte(doc)); err != nil {
			return fmt.Errorf("%s: document %d: %w", name, i+1, err)
		}
	}
	return nil
}

func (o *objects) decodeOne(doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		return strictInto(doc, &o.Deployments)
	case "v1 Service":
		return strictInto(doc, &o.Services)
	case "v1 ConfigMap":
		return strictInto(doc, &o.ConfigMaps)
	case "policy/v1 PodDisruptionBudget":
		return strictInto(doc, &o.PDBs)
	case "autoscaling/v2 HorizontalPodAutoscaler":
		return strictInto(doc, &o.HPAs)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return strictInto(doc, &o.ServiceMonitors)
	}
	return fmt.Errorf("unexpected object %s %s", tm.APIVersion, tm.Kind)
}

// strictInto decodes doc into a new T and appends it to list.
func strictInto[T any](doc []byte, list *[]*T) error {
	v := new(T)
	if err := yaml.UnmarshalStrict(doc, v); err != nil {
		return err
	}
	*list = append(*list, v)
	return nil
}

// isBlank reports whether a YAML document holds only comments and space.
func isBlank(doc string) bool {
	for line := range strings.Lines(doc) {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			return false
		}
	}
	return true
}

func TestDecodeIsStrict(t *testing.T) {
	for _, tc := range []struct{ name, doc string }{
		{"unknown field", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {selectr: {a: b}}\n"},
		{"misplaced field", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {template: {spec: {readOnlyRootFilesystem: true}}}\n"},
		{"duplicate key", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\ndata: {c: d}\n"},
		{"wrong type", "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: x}\nspec: {selector: []}\n"},
		{"unknown kind", "apiVersion: v1\nkind: Secret\nmetadata: {name: x}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o objects
			if err := o.decode("test.yaml", []byte(tc.doc)); err == nil {
				t.Errorf("decoded %q without an error", tc.doc)
			}
		})
	}
	var o objects
	if err := o.decode("test.yaml", []byte("# only a comment\n---\napiVersion: v1\nkind: Service\nmetadata: {name: x}\n")); err != nil || len(o.Services) != 1 {
		t.Errorf("a comment and a Service: got %d services, %v; want 1, nil", len(o.Services), err)
	}
}
