package tlsreload_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/gateway/tlsreload"
)

// renamed writes the files as most tools do: into new files, each
// renamed over the old one.
func renamed(t *testing.T, dir string, version int, p pair) {
	t.Helper()
	if version == 1 {
		inPlace(t, dir, version, p)
		return
	}
	replace(t, filepath.Join(dir, "cert.pem"), p.certPEM)
	replace(t, filepath.Join(dir, "key.pem"), p.keyPEM)
}

// symlinked keeps each version in a directory of its own and swaps the
// symlinks cert.pem and key.pem to it, as certbot's live/ links do.
func symlinked(t *testing.T, dir string, version int, p pair) {
	t.Helper()
	v := fmt.Sprintf("v%d", version)
	must(t, os.Mkdir(filepath.Join(dir, v), 0o700))
	for name, b := range map[string][]byte{"cert.pem": p.certPEM, "key.pem": p.keyPEM} {
		writeFile(t, filepath.Join(dir, v, name), b)
		link := filepath.Join(dir, name)
		must(t, os.Symlink(filepath.Join(v, name), link+".tmp"))
		must(t, os.Rename(link+".tmp", link))
	}
}

// secretVolume lays the files out as a Kubernetes Secret or ConfigMap
// volume: timestamped directories, a ..data symlink to the current one,
// and the files as symlinks through ..data; an update renames a new
// ..data over the old.
func secretVolume(t *testing.T, dir string, version int, p pair) {
	t.Helper()
	v := fmt.Sprintf("..2026_01_0%d", version)
	must(t, os.Mkdir(filepath.Join(dir, v), 0o700))
	writeFile(t, filepath.Join(dir, v, "cert.pem"), p.certPEM)
	writeFile(t, filepath.Join(dir, v, "key.pem"), p.keyPEM)
	must(t, os.Symlink(v, filepath.Join(dir, "..data_tmp")))
	must(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	if version == 1 {
		must(t, os.Symlink(filepath.Join("..data", "cert.pem"), filepath.Join(dir, "cert.pem")))
		must(t, os.Symlink(filepath.Join("..data", "key.pem"), filepath.Join(dir, "key.pem")))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestWatchReloads(t *testing.T) {
	ca := newCA(t, "test CA", time.Now().Add(24*time.Hour))
	for _, tt := range []struct {
		name  string
		write files
	}{
		{"in place", inPlace},
		{"renamed", renamed},
		{"symlink swap", symlinked},
		{"secret volume", secretVolume},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, b, c := ca.server(t, time.Now().Add(time.Hour)), ca.server(t, time.Now().Add(2*time.Hour)), ca.server(t, time.Now().Add(3*time.Hour))
			f := setup(t, ca, a, tlsreload.Config{}, tt.write)
			f.serves(t, a)

			tt.write(t, f.dir, 2, b)
			f.rec.loaded(t, b)
			f.serves(t, b)

			tt.write(t, f.dir, 3, c)
			f.rec.loaded(t, c)
			f.serves(t, c)
		})
	}
}

// A change that does not load keeps the old certificate serving, and the
// reason, naming the file, reaches OnReload, the log and Reload's caller.
func TestBadFilesKeepServing(t *testing.T) {
	ca := newCA(t, "test CA", time.Now().Add(24*time.Hour))
	a, b := ca.server(t, time.Now().Add(time.Hour)), ca.server(t, time.Now().Add(2*time.Hour))
	for _, tt := range []struct {
		name   string
		file   string // cert.pem or key.pem
		data   []byte
		reason string
	}{
		{"garbage cert", "cert.pem", []byte("not a certificate\n"), "cert.pem: not PEM"},
		{"cert cut short", "cert.pem", b.certPEM[:len(b.certPEM)/2], "cert.pem: a PEM block is cut short"},
		{"key in the cert file", "cert.pem", b.keyPEM, "cert.pem: no CERTIFICATE block"},
		{"garbage key", "key.pem", []byte{0, 1, 2}, "key.pem: not PEM"},
		{"another cert's key", "key.pem", b.keyPEM, "key.pem does not match cert file"},
		{"new cert, old key", "cert.pem", b.certPEM, "key.pem does not match cert file"},
		{"removed", "cert.pem", nil, "cert.pem: no such file or directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t, ca, a, tlsreload.Config{}, inPlace)
			path := filepath.Join(f.dir, tt.file)
			if tt.data == nil {
				must(t, os.Remove(path))
			} else {
				writeFile(t, path, tt.data)
			}
			err := f.rec.rejected(t)
			if !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("OnReload got error %q, want one containing %q", err, tt.reason)
			}
			f.serves(t, a)
			if err := f.r.Reload(); err == nil || !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("Reload() got error %v, want one containing %q", err, tt.reason)
			}
			f.serves(t, a)
			if logs := f.logs.String(); !strings.Contains(logs, "keeping the old certificate") || !strings.Contains(logs, tt.reason) {
				t.Errorf("log got %q, want the rejection with %q", logs, tt.reason)
			}

			inPlace(t, f.dir, 2, b) // repaired
			f.rec.loaded(t, b)
			f.serves(t, b)
		})
	}
}

// Reload, as on SIGHUP, serves new files before it returns.
func TestReload(t *testing.T) {
	ca := newCA(t, "test CA", time.Now().Add(24*time.Hour))
	a, b := ca.server(t, time.Now().Add(time.Hour)), ca.server(t, time.Now().Add(2*time.Hour))
	f := setup(t, ca, a, tlsreload.Config{}, inPlace)
	if err := f.r.Reload(); err != nil {
		t.Fatalf("Reload() of unchanged files: %v", err)
	}
	f.serves(t, a)
	inPlace(t, f.dir, 2, b)
	if err := f.r.Reload(); err != nil {
		t.Fatalf("Reload(): %v", err)
	}
	f.serves(t, b)
}

// An expired certificate, or one not valid yet, is served with a warning:
// refusing it would make a late renewal an outage.
func TestOutOfDateCertificateWarns(t *testing.T) {
	ca := newCA(t, "test CA", time.Now().Add(24*time.Hour))
	expired := ca.issue(t, serverTemplate(time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)))
	future := ca.issue(t, serverTemplate(time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)))
	for _, tt := range []struct {
		name string
		p    pair
		want string
	}{
		{"expired", expired, "serving an expired certificate"},
		{"not yet valid", future, "serving a certificate not yet valid"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t, ca, tt.p, tlsreload.Config{}, inPlace)
			if got := f.r.Current(); !got.Equal(tt.p.leaf) {
				t.Fatalf("Current() got serial %v, want %v", got.SerialNumber, tt.p.leaf.SerialNumber)
			}
			logs := f.logs.String()
			if !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, tt.want) || !strings.Contains(logs, f.certFile) {
				t.Errorf("log got %q, want a warning %q naming %s", logs, tt.want, f.certFile)
			}
		})
	}
}

func TestCloseTwice(t *testing.T) {
	ca := newCA(t, "test CA", time.Now().Add(24*time.Hour))
	a := ca.server(t, time.Now().Add(time.Hour))
	f := setup(t, ca, a, tlsreload.Config{}, inPlace)
	for i := range 2 {
		if err := f.r.Close(); err != nil {
			t.Errorf("Close() #%d: %v", i+1, err)
		}
	}
	f.serves(t, a) // the last certificate still serves
}
