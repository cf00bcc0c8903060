package deploytest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/bouncerhq/bouncer/gateway"
	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
)

// writeFiles writes a ConfigMap's data as the kubelet mounts it: one file
// per key, in a directory of their own.
func writeFiles(t *testing.T, data map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range data {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// validRules checks that bouncer serve would start on a ConfigMap's files.
func validRules(t *testing.T, data map[string]string) {
	t.Helper()
	if _, err := rules.Load(writeFiles(t, data)); err != nil {
		t.Errorf("the ConfigMap's rules: %v", err)
	}
}

// validGateway checks that bouncer gateway would start on a ConfigMap's
// files, file being its config, and returns that config (nil if it is
// not valid).
func validGateway(t *testing.T, data map[string]string, file string) *gateway.Config {
	t.Helper()
	cfg, err := gateway.Load(filepath.Join(writeFiles(t, data), file))
	if err != nil {
		t.Errorf("the ConfigMap's gateway config: %v", err)
		return nil
	}
	rc, err := rules.LoadOptions{AllowConcurrency: true}.Load(cfg.Rules)
	if err != nil {
		t.Errorf("the gateway's rules: %v", err)
		return nil
	}
	store := memstore.New(memstore.Options{})
	defer store.Close()
	g, err := gateway.New(cfg, gateway.Options{Engine: rules.NewEngine(rc, store)})
	if err != nil {
		t.Errorf("the gateway's config: %v", err)
		return nil
	}
	g.Close()
	return cfg
}
