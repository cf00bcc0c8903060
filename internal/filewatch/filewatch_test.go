package filewatch

import (
	"os"
	"path/filepath"
	"testing"
)

// Only events that can change the files count: a log written next to a
// rejected certificate must not make it reload again and again.
func TestRelevantEvents(t *testing.T) {
	dir, caDir := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	w, err := New([]string{filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(caDir, "ca.pem")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, tt := range []struct {
		name string
		want bool
	}{
		{filepath.Join(dir, "cert.pem"), true},
		{filepath.Join(dir, "key.pem"), true},
		{filepath.Join(dir, "..data"), true},
		{filepath.Join(dir, "..data_tmp"), true},
		{filepath.Join(dir, "..2026_01_02_15_04_05.123"), true},
		{filepath.Join(caDir, "ca.pem"), true},
		{filepath.Join(dir, "cert.pem.tmp"), false}, // the rename that follows counts
		{filepath.Join(dir, "gateway.log"), false},
		{filepath.Join(dir, "ca.pem"), false},
		{filepath.Join(caDir, "cert.pem"), false},
		{filepath.Join(dir, "sub", "cert.pem"), false},
		{dir, false},
	} {
		if got := w.Relevant(tt.name); got != tt.want {
			t.Errorf("Relevant(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// In a watched directory, the entries keep accepts count, and
// Kubernetes' ..-prefixed ones.
func TestRelevantInDirectories(t *testing.T) {
	dir := t.TempDir()
	w, err := New(nil, map[string]func(string) bool{dir: func(b string) bool { return filepath.Ext(b) == ".yaml" }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for name, want := range map[string]bool{"a.yaml": true, "..data": true, "a.log": false} {
		if got := w.Relevant(filepath.Join(dir, name)); got != want {
			t.Errorf("Relevant(%q) = %v, want %v", name, got, want)
		}
	}
}
