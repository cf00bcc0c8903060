// Command image builds Bouncer's container image, and its releases,
// without a container engine.
//
//	go run . image   [-src DIR] [-out DIR] [-version V] [-platforms LIST] [-ca-certs FILE]
//	go run . release [-src DIR] [-out DIR] [-version V] [-ca-certs FILE]
//
// image cross-compiles bouncer for each platform (linux/amd64 and
// linux/arm64 by default) and writes a multi-platform image as an OCI
// image layout in -out (dist/image): one image index, one image per
// platform, each one layer holding the static binary, CA certificates, a
// passwd entry for the non-root user and the empty config directory.
// Copy it to a registry or a Docker daemon with a tool that reads OCI
// layouts (skopeo, crane).
//
// release writes, in -out (dist/release), static binaries for linux and
// darwin on amd64 and arm64, the image as an OCI layout in a tar file,
// and SHA256SUMS over them all.
//
// Both are reproducible: the same source, Go toolchain, version and
// certificate file give the same bytes. File times and the image's
// creation time are SOURCE_DATE_EPOCH when set, else the time of the
// source's last commit.
//
// The version is -version, passed to the binary with -ldflags -X
// main.version; when empty, the module version the Go toolchain records
// from the source's VCS (a tag, or a pseudo-version). It must be a
// semantic version (v1.2.3).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"golang.org/x/mod/semver"
)

const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main with its arguments and outputs: the command's exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "image" && args[0] != "release") {
		fmt.Fprintln(stderr, "usage: image image|release [flags]; image release -h for the flags")
		return exitUsage
	}
	cmd := args[0]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := options{binaries: releasePlatforms}
	fs.StringVar(&o.src, "src", "../..", "the bouncer module's directory")
	fs.StringVar(&o.out, "out", "../../dist/"+cmd, "the directory to write, replaced if it exists")
	fs.StringVar(&o.version, "version", "", "the release's version (v1.2.3); empty: the module version Go records from the VCS")
	fs.StringVar(&o.caCerts, "ca-certs", defaultCACerts, "the CA certificate bundle (PEM) to put in the image")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "the image's platforms, comma-separated")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", cmd, fs.Arg(0))
		return exitUsage
	}
	if o.version != "" && !semver.IsValid(o.version) {
		fmt.Fprintf(stderr, "%s: -version %q: want a semantic version, such as v1.2.3\n", cmd, o.version)
		return exitUsage
	}
	var err error
	if o.platforms, err = parsePlatforms(*platforms); err != nil {
		fmt.Fprintf(stderr, "%s: -platforms: %v\n", cmd, err)
		return exitUsage
	}
	var summary string
	if cmd == "image" {
		summary, err = writeImage(ctx, o)
	} else {
		summary, err = writeRelease(ctx, o)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return exitFail
	}
	fmt.Fprint(stdout, summary)
	return exitOK
}

// parsePlatforms parses "linux/amd64,linux/arm64".
func parsePlatforms(s string) ([]platform, error) {
	var ps []platform
	for _, f := range strings.Split(s, ",") {
		osName, arch, ok := strings.Cut(strings.TrimSpace(f), "/")
		if !ok || osName != "linux" || (arch != "amd64" && arch != "arm64") {
			return nil, fmt.Errorf("%q: want linux/amd64 or linux/arm64", f)
		}
		ps = append(ps, platform{osName, arch})
	}
	return ps, nil
}
