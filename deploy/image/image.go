package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image holds and how it runs. The Dockerfile says the same;
// its test holds the two together.
const (
	binaryPath     = "/usr/local/bin/bouncer"
	configDir      = "/etc/bouncer"
	caCertsPath    = "/etc/ssl/certs/ca-certificates.crt"
	defaultCACerts = "/etc/ssl/certs/ca-certificates.crt" // Debian's bundle, on the build host
	uid            = 65532
	imageUser      = "65532:65532"
	sourceURL      = "https://github.com/bouncerhq/bouncer"
	licenses       = "Apache-2.0"
)

// passwd and group name the image's user, for programs that look it up.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group  = "root:x:0:\nnonroot:x:65532:\n"
)

// ports are the image's listeners: the JSON API, gRPC and admin.
var ports = []string{"8080/tcp", "8081/tcp", "6070/tcp"}

// env is the image's environment: the config directory, and the
// listeners on every interface rather than loopback.
var env = []string{
	"PATH=/usr/local/bin",
	"BOUNCER_CONFIG=" + configDir,
	"BOUNCER_HTTP_ADDR=:8080",
	"BOUNCER_GRPC_ADDR=:8081",
	"BOUNCER_ADMIN_ADDR=:6070",
}

// runConfig is the image's configuration for s: bouncer serve as the
// non-root user, with env, ports and the OCI labels.
func runConfig(s source) v1.Config {
	exposed := map[string]struct{}{}
	for _, p := range ports {
		exposed[p] = struct{}{}
	}
	labels := map[string]string{
		"org.opencontainers.image.title":    "bouncer",
		"org.opencontainers.image.source":   sourceURL,
		"org.opencontainers.image.version":  s.version,
		"org.opencontainers.image.licenses": licenses,
	}
	if s.revision != "" {
		labels["org.opencontainers.image.revision"] = s.revision
	}
	return v1.Config{
		Entrypoint:   []string{binaryPath},
		Cmd:          []string{"serve"},
		Env:          append([]string(nil), env...),
		User:         imageUser,
		WorkingDir:   "/",
		ExposedPorts: exposed,
		Labels:       labels,
	}
}

// platformImage is the image for p, whose one layer holds binary and
// caCerts.
func platformImage(p platform, binary, caCerts []byte, s source) (v1.Image, error) {
	compressed := gzipped(rootFS(binary, caCerts, s.epoch))
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(compressed)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	created := v1.Time{Time: s.epoch}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: created, CreatedBy: "bouncer deploy/image " + s.version, Comment: "bouncer, CA certificates, user " + imageUser},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created, cf.Config = p.os, p.arch, created, runConfig(s)
	if p.arch == "arm64" {
		cf.Variant = "v8"
	}
	return mutate.ConfigFile(img, cf)
}

// index is the multi-platform image: one image per platform.
func index(images []v1.Image, ps []platform) (v1.ImageIndex, error) {
	var adds []mutate.IndexAddendum
	for i, img := range images {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1,
			Platform:  &v1.Platform{OS: ps[i].os, Architecture: ps[i].arch, Variant: cf.Variant},
		}})
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...), nil
}

// file is one entry of the image's file system.
type file struct {
	mode     int64
	owner    int
	contents []byte // nil for a directory
}

// rootFS is the image's one layer, uncompressed: a tar whose entries
// are sorted, owned by root (but the user's home), with fixed modes and
// every time at epoch, so that the same files give the same bytes.
func rootFS(binary, caCerts []byte, epoch time.Time) []byte {
	files := map[string]file{
		"etc/":                              {mode: 0o755},
		"etc/bouncer/":                      {mode: 0o755},
		"etc/group":                         {mode: 0o644, contents: []byte(group)},
		"etc/passwd":                        {mode: 0o644, contents: []byte(passwd)},
		"etc/ssl/":                          {mode: 0o755},
		"etc/ssl/certs/":                    {mode: 0o755},
		"etc/ssl/certs/ca-certificates.crt": {mode: 0o644, contents: caCerts},
		"home/":                             {mode: 0o755},
		"home/nonroot/":                     {mode: 0o700, owner: uid},
		"tmp/":                              {mode: 0o1777},
		"usr/":                              {mode: 0o755},
		"usr/local/":                        {mode: 0o755},
		"usr/local/bin/":                    {mode: 0o755},
		"usr/local/bin/bouncer":             {mode: 0o755, contents: binary},
	}
	return tarFiles(files, epoch)
}

// tarFiles writes files as a tar, sorted by name, every entry dated
// epoch.
func tarFiles(files map[string]file, epoch time.Time) []byte {
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, name := range names {
		f := files[name]
		h := &tar.Header{Name: name, Mode: f.mode, Uid: f.owner, Gid: f.owner, ModTime: epoch, Format: tar.FormatPAX}
		if f.contents == nil {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.contents))
		}
		// Writes to a bytes.Buffer cannot fail, and every header is valid.
		must(tw.WriteHeader(h))
		_, err := tw.Write(f.contents)
		must(err)
	}
	must(tw.Close())
	return b.Bytes()
}

// gzipped is data compressed at gzip's default level, with no name or
// time in its header: the same data gives the same bytes. The layer is
// compressed once, here, rather than by each of its readers.
func gzipped(data []byte) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := zw.Write(data)
	must(err)
	must(zw.Close())
	return b.Bytes()
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
