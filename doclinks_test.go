package bouncer_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDocLinks checks the links between the pages of README.md and
// docs/: a link to a page of docs/ names a page that exists, and a link
// to a section (#anchor) names a heading of its page, or an <a id> it
// keeps for a section that moved. Links out of docs/ (to code, to
// deploy/) and to other sites are not checked.
func TestDocLinks(t *testing.T) {
	pages := []string{"README.md"}
	err := filepath.WalkDir("docs", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) (map[string]bool, bool) {
		if a, ok := anchors[page]; ok {
			return a, a != nil
		}
		b, err := os.ReadFile(page)
		if err != nil {
			anchors[page] = nil
			return nil, false
		}
		anchors[page] = pageAnchors(string(b))
		return anchors[page], true
	}
	checked := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range pageLinks(string(b)) {
			target, frag, _ := strings.Cut(l.url, "#")
			path := page
			if target != "" {
				path = filepath.Join(filepath.Dir(page), target)
			}
			if !strings.HasSuffix(path, ".md") || !strings.HasPrefix(path, "docs"+string(filepath.Separator)) && path != "README.md" {
				continue
			}
			checked++
			a, ok := anchorsOf(path)
			switch {
			case !ok:
				t.Errorf("%s:%d: link to %s: no page %s", page, l.line, l.url, path)
			case frag != "" && !a[frag]:
				t.Errorf("%s:%d: link to %s: %s has no section #%s", page, l.line, l.url, path, frag)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d links between the docs' pages, want the docs'", checked)
	}
}

type pageLink struct {
	line int
	url  string
}

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	htmlID  = regexp.MustCompile(`<a (?:id|name)="([^"]+)"`)
	heading = regexp.MustCompile(`^#+ (.*)`)
	// notInAnchor is what a heading loses on its way to its anchor, as
	// GitHub makes it: all but letters, digits, spaces, - and _.
	notInAnchor = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// pageLinks returns the relative links of a Markdown page outside its
// code blocks.
func pageLinks(page string) []pageLink {
	var out []pageLink
	code := false
	for i, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, "```") {
			code = !code
		}
		if code {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(l, -1) {
			if u := m[1]; !strings.Contains(u, ":") {
				out = append(out, pageLink{line: i + 1, url: u})
			}
		}
	}
	return out
}

// pageAnchors returns the anchors of a Markdown page: its headings',
// made as GitHub makes them (a second heading of the same text gets
// -1), and its <a id>s.
func pageAnchors(page string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	code := false
	for _, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, "```") {
			code = !code
		}
		if code {
			continue
		}
		if m := heading.FindStringSubmatch(l); m != nil {
			a := strings.ReplaceAll(notInAnchor.ReplaceAllString(strings.ToLower(strings.TrimSpace(m[1])), ""), " ", "-")
			if n := seen[a]; n > 0 {
				seen[a]++
				a += "-" + strconv.Itoa(n)
			} else {
				seen[a] = 1
			}
			out[a] = true
		}
		for _, m := range htmlID.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
	}
	return out
}
