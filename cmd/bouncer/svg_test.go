package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateSVG = flag.Bool("update", false, "rewrite the golden SVG files in testdata")

// svgChart is what a test reads of a chart: the polylines by class and
// limit, and every text.
type svgChart struct {
	lines map[string][]string // class → the data-limit of each polyline
	texts []string
}

func parseSVG(t *testing.T, data []byte) svgChart {
	t.Helper()
	ch := svgChart{lines: map[string][]string{}}
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	var inText bool
	var root string
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Space + " " + tok.Name.Local
			}
			inText = tok.Name.Local == "text"
			if tok.Name.Local == "polyline" {
				var class, limit string
				for _, a := range tok.Attr {
					switch a.Name.Local {
					case "class":
						class = a.Value
					case "data-limit":
						limit = a.Value
					}
				}
				ch.lines[class] = append(ch.lines[class], limit)
			}
		case xml.CharData:
			if inText {
				ch.texts = append(ch.texts, string(tok))
			}
		case xml.EndElement:
			inText = false
		}
	}
	if want := "http://www.w3.org/2000/svg svg"; root != want {
		t.Errorf("root element: got %q, want %q", root, want)
	}
	return ch
}

func TestSimulateSVG(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		limits []string // limitLabel of each, in order
		legend []string // describeLimit of each
		golden string
	}{
		{
			name: "compare boundary",
			args: []string{"--compare", "fixed_window,sliding_window_counter,sliding_window_log", "--rate", "10",
				"--traffic", "boundary"},
			limits: []string{"fixed_window", "sliding_window_counter", "sliding_window_log"},
			legend: []string{"fixed_window 10/1s", "sliding_window_counter 10/1s", "sliding_window_log 10/1s"},
			golden: "boundary.svg",
		},
		{
			name:   "one token bucket",
			args:   []string{"--algorithm", "token_bucket", "--rate", "5", "--duration", "2s"},
			limits: []string{"token_bucket"},
			legend: []string{"token_bucket 5/1s burst 5"},
			golden: "token_bucket.svg",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "chart.svg")
			code, _, stderr := runArgs(t, append([]string{"simulate", "--summary", "--svg", file}, tt.args...)...)
			if code != exitOK || stderr != "" {
				t.Fatalf("got exit code %d, stderr %q; want 0 and nothing", code, stderr)
			}
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			ch := parseSVG(t, data)
			for _, class := range []string{"admitted", "rejected", "remaining"} {
				if got := ch.lines[class]; !slices.Equal(got, tt.limits) {
					t.Errorf("%s polylines: got %q, want one per limit, %q", class, got, tt.limits)
				}
			}
			for _, want := range append([]string{"requests per 100ms", "remaining of the capacity", "time from 2026-01-05T00:00:00Z", "0s", "2s"}, tt.legend...) {
				if !slices.Contains(ch.texts, want) {
					t.Errorf("no text %q in %q", want, ch.texts)
				}
			}

			golden := filepath.Join("testdata", tt.golden)
			if *updateSVG {
				if err := os.WriteFile(golden, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestSimulateSVG -update to write it)", err)
			}
			if !bytes.Equal(data, want) {
				t.Errorf("chart differs from %s (go test -run TestSimulateSVG -update rewrites it); got\n%s", golden, data)
			}
		})
	}
}

func TestSimulateSVGErrors(t *testing.T) {
	base := []string{"simulate", "--algorithm", "gcra", "--rate", "5", "--summary"}
	code, stdout, stderr := runArgs(t, append(base, "--svg", "")...)
	if code != exitUsage || !strings.Contains(stderr, "--svg: want a file name") || stdout != "" {
		t.Errorf("empty --svg: got exit code %d, stdout %q, stderr %q; want %d, nothing and a --svg error", code, stdout, stderr, exitUsage)
	}
	missing := filepath.Join(t.TempDir(), "no", "chart.svg")
	code, _, stderr = runArgs(t, append(base, "--svg", missing)...)
	if code != exitFail || !strings.Contains(stderr, "--svg: open "+missing) {
		t.Errorf("--svg in a missing directory: got exit code %d, stderr %q; want %d and a --svg error", code, stderr, exitFail)
	}
}
