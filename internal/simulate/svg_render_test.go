package simulate

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/internal/browsertest"
)

// renderScale is the device pixels per SVG unit of a rendering: 2 keeps
// the committed image sharp on high-density screens.
const renderScale = 2

// readmeImage is the chart the README shows, which
// BOUNCER_UPDATE_IMAGES=1 makes TestSimulateSVGRendered write.
const readmeImage = "../../docs/img/simulate-boundary.png"

// TestSimulateSVGRendered renders the README's boundary chart in headless
// Chromium and reads the pixels: every limit's line shows in its own
// panel in its own colour, the offered traffic shows in every panel, and
// the window boundary is marked. What is drawn is what a reader sees, not
// only what the SVG source says. Pixel-exact comparison would break with
// every Chromium release, so the image is checked by colour and place.
func TestSimulateSVGRendered(t *testing.T) {
	bin := browsertest.Chromium(t)
	data, _ := runSVG(t, boundaryArgs...)
	doc := parseSVG(t, data)
	file := filepath.Join(t.TempDir(), "run.svg")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	raw, img := renderSVG(t, bin, file, doc)

	plots := doc.find("rect", "plot")
	lines := doc.find("path", "admitted")
	if len(plots) != 3 || len(lines) != 3 {
		t.Fatalf("got %d panels and %d admitted lines, want 3 of each", len(plots), len(lines))
	}
	for i, plot := range plots {
		r := svgRect(t, plot)
		name := plot.attrs["data-limit"]
		own := countColor(img, r, svgColor(t, lines[i].attrs["stroke"]))
		// The line runs the whole width, 2 units thick.
		if want := r.Dx(); own < want {
			t.Errorf("%s's panel: %d pixels of its colour %s, want at least %d", name, own, lines[i].attrs["stroke"], want)
		}
		for j, other := range lines {
			if j != i {
				if n := countColor(img, r, svgColor(t, other.attrs["stroke"])); n > own/10 {
					t.Errorf("%s's panel: %d pixels of %s's colour, want its own only", name, n, other.attrs["data-limit"])
				}
			}
		}
		if n, want := countColor(img, r, svgColor(t, svgOffered)), r.Dx(); n < want {
			t.Errorf("%s's panel: %d pixels of the offered area, want at least %d", name, n, want)
		}
	}

	boundaries := doc.find("line", "boundary")
	if len(boundaries) != 1 {
		t.Fatalf("got %d window boundaries, want 1", len(boundaries))
	}
	for _, b := range boundaries {
		x := int(svgFloat(t, b, "x1") * renderScale)
		y1, y2 := int(svgFloat(t, b, "y1")*renderScale), int(svgFloat(t, b, "y2")*renderScale)
		column := image.Rect(x-3, y1, x+4, y2)
		// Dashed, and crossed by the lines it separates: a quarter of its
		// length is plenty.
		if n, want := countColor(img, column, svgColor(t, svgBoundary)), (y2-y1)/4; n < want {
			t.Errorf("boundary at %s: %d pixels of its colour, want at least %d", b.attrs["data-at"], n, want)
		}
	}

	if os.Getenv("BOUNCER_UPDATE_IMAGES") != "" {
		if err := os.MkdirAll(filepath.Dir(readmeImage), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(readmeImage, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// renderSVG screenshots the chart in file at renderScale and returns the
// PNG and its image, checked to be the chart's size.
func renderSVG(t *testing.T, bin, file string, doc svgDoc) ([]byte, image.Image) {
	t.Helper()
	root := doc.elems[0]
	w, errW := strconv.Atoi(root.attrs["width"])
	h, errH := strconv.Atoi(root.attrs["height"])
	if errW != nil || errH != nil {
		t.Fatalf("chart size %q×%q: want whole numbers", root.attrs["width"], root.attrs["height"])
	}
	out := filepath.Join(t.TempDir(), "chart.png")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless=new", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--hide-scrollbars", "--user-data-dir="+t.TempDir(),
		"--force-device-scale-factor="+strconv.Itoa(renderScale),
		"--window-size="+strconv.Itoa(w)+","+strconv.Itoa(h), "--screenshot="+out, "file://"+file)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, stderr.String())
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := img.Bounds().Size(), image.Pt(w*renderScale, h*renderScale); got != want {
		t.Fatalf("screenshot size: got %v, want %v", got, want)
	}
	return raw, img
}

// svgRect is a rect element's area in device pixels, inset by a pixel so
// that neighbours' antialiasing stays out.
func svgRect(t *testing.T, e svgElem) image.Rectangle {
	t.Helper()
	x, y := svgFloat(t, e, "x")*renderScale, svgFloat(t, e, "y")*renderScale
	w, h := svgFloat(t, e, "width")*renderScale, svgFloat(t, e, "height")*renderScale
	return image.Rect(int(x)+1, int(y)+1, int(x+w)-1, int(y+h)-1)
}

// countColor counts the pixels of r within a small distance of c, so that
// colour management and antialiasing at a line's edge do not matter.
func countColor(img image.Image, r image.Rectangle, c color.RGBA) int {
	const tolerance = 24 // per channel, of 255
	near := func(a uint32, b uint8) bool {
		d := int(a>>8) - int(b)
		return -tolerance <= d && d <= tolerance
	}
	n := 0
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			pr, pg, pb, _ := img.At(x, y).RGBA()
			if near(pr, c.R) && near(pg, c.G) && near(pb, c.B) {
				n++
			}
		}
	}
	return n
}

// svgColor parses a #rrggbb colour.
func svgColor(t *testing.T, s string) color.RGBA {
	t.Helper()
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "#"), 16, 32)
	if err != nil || len(s) != 7 {
		t.Fatalf("colour %q: want #rrggbb", s)
	}
	return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 255}
}

// svgFloat reads a coordinate attribute.
func svgFloat(t *testing.T, e svgElem, name string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(e.attrs[name], 64)
	if err != nil {
		t.Fatalf("%s %s=%q: %v", e.name, name, e.attrs[name], err)
	}
	return f
}
