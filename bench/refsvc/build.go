package refsvc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// benchModule is the module whose go.mod pins the references' versions.
const benchModule = "github.com/bouncerhq/bouncer/bench"

// benchDir returns the directory of the bench module: the parent of this
// file's directory when the source is at hand (tests, go run), else the
// module of the working directory.
func benchDir(ctx context.Context) (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		dir := filepath.Dir(filepath.Dir(file))
		if isBenchModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
	}
	out, err := goCmd(ctx, "", nil, "env", "GOMOD")
	if err != nil {
		return "", err
	}
	if gomod := strings.TrimSpace(out); isBenchModule(gomod) {
		return filepath.Dir(gomod), nil
	}
	return "", errors.New("refsvc: cannot find the bench module; run from inside bouncer's bench directory")
}

func isBenchModule(gomod string) bool {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return false
	}
	first, _, _ := bytes.Cut(b, []byte("\n"))
	return strings.TrimSpace(string(first)) == "module "+benchModule
}

// moduleVersion returns the version of module path that the bench module
// requires.
func moduleVersion(ctx context.Context, dir, path string) (string, error) {
	out, err := goCmd(ctx, dir, nil, "list", "-m", "-f", "{{.Version}}", path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// binDir returns the directory that holds the binaries built for the
// checkout in dir, under the user's cache directory (so that a binary that
// is up to date is not linked again), one per checkout (so that two
// checkouts never overwrite each other's).
func binDir(dir string) (string, error) {
	root, err := os.UserCacheDir()
	if err != nil {
		root = os.TempDir()
	}
	sum := sha256.Sum256([]byte(dir))
	bin := filepath.Join(root, "bouncer-bench", hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", fmt.Errorf("refsvc: %w", err)
	}
	return bin, nil
}

// builds memoizes binaries by name: each is built at most once per
// process; callers asking for one being built wait for it.
var builds struct {
	mu   sync.Mutex
	once map[string]*build
}

type build struct {
	done chan struct{}
	path string
	err  error
}

// binary returns the path of the binary called name, running produce the
// first time it is asked for (later callers get the first call's result).
// produce builds the binary into bin, the directory of binaries of the
// checkout whose bench module is in dir, and returns its path.
func binary(ctx context.Context, name string, produce func(ctx context.Context, dir, bin string) (string, error)) (string, error) {
	builds.mu.Lock()
	if builds.once == nil {
		builds.once = map[string]*build{}
	}
	b, ok := builds.once[name]
	if !ok {
		b = &build{done: make(chan struct{})}
		builds.once[name] = b
	}
	builds.mu.Unlock()
	if ok {
		select {
		case <-b.done:
			return b.path, b.err
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	b.path, b.err = func() (string, error) {
		dir, err := benchDir(ctx)
		if err != nil {
			return "", err
		}
		bin, err := binDir(dir)
		if err != nil {
			return "", err
		}
		return produce(ctx, dir, bin)
	}()
	if b.err != nil {
		// A failed build (a cancelled context, a network error) is tried
		// again by the next caller.
		builds.mu.Lock()
		delete(builds.once, name)
		builds.mu.Unlock()
	}
	close(b.done)
	return b.path, b.err
}

// goCmd runs the go command in dir with env added to this process's
// environment, and returns its standard output.
func goCmd(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("refsvc: go %s (in %s): %w\n%s", strings.Join(args, " "), dir, err, stderr.Bytes())
	}
	return stdout.String(), nil
}
