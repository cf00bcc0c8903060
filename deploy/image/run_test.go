package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// checkConfigFile is the config the test mounts in the image's config
// directory, as a Kubernetes ConfigMap would be: 2 checks an hour per
// user.
const checkConfigFile = `domain: app
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 2}
`

// checkRuns extracts the image's layer into a directory and runs its
// binary from there, with the image's environment: bouncer version
// reports the version built, and bouncer serve, with a config where the
// image's BOUNCER_CONFIG points, answers checks on the JSON API. As root,
// it runs chrooted in that directory as the image's user, so that it
// sees no file but the image's; otherwise BOUNCER_CONFIG is moved under
// the directory.
func checkRuns(t *testing.T, img v1.Image) {
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for name, f := range layerFiles(t, img) {
		writeEntry(t, root, name, f)
	}
	configDir := envValue(cf.Config.Env, "BOUNCER_CONFIG")
	if err := os.WriteFile(filepath.Join(root, configDir, "app.yaml"), []byte(checkConfigFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	command := func(args ...string) *exec.Cmd {
		argv := append(append([]string(nil), cf.Config.Entrypoint...), args...)
		cmd := exec.Command(filepath.Join(root, argv[0]), argv[1:]...)
		cmd.Env = append([]string(nil), cf.Config.Env...)
		if os.Geteuid() == 0 {
			cmd.Path, cmd.Dir = argv[0], cf.Config.WorkingDir
			cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		} else {
			cmd.Env = append(cmd.Env, "BOUNCER_CONFIG="+filepath.Join(root, configDir))
		}
		return cmd
	}

	out, err := command("version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "version: "+testVersion+"\n") {
		t.Errorf("bouncer version: got %q (%v), want the version built, %s", out, err, testVersion)
	}

	// The image's Cmd, with the listeners moved to free loopback ports:
	// the image's own, on every interface, may be taken on this machine.
	httpAddr := freeAddr(t)
	p := start(t, command(append(cf.Config.Cmd, "--http-addr", httpAddr, "--grpc-addr", freeAddr(t), "--admin-addr", freeAddr(t))...))
	client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	body := `{"domain":"app","descriptors":[{"entries":[{"key":"user","value":"alice"}]}]}`
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		resp, err := client.Post("http://"+httpAddr+"/v1/check", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("check %d: %v\n%s", i+1, err, p.logs())
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("check %d: got status %d, want %d\n%s", i+1, resp.StatusCode, want, p.logs())
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(); err != nil {
		t.Errorf("bouncer serve after SIGTERM: %v, want exit 0\n%s", err, p.logs())
	}
}

// process is a running bouncer serve and its output.
type process struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  strings.Builder
	done chan struct{} // closed when the output ends: the process exited
}

func (p *process) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func (p *process) wait() error {
	<-p.done
	return p.cmd.Wait()
}

// start starts cmd, a bouncer serve, and returns once it logs that it
// is serving; the test fails if it exits first. The process is killed
// at the test's end if still running.
func start(t *testing.T, cmd *exec.Cmd) *process {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	p := &process{cmd: cmd, done: make(chan struct{})}
	serving := make(chan struct{})
	go func() {
		defer close(p.done)
		defer r.Close()
		sc := bufio.NewScanner(r)
		for seen := false; sc.Scan(); {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if !seen && strings.Contains(sc.Text(), "msg=serving") {
				seen = true
				close(serving)
			}
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			p.wait()
		}
	})
	select {
	case <-serving:
	case <-p.done:
		t.Fatalf("bouncer serve exited before serving: %v\n%s", p.wait(), p.logs())
	}
	return p
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// entry is one file of a layer.
type entry struct {
	typeflag byte
	mode     int64
	uid      int
	data     []byte
}

func (e *entry) String() string {
	return fmt.Sprintf("type %c mode %o uid %d, %d bytes", e.typeflag, e.mode, e.uid, len(e.data))
}

// layerFiles reads the image's one layer.
func layerFiles(t *testing.T, img v1.Image) map[string]*entry {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("got %d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return tarEntries(t, data)
}

func tarEntries(t *testing.T, data []byte) map[string]*entry {
	t.Helper()
	files := map[string]*entry{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = &entry{typeflag: h.Typeflag, mode: h.Mode, uid: h.Uid, data: body}
	}
}

// untar writes the tar data's files under dir.
func untar(t *testing.T, data []byte, dir string) {
	t.Helper()
	for name, e := range tarEntries(t, data) {
		writeEntry(t, dir, name, e)
	}
}

// writeEntry writes e as name under root, with its mode and owner (the
// owner only as root).
func writeEntry(t *testing.T, root, name string, e *entry) {
	t.Helper()
	path := filepath.Join(root, name)
	var err error
	if e.typeflag == tar.TypeDir {
		err = os.MkdirAll(path, 0o755)
	} else if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
		err = os.WriteFile(path, e.data, 0o600)
	}
	if err == nil {
		err = os.Chmod(path, os.FileMode(e.mode&0o777)|modeBits(e.mode))
	}
	if err == nil && os.Geteuid() == 0 {
		err = os.Lchown(path, e.uid, e.uid)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// modeBits turns a tar mode's sticky bit into Go's.
func modeBits(mode int64) os.FileMode {
	if mode&0o1000 != 0 {
		return os.ModeSticky
	}
	return 0
}

// envValue is name's value in env (NAME=value lines); "" if unset.
func envValue(env []string, name string) string {
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == name {
			return v
		}
	}
	return ""
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
