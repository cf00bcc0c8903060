package admin

import (
	"embed"
	"net/http"
)

// liveFiles are the live page and what it loads: its own script and
// style, and the chart library (vendor/uplot/README.md says which).
//
//go:embed live.html live.js live.css vendor/uplot/uPlot.iife.min.js vendor/uplot/uPlot.min.css
var liveFiles embed.FS

// liveAssets maps the name each file is served under (GET /live for the
// page, GET /live/<name> for the others) to its file and type.
var liveAssets = map[string]struct{ file, contentType string }{
	"live.html": {"live.html", "text/html; charset=utf-8"},
	"live.js":   {"live.js", "text/javascript; charset=utf-8"},
	"live.css":  {"live.css", "text/css; charset=utf-8"},
	"uplot.js":  {"vendor/uplot/uPlot.iife.min.js", "text/javascript; charset=utf-8"},
	"uplot.css": {"vendor/uplot/uPlot.min.css", "text/css; charset=utf-8"},
}

// liveCSP lets the page run and style only what the admin listener
// serves, and fetch only from it: keys come from clients, so whatever
// slipped past the page's escaping still could not run or load
// anything. The page has no inline script or style; every admin answer
// is nosniff, so that no JSON answer can be loaded as a script.
const liveCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'none'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// serveAsset writes the live page's file of name, or 404.
func serveAsset(w http.ResponseWriter, name string) {
	a, ok := liveAssets[name]
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no such file of the live page")
		return
	}
	b, err := liveFiles.ReadFile(a.file)
	if err != nil { // liveAssets and the go:embed line disagree; a test reads every file
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("Content-Security-Policy", liveCSP)
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}
