package bench

import (
	"os/exec"
	"strings"
	"testing"
)

// TestGubernatorTagged checks that nothing in this module imports
// gubernator's Go packages unless built with -tags gubernator: they bring
// some 300 packages (Kubernetes' and etcd's clients among them) that only
// the gubernator rows of BenchmarkRLS need, and that a default build
// (make test) should neither download nor compile. It reports each
// package that imports one directly.
func TestGubernatorTagged(t *testing.T) {
	// -tags= overrides any tags in GOFLAGS: this is about the default build.
	cmd := exec.Command("go", "list", "-tags=", "-deps", "-test", "-f", `{{.ImportPath}}{{range .Imports}}|{{.}}{{end}}`, "./...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for line := range strings.Lines(string(out)) {
		pkg, imports, _ := strings.Cut(strings.TrimSpace(line), "|")
		if isGubernator(pkg) {
			continue
		}
		for imp := range strings.SplitSeq(imports, "|") {
			if isGubernator(imp) {
				t.Errorf("%s imports %s without -tags gubernator; put that file behind //go:build gubernator", pkg, imp)
			}
		}
	}
}

func isGubernator(path string) bool {
	return strings.HasPrefix(path, "github.com/gubernator-io/")
}
