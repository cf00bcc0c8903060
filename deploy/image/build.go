package main

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/semver"
)

// options are a build's inputs: with the Go toolchain and the source's
// files, all that decides its bytes.
type options struct {
	src       string     // the bouncer module's directory
	out       string     // the directory written
	version   string     // "" for the module version Go records
	caCerts   string     // the CA bundle copied into the image
	platforms []platform // the image's
	binaries  []platform // a release's binaries': releasePlatforms
}

// platform is a GOOS/GOARCH pair.
type platform struct{ os, arch string }

func (p platform) String() string { return p.os + "/" + p.arch }

// source describes what was built: the version, the commit and the time
// every file and the image are dated.
type source struct {
	version  string
	revision string // "" outside a git checkout
	epoch    time.Time
}

// buildBinary cross-compiles bouncer for p into path: static
// (CGO_ENABLED=0), without symbol tables (-s -w) or file system paths
// (-trimpath), with the VCS information Go stamps when the source is a
// checkout, and with main.version set when version is not empty. The
// architecture levels are pinned, so that an environment's GOAMD64 or
// GOARM64 does not change the bytes.
func buildBinary(ctx context.Context, src, path string, p platform, version string) error {
	ldflags := "-s -w"
	if version != "" {
		ldflags += " -X main.version=" + version
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=auto", "-ldflags", ldflags, "-o", abs, "./cmd/bouncer")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.os, "GOARCH="+p.arch, "GOAMD64=v1", "GOARM64=v8.0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build for %s: %v\n%s", p, err, out)
	}
	return nil
}

// describe returns what a build of src with version (set with -X, or ""
// for none) is: its version, checked to be semantic, is version or else
// binary's module version; its revision and epoch come from git, and
// SOURCE_DATE_EPOCH overrides the epoch.
func describe(ctx context.Context, src, binary, version string) (source, error) {
	s := source{version: version}
	if s.version == "" {
		info, err := buildinfo.ReadFile(binary)
		if err != nil {
			return source{}, err
		}
		s.version = info.Main.Version
	}
	if !semver.IsValid(s.version) {
		return source{}, fmt.Errorf("version %q is not a semantic version (v1.2.3): tag the commit, or give one with -version (make VERSION=v1.2.3)", s.version)
	}
	s.revision, _ = git(ctx, src, "rev-parse", "HEAD")
	epoch, ok := os.LookupEnv("SOURCE_DATE_EPOCH")
	if !ok {
		epoch, _ = git(ctx, src, "log", "-1", "--format=%ct")
	}
	if epoch != "" {
		secs, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil || secs < 0 {
			return source{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970", epoch)
		}
		s.epoch = time.Unix(secs, 0).UTC()
	} else {
		s.epoch = time.Unix(0, 0).UTC()
	}
	return s, nil
}

// git runs git in dir and returns its output, trimmed.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return "", err
	}
	return strings.TrimSpace(out.String()), nil
}
