package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// refName is the annotation by which tools name an image of a layout
// (skopeo's oci:DIR:NAME): the image's tag.
const refName = "org.opencontainers.image.ref.name"

// tag is the image's tag for version: the version without its v, and
// with - for the + a tag cannot hold (v1.2.3 is 1.2.3, a pseudo-version's
// +dirty is -dirty).
func tag(version string) string {
	return strings.ReplaceAll(strings.TrimPrefix(version, "v"), "+", "-")
}

// writeImage builds the image for o.platforms and writes it to o.out as
// an OCI image layout, and returns a summary to print.
func writeImage(ctx context.Context, o options) (string, error) {
	tmp, err := os.MkdirTemp("", "bouncer-image-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	binaries := map[platform]string{}
	for _, p := range o.platforms {
		binaries[p] = filepath.Join(tmp, "bouncer-"+p.os+"-"+p.arch)
		if err := buildBinary(ctx, o.src, binaries[p], p, o.version); err != nil {
			return "", err
		}
	}
	s, err := describe(ctx, o.src, binaries[o.platforms[0]], o.version)
	if err != nil {
		return "", err
	}
	digest, err := imageLayout(o.out, o.platforms, binaries, o.caCerts, s)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s: bouncer:%s %s\n", o.out, tag(s.version), digest), nil
}

// imageLayout writes the image of binaries (one per platform of ps) to
// dir, replacing it, and returns the image index's digest.
func imageLayout(dir string, ps []platform, binaries map[platform]string, caCertsFile string, s source) (v1.Hash, error) {
	caCerts, err := os.ReadFile(caCertsFile)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("CA certificates: %w", err)
	}
	if len(caCerts) == 0 {
		return v1.Hash{}, fmt.Errorf("CA certificates: %s is empty", caCertsFile)
	}
	var images []v1.Image
	for _, p := range ps {
		binary, err := os.ReadFile(binaries[p])
		if err != nil {
			return v1.Hash{}, err
		}
		img, err := platformImage(p, binary, caCerts, s)
		if err != nil {
			return v1.Hash{}, err
		}
		images = append(images, img)
	}
	idx, err := index(images, ps)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return v1.Hash{}, err
	}
	path, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := path.AppendIndex(idx, layout.WithAnnotations(map[string]string{refName: tag(s.version)})); err != nil {
		return v1.Hash{}, err
	}
	return idx.Digest()
}
