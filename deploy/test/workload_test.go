package deploytest

import (
	"maps"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestNewWorkload(t *testing.T) {
	dep := func(args []string, env ...corev1.EnvVar) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		d.Spec.Template.Spec.Containers = []corev1.Container{{Args: args, Env: env}}
		return d
	}
	secret := &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "url"}}
	for _, tc := range []struct {
		name string
		d    *appsv1.Deployment
		want map[string]string // nil: an error
	}{
		{"both spellings", dep([]string{"serve", "--config=/etc/bouncer", "-grpc-addr", ":8081", "--watch=false"}),
			map[string]string{"config": "/etc/bouncer", "grpc-addr": ":8081", "watch": "false"}},
		{"variables", dep([]string{"serve"}, corev1.EnvVar{Name: "BOUNCER_SHUTDOWN_TIMEOUT", Value: "5s"}, corev1.EnvVar{Name: "BOUNCER_STORE", ValueFrom: secret}, corev1.EnvVar{Name: "GOMEMLIMIT", Value: "1GiB"}),
			map[string]string{"shutdown-timeout": "5s", "store": "valueFrom"}},
		{"a flag wins over its variable", dep([]string{"serve", "--admin-addr=:6070"}, corev1.EnvVar{Name: "BOUNCER_ADMIN_ADDR", Value: ":7000"}),
			map[string]string{"admin-addr": ":6070"}},
		{"not a flag", dep([]string{"serve", "extra"}), nil},
		{"no value", dep([]string{"serve", "--config"}), nil},
		{"no command", dep(nil), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := newWorkload(tc.d)
			switch {
			case tc.want == nil && err == nil:
				t.Errorf("got flags %v, want an error", w.flag)
			case tc.want != nil && err != nil:
				t.Errorf("got %v, want flags %v", err, tc.want)
			case tc.want != nil && !maps.Equal(w.flag, tc.want):
				t.Errorf("got flags %v, want %v", w.flag, tc.want)
			}
		})
	}
}
