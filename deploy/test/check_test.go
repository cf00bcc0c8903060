package deploytest

import (
	"fmt"
	"maps"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The image's user (docs/deploy.md: the image runs as 65532, non-root).
const imageUser = 65532

// workload is one Deployment of a set, with what its container's command
// line says.
type workload struct {
	dep  *appsv1.Deployment
	c    *corev1.Container
	cmd  string            // serve or gateway
	flag map[string]string // flag name (no dashes) → value, from args, then BOUNCER_ variables
}

// newWorkload reads d's first container's command line: args[0] is the
// command, then --name=value or --name value; a BOUNCER_NAME variable
// gives a flag the args do not (its valueFrom reads as "valueFrom").
func newWorkload(d *appsv1.Deployment) (*workload, error) {
	if len(d.Spec.Template.Spec.Containers) == 0 {
		return nil, fmt.Errorf("deployment %s: no container", d.Name)
	}
	c := &d.Spec.Template.Spec.Containers[0]
	if len(c.Args) == 0 {
		return nil, fmt.Errorf("deployment %s: no args: want serve or gateway", d.Name)
	}
	w := &workload{dep: d, c: c, cmd: c.Args[0], flag: map[string]string{}}
	args := c.Args[1:]
	for i := 0; i < len(args); i++ {
		if !strings.HasPrefix(args[i], "-") {
			return nil, fmt.Errorf("deployment %s: argument %q is not a flag", d.Name, args[i])
		}
		name := strings.TrimPrefix(strings.TrimPrefix(args[i], "-"), "-")
		if n, v, ok := strings.Cut(name, "="); ok {
			w.flag[n] = v
		} else if i+1 < len(args) {
			w.flag[name] = args[i+1]
			i++
		} else {
			return nil, fmt.Errorf("deployment %s: flag %q has no value", d.Name, args[i])
		}
	}
	for _, e := range c.Env {
		n, ok := strings.CutPrefix(e.Name, "BOUNCER_")
		if !ok {
			continue
		}
		n = strings.ToLower(strings.ReplaceAll(n, "_", "-"))
		if _, given := w.flag[n]; given {
			continue
		}
		w.flag[n] = e.Value
		if e.ValueFrom != nil {
			w.flag[n] = "valueFrom"
		}
	}
	return w, nil
}

// env returns the container's variable name, and whether it is set.
func (w *workload) env(name string) (corev1.EnvVar, bool) {
	for _, e := range w.c.Env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}

// configPaths returns the directory --config names and, for the
// gateway, the file in it.
func (w *workload) configPaths() (dir, file string) {
	p := w.flag["config"]
	if w.cmd == "gateway" {
		return path.Dir(p), path.Base(p)
	}
	return p, ""
}

// checkSet checks every object of o, and how they refer to each other.
// It is the one check that the manifests and every render of the chart
// go through.
func checkSet(t *testing.T, o *objects) {
	t.Helper()
	if len(o.Deployments) == 0 {
		t.Fatal("no Deployment")
	}
	var ws []*workload
	for _, d := range o.Deployments {
		w, err := newWorkload(d)
		if err != nil {
			t.Error(err)
			continue
		}
		ws = append(ws, w)
		t.Run("deployment="+d.Name, func(t *testing.T) { checkWorkload(t, o, w) })
	}
	checkSelectors(t, o, ws)
}

func checkWorkload(t *testing.T, o *objects, w *workload) {
	checkListeners(t, o, w)
	checkProbes(t, w)
	checkSecurity(t, w)
	checkDrain(t, w)
	checkConfigMount(t, o, w)
	checkMemory(t, w)
	if ps := w.dep.Spec.Template.Spec.EnableServiceLinks; ps == nil || *ps {
		t.Error("enableServiceLinks: not false (Services named bouncer put BOUNCER_ variables in the environment)")
	}
}

// addresses returns the addresses the workload listens on, by container
// port name: from its flags (serve) or from its config (gateway).
func addresses(t *testing.T, o *objects, w *workload) map[string]string {
	t.Helper()
	switch w.cmd {
	case "serve":
		return map[string]string{"grpc": flagOr(w, "grpc-addr", "127.0.0.1:8081"), "http": flagOr(w, "http-addr", "127.0.0.1:8080"), "http-admin": flagOr(w, "admin-addr", "127.0.0.1:6070")}
	case "gateway":
		cm := mountedConfigMap(o, w)
		if cm == nil {
			return nil // an existing ConfigMap: its addresses are the user's
		}
		_, file := w.configPaths()
		g := validGateway(t, cm.Data, file)
		if g == nil {
			return nil
		}
		if len(g.Listeners) != 1 {
			t.Errorf("gateway config: %d listeners, want 1 (the container's http port)", len(g.Listeners))
			return nil
		}
		return map[string]string{"http": g.Listeners[0].Addr, "http-admin": g.Admin}
	}
	t.Errorf("command: got %q, want serve or gateway", w.cmd)
	return nil
}

func flagOr(w *workload, name, def string) string {
	if v, ok := w.flag[name]; ok {
		return v
	}
	return def
}

// checkListeners checks that each address listens on every interface, on
// the container port of its name, and that the container has no other
// port.
func checkListeners(t *testing.T, o *objects, w *workload) {
	addrs := addresses(t, o, w)
	if addrs == nil {
		return
	}
	ports := map[string]int32{}
	for _, p := range w.c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if got, want := slices.Sorted(maps.Keys(ports)), slices.Sorted(maps.Keys(addrs)); !slices.Equal(got, want) {
		t.Errorf("container ports: got %v, want %v", got, want)
	}
	for name, addr := range addrs {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Errorf("%s address %q: %v", name, addr, err)
			continue
		}
		if host != "" && host != "0.0.0.0" && host != "::" {
			t.Errorf("%s address %q: listens on %s only, want every interface (:port)", name, addr, host)
		}
		if n, _ := strconv.Atoi(port); int32(n) != ports[name] {
			t.Errorf("%s address %q: port %s, but the container port %s is %d", name, addr, port, name, ports[name])
		}
	}
}

// containerPort resolves a port given by name or number to a port of the
// container, by name.
func containerPort(c *corev1.Container, p intstr.IntOrString) (string, bool) {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && p.StrVal == cp.Name) || (p.Type == intstr.Int && p.IntVal == cp.ContainerPort) {
			return cp.Name, true
		}
	}
	return "", false
}

func checkProbes(t *testing.T, w *workload) {
	for _, tc := range []struct {
		kind  string
		probe *corev1.Probe
		path  string
	}{{"liveness", w.c.LivenessProbe, "/healthz"}, {"readiness", w.c.ReadinessProbe, "/readyz"}} {
		if tc.probe == nil || tc.probe.HTTPGet == nil {
			t.Errorf("%s probe: got %+v, want GET %s", tc.kind, tc.probe, tc.path)
			continue
		}
		g := tc.probe.HTTPGet
		if g.Path != tc.path {
			t.Errorf("%s probe path: got %q, want %q", tc.kind, g.Path, tc.path)
		}
		if name, ok := containerPort(w.c, g.Port); !ok || name != "http-admin" {
			t.Errorf("%s probe port %s: got container port %q, want the admin port (http-admin)", tc.kind, g.Port.String(), name)
		}
	}
}

func checkSecurity(t *testing.T, w *workload) {
	pod := w.dep.Spec.Template.Spec.SecurityContext
	if pod == nil {
		pod = &corev1.PodSecurityContext{}
	}
	sc := w.c.SecurityContext
	if sc == nil {
		t.Fatal("container securityContext: none")
	}
	isTrue := func(b *bool) bool { return b != nil && *b }
	if !isTrue(sc.RunAsNonRoot) && !isTrue(pod.RunAsNonRoot) {
		t.Error("runAsNonRoot: not set, want true")
	}
	for _, uid := range []*int64{pod.RunAsUser, sc.RunAsUser} {
		if uid != nil && *uid != imageUser {
			t.Errorf("runAsUser: got %d, want the image's %d", *uid, imageUser)
		}
	}
	if !isTrue(sc.ReadOnlyRootFilesystem) {
		t.Error("readOnlyRootFilesystem: not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation: not false")
	}
	if isTrue(sc.Privileged) {
		t.Error("privileged: true")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		t.Errorf("capabilities: got %+v, want drop [ALL] and add none", sc.Capabilities)
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil {
		seccomp = pod.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccompProfile: got %+v, want RuntimeDefault", seccomp)
	}
}

// checkDrain checks that the pod's grace period outlasts the preStop
// sleep and the drain (--shutdown-timeout, 10s by default).
func checkDrain(t *testing.T, w *workload) {
	timeout, err := time.ParseDuration(flagOr(w, "shutdown-timeout", "10s"))
	if err != nil {
		t.Fatalf("--shutdown-timeout: %v", err)
	}
	var sleep time.Duration
	if l := w.c.Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Sleep == nil || l.PreStop.Sleep.Seconds < 1 {
		t.Errorf("preStop: got %+v, want a sleep of a few seconds (the image has no shell), while the endpoint's removal propagates", l)
	} else {
		sleep = time.Duration(l.PreStop.Sleep.Seconds) * time.Second
	}
	g := w.dep.Spec.Template.Spec.TerminationGracePeriodSeconds
	if g == nil {
		t.Fatal("terminationGracePeriodSeconds: not set (30s by default); set it above the preStop sleep plus --shutdown-timeout")
	}
	if grace := time.Duration(*g) * time.Second; grace <= sleep+timeout {
		t.Errorf("terminationGracePeriodSeconds: got %v, want above the preStop sleep %v + --shutdown-timeout %v", grace, sleep, timeout)
	}
}

// mountedConfigMap returns the ConfigMap of o that the workload mounts
// as its config, or nil if o does not hold it.
func mountedConfigMap(o *objects, w *workload) *corev1.ConfigMap {
	v := configVolume(w)
	if v == nil {
		return nil
	}
	for _, cm := range o.ConfigMaps {
		if cm.Name == v.ConfigMap.Name {
			return cm
		}
	}
	return nil
}

// configVolume returns the ConfigMap volume mounted where --config reads.
func configVolume(w *workload) *corev1.Volume {
	dir, _ := w.configPaths()
	for _, m := range w.c.VolumeMounts {
		if path.Clean(m.MountPath) != dir {
			continue
		}
		for i, v := range w.dep.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				return &w.dep.Spec.Template.Spec.Volumes[i]
			}
		}
	}
	return nil
}

func checkConfigMount(t *testing.T, o *objects, w *workload) {
	dir, file := w.configPaths()
	if !path.IsAbs(dir) {
		t.Fatalf("--config %q: want an absolute path", w.flag["config"])
	}
	var mounts int
	for _, m := range w.c.VolumeMounts {
		switch {
		case path.Clean(m.MountPath) == dir:
			mounts++
			if m.SubPath != "" || m.SubPathExpr != "" {
				t.Errorf("config mount: subPath %q: the kubelet's atomic swap of the ConfigMap never reaches a subPath mount", m.SubPath+m.SubPathExpr)
			}
			if !m.ReadOnly {
				t.Error("config mount: not readOnly")
			}
		case strings.HasPrefix(path.Clean(m.MountPath), dir+"/"):
			t.Errorf("mount %s at %s: inside the watched config directory %s", m.Name, m.MountPath, dir)
		}
	}
	if mounts != 1 || configVolume(w) == nil {
		t.Fatalf("config: %d mounts at %s, want one of a ConfigMap volume", mounts, dir)
	}
	cm := mountedConfigMap(o, w)
	if cm == nil {
		return // an existing ConfigMap, not part of the set
	}
	switch w.cmd {
	case "serve":
		validRules(t, cm.Data)
	case "gateway":
		if _, ok := cm.Data[file]; !ok {
			t.Errorf("ConfigMap %s: no key %q, the file --config names", cm.Name, file)
		}
	}
}

// checkMemory checks that the container's memory is bounded, and that
// GOMEMLIMIT, when set, is below the limit.
func checkMemory(t *testing.T, w *workload) {
	limit, ok := w.c.Resources.Limits[corev1.ResourceMemory]
	if !ok {
		t.Fatal("resources.limits.memory: not set")
	}
	if _, ok := w.c.Resources.Requests[corev1.ResourceCPU]; !ok {
		t.Error("resources.requests.cpu: not set")
	}
	e, ok := w.env("GOMEMLIMIT")
	if !ok {
		return
	}
	n, err := goMemLimit(e.Value)
	if err != nil {
		t.Fatalf("GOMEMLIMIT %q: %v", e.Value, err)
	}
	if n >= limit.Value() {
		t.Errorf("GOMEMLIMIT %q: %d bytes, want below the memory limit %s (%d)", e.Value, n, limit.String(), limit.Value())
	}
}

// goMemLimit parses GOMEMLIMIT as the Go runtime does: a count of bytes
// with an optional unit.
func goMemLimit(s string) (int64, error) {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			return v * u.mult, err
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// selected returns the workload whose pods sel selects, failing unless
// exactly one's do.
func selected(t *testing.T, what string, sel labels.Selector, ws []*workload) *workload {
	t.Helper()
	var hits []*workload
	for _, w := range ws {
		if sel.Matches(labels.Set(w.dep.Spec.Template.Labels)) {
			hits = append(hits, w)
		}
	}
	if len(hits) != 1 {
		t.Errorf("%s: selector %q selects the pods of %d Deployments, want 1", what, sel, len(hits))
		return nil
	}
	return hits[0]
}

func checkSelectors(t *testing.T, o *objects, ws []*workload) {
	for _, w := range ws {
		sel, err := metav1.LabelSelectorAsSelector(w.dep.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(w.dep.Spec.Template.Labels)) {
			t.Errorf("Deployment %s: selector %v does not select its own pods (%v)", w.dep.Name, w.dep.Spec.Selector, err)
		}
	}
	for _, s := range o.Services {
		checkService(t, s, selected(t, "Service "+s.Name, labels.SelectorFromSet(s.Spec.Selector), ws))
	}
	for _, p := range o.PDBs {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil {
			t.Errorf("PodDisruptionBudget %s: %v", p.Name, err)
			continue
		}
		selected(t, "PodDisruptionBudget "+p.Name, sel, ws)
		if p.Spec.MaxUnavailable == nil && p.Spec.MinAvailable == nil {
			t.Errorf("PodDisruptionBudget %s: neither maxUnavailable nor minAvailable", p.Name)
		}
	}
	for _, h := range o.HPAs {
		ref := h.Spec.ScaleTargetRef
		if !slices.ContainsFunc(ws, func(w *workload) bool { return ref.Kind == "Deployment" && ref.Name == w.dep.Name }) {
			t.Errorf("HorizontalPodAutoscaler %s: scales %s %s, not a Deployment of the set", h.Name, ref.Kind, ref.Name)
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 || *h.Spec.MinReplicas > h.Spec.MaxReplicas {
			t.Errorf("HorizontalPodAutoscaler %s: minReplicas %v, maxReplicas %d: want 2 ≤ min ≤ max", h.Name, h.Spec.MinReplicas, h.Spec.MaxReplicas)
		}
	}
	for _, m := range o.ServiceMonitors {
		checkServiceMonitor(t, o, m.Name, &m.Spec.Selector, m.Spec.Endpoints, ws)
	}
}

// checkService checks that every port of s reaches a container port of
// w, and is named for its protocol: grpc for gRPC, http or http-* for
// HTTP/1.1.
func checkService(t *testing.T, s *corev1.Service, w *workload) {
	if w == nil {
		return
	}
	for _, p := range s.Spec.Ports {
		name, ok := containerPort(w.c, p.TargetPort)
		if !ok {
			t.Errorf("Service %s port %s: targetPort %s is no port of %s", s.Name, p.Name, p.TargetPort.String(), w.dep.Name)
			continue
		}
		want := "http"
		if name == "grpc" {
			want = "grpc"
		}
		if p.Name != want && !strings.HasPrefix(p.Name, want+"-") {
			t.Errorf("Service %s port %s (to %s): want a name starting with %q, for protocol selection", s.Name, p.Name, name, want)
		}
		if p.AppProtocol == nil || *p.AppProtocol != want {
			t.Errorf("Service %s port %s: appProtocol %v, want %q", s.Name, p.Name, p.AppProtocol, want)
		}
	}
}

// checkServiceMonitor checks that the monitor selects a Service whose
// port it names reaches the admin port, at /metrics.
func checkServiceMonitor(t *testing.T, o *objects, name string, ls *metav1.LabelSelector, eps []monitoringEndpoint, ws []*workload) {
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil || sel.Empty() {
		t.Errorf("ServiceMonitor %s: selector %v (%v)", name, ls, err)
		return
	}
	var svcs []*corev1.Service
	for _, s := range o.Services {
		if sel.Matches(labels.Set(s.Labels)) {
			svcs = append(svcs, s)
		}
	}
	if len(svcs) != 1 || len(eps) == 0 {
		t.Errorf("ServiceMonitor %s: selects %d Services and has %d endpoints, want 1 and at least 1", name, len(svcs), len(eps))
		return
	}
	w := selected(t, "Service "+svcs[0].Name, labels.SelectorFromSet(svcs[0].Spec.Selector), ws)
	for _, ep := range eps {
		i := slices.IndexFunc(svcs[0].Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port })
		if i < 0 || w == nil {
			t.Errorf("ServiceMonitor %s: port %v is no port of Service %s", name, ep.Port, svcs[0].Name)
			continue
		}
		if cp, _ := containerPort(w.c, svcs[0].Spec.Ports[i].TargetPort); cp != "http-admin" || ep.Path != "/metrics" {
			t.Errorf("ServiceMonitor %s: scrapes %s on container port %q, want /metrics on http-admin", name, ep.Path, cp)
		}
	}
}

type monitoringEndpoint = monitoringv1.Endpoint
