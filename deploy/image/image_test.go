package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// testVersion is the version the tests give the build.
const testVersion = "v9.8.7-test.1"

// testCACerts stands for the build host's CA bundle.
const testCACerts = "testdata/ca-certificates.crt"

// TestImage builds a release of one platform (this machine's) twice and
// checks that the two are the same bytes, that make image gives the
// release's image, and what that image holds and does: its config, and
// its binary, run from the image's files alone.
func TestImage(t *testing.T) {
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skipf("the image's binary runs on linux/amd64 and linux/arm64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	p := platform{"linux", runtime.GOARCH}
	dir := t.TempDir()
	opts := func(out string) options {
		return options{src: "../..", out: out, version: testVersion, caCerts: testCACerts, platforms: []platform{p}, binaries: []platform{p}}
	}
	var sums [2]string
	for i, name := range []string{"a", "b"} {
		var err error
		if sums[i], err = writeRelease(t.Context(), opts(filepath.Join(dir, name))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := writeImage(t.Context(), opts(filepath.Join(dir, "image"))); err != nil {
		t.Fatal(err)
	}
	release := filepath.Join(dir, "a")
	imageTar := filepath.Join(release, "bouncer-"+testVersion+"-image.tar")
	untar(t, readFile(t, imageTar), filepath.Join(dir, "release-image"))
	img := theImage(t, filepath.Join(dir, "release-image"), p)

	t.Run("reproducible", func(t *testing.T) {
		if sums[0] != sums[1] {
			t.Errorf("SHA256SUMS of two builds differ:\n%s\n%s", sums[0], sums[1])
		}
		want := []string{"bouncer-" + testVersion + "-linux-" + p.arch, "bouncer-" + testVersion + "-image.tar"}
		for _, name := range want {
			if sum := sha256.Sum256(readFile(t, filepath.Join(release, name))); !strings.Contains(sums[0], hex.EncodeToString(sum[:])+"  "+name+"\n") {
				t.Errorf("SHA256SUMS does not give %s's checksum:\n%s", name, sums[0])
			}
		}
		if got := strings.Count(sums[0], "\n"); got != len(want) {
			t.Errorf("SHA256SUMS: got %d lines, want %d:\n%s", got, len(want), sums[0])
		}
		if a, b := indexDigest(t, filepath.Join(dir, "release-image")), indexDigest(t, filepath.Join(dir, "image")); a != b {
			t.Errorf("image index digest: release %s, make image %s, want the same", a, b)
		}
	})
	t.Run("config", func(t *testing.T) { checkConfig(t, img, p) })
	t.Run("files", func(t *testing.T) {
		checkFiles(t, img, readFile(t, filepath.Join(release, "bouncer-"+testVersion+"-linux-"+p.arch)))
	})
	t.Run("runs", func(t *testing.T) { checkRuns(t, img) })
}

// theImage is the image for p in the OCI layout dir, checking that the
// layout names it by the version and holds p's image only.
func theImage(t *testing.T, dir string, p platform) v1.Image {
	t.Helper()
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 || topManifest.Manifests[0].Annotations[refName] != "9.8.7-test.1" {
		t.Fatalf("index.json: got %+v, want one index tagged 9.8.7-test.1", topManifest.Manifests)
	}
	idx, err := top.ImageIndex(topManifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Platform == nil || m.Manifests[0].Platform.String() != p.String() {
		t.Fatalf("image index: got %+v, want one image for %s", m.Manifests, p)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// indexDigest is the digest of the image index an OCI layout names.
func indexDigest(t *testing.T, dir string) v1.Hash {
	t.Helper()
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	return m.Manifests[0].Digest
}

func TestTag(t *testing.T) {
	for _, tt := range []struct{ version, want string }{
		{"v1.2.3", "1.2.3"},
		{"v1.2.3-rc.1", "1.2.3-rc.1"},
		{"v0.0.0-20261207030000-0123456789ab+dirty", "0.0.0-20261207030000-0123456789ab-dirty"},
	} {
		if got := tag(tt.version); got != tt.want {
			t.Errorf("tag(%q): got %q, want %q", tt.version, got, tt.want)
		}
	}
}

func checkConfig(t *testing.T, img v1.Image, p platform) {
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	for _, s := range []struct{ what, got, want string }{
		{"os", cf.OS, p.os},
		{"architecture", cf.Architecture, p.arch},
		{"entrypoint", strings.Join(c.Entrypoint, " "), "/usr/local/bin/bouncer"},
		{"cmd", strings.Join(c.Cmd, " "), "serve"},
		{"user", c.User, "65532:65532"},
		{"ports", strings.Join(slices.Sorted(maps.Keys(c.ExposedPorts)), " "), "6070/tcp 8080/tcp 8081/tcp"},
		{"config env", envValue(c.Env, "BOUNCER_CONFIG"), "/etc/bouncer"},
		{"http env", envValue(c.Env, "BOUNCER_HTTP_ADDR"), ":8080"},
		{"grpc env", envValue(c.Env, "BOUNCER_GRPC_ADDR"), ":8081"},
		{"admin env", envValue(c.Env, "BOUNCER_ADMIN_ADDR"), ":6070"},
		{"version label", c.Labels["org.opencontainers.image.version"], testVersion},
		{"source label", c.Labels["org.opencontainers.image.source"], "https://github.com/bouncerhq/bouncer"},
		{"licenses label", c.Labels["org.opencontainers.image.licenses"], "Apache-2.0"},
	} {
		if s.got != s.want {
			t.Errorf("%s: got %q, want %q", s.what, s.got, s.want)
		}
	}
	if rev, _ := git(context.Background(), "../..", "rev-parse", "HEAD"); c.Labels["org.opencontainers.image.revision"] != rev {
		t.Errorf("revision label: got %q, want the source's HEAD %q", c.Labels["org.opencontainers.image.revision"], rev)
	}
	if epoch, _ := git(context.Background(), "../..", "log", "-1", "--format=%ct"); os.Getenv("SOURCE_DATE_EPOCH") == "" && epoch != "" &&
		cf.Created.Unix() != mustAtoi(t, epoch) {
		t.Errorf("created: got %v, want the last commit's time %s", cf.Created, epoch)
	}
}

// checkFiles checks the layer's files: the release's binary, the CA
// bundle, the user, and an empty config directory.
func checkFiles(t *testing.T, img v1.Image, binary []byte) {
	files := layerFiles(t, img)
	for _, f := range []struct {
		name string
		want []byte
	}{
		{"usr/local/bin/bouncer", binary},
		{"etc/ssl/certs/ca-certificates.crt", readFile(t, testCACerts)},
	} {
		if h := files[f.name]; h == nil || !bytes.Equal(h.data, f.want) {
			t.Errorf("%s: not in the layer, or not the file built", f.name)
		}
	}
	if h := files["etc/passwd"]; h == nil || !strings.Contains(string(h.data), "nonroot:x:65532:65532:") {
		t.Errorf("etc/passwd: want user 65532, got %v", h)
	}
	if h := files["etc/bouncer/"]; h == nil || h.typeflag != tar.TypeDir {
		t.Errorf("etc/bouncer/: want a directory, got %v", h)
	}
	for name := range files {
		if strings.HasPrefix(name, "etc/bouncer/") && name != "etc/bouncer/" {
			t.Errorf("%s: want no config in the image (a deployment mounts its own)", name)
		}
	}
}
