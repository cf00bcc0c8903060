package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// releasePlatforms are the platforms a release has binaries for.
var releasePlatforms = []platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

// writeRelease writes a release to o.out, replacing it: a binary for each
// of o.binaries (bouncer-VERSION-OS-ARCH), the image for
// o.platforms as an OCI layout in bouncer-VERSION-image.tar, and
// SHA256SUMS over them. It returns SHA256SUMS's contents.
func writeRelease(ctx context.Context, o options) (string, error) {
	if err := os.RemoveAll(o.out); err != nil {
		return "", err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return "", err
	}
	built := map[platform]string{}
	for _, p := range o.binaries {
		built[p] = filepath.Join(o.out, "bouncer-"+p.os+"-"+p.arch)
		if err := buildBinary(ctx, o.src, built[p], p, o.version); err != nil {
			return "", err
		}
	}
	s, err := describe(ctx, o.src, built[o.binaries[0]], o.version)
	if err != nil {
		return "", err
	}
	binaries := map[platform]string{}
	for p, path := range built {
		binaries[p] = filepath.Join(o.out, "bouncer-"+s.version+"-"+p.os+"-"+p.arch)
		if err := os.Rename(path, binaries[p]); err != nil {
			return "", err
		}
	}
	layoutDir := filepath.Join(o.out, "image")
	if _, err := imageLayout(layoutDir, o.platforms, binaries, o.caCerts, s); err != nil {
		return "", err
	}
	if err := tarDir(layoutDir, filepath.Join(o.out, "bouncer-"+s.version+"-image.tar"), s.epoch); err != nil {
		return "", err
	}
	if err := os.RemoveAll(layoutDir); err != nil {
		return "", err
	}
	return writeSums(o.out)
}

// tarDir writes the files under dir to the tar file path, sorted, owned
// by root, with modes 0755 (directories) and 0644 (files) and every time
// at epoch.
func tarDir(dir, path string, epoch time.Time) error {
	files := map[string]file{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, dir+string(filepath.Separator)))
		if d.IsDir() {
			files[rel+"/"] = file{mode: 0o755}
			return nil
		}
		data, err := os.ReadFile(p)
		files[rel] = file{mode: 0o644, contents: data}
		return err
	})
	if err != nil {
		return err
	}
	return os.WriteFile(path, tarFiles(files, epoch), 0o644)
}

// writeSums writes dir's SHA256SUMS, in sha256sum's format (sha256sum -c
// checks it), for every file in dir, and returns its contents.
func writeSums(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, e := range entries { // sorted by name
		if e.IsDir() || e.Name() == "SHA256SUMS" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), e.Name())
	}
	return b.String(), os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(b.String()), 0o644)
}
