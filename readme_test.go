package bouncer_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readmeImports are the packages README.md's Go snippets may use; each
// snippet is compiled as the body of a function that takes ctx and
// returns an error.
var readmeImports = map[string]string{
	"context":              "context.Background",
	"errors":               "errors.New",
	"fmt":                  "fmt.Sprint",
	"net/http":             "http.StatusOK",
	"time":                 "time.Second",
	module:                 "bouncer.TokenBucket",
	module + "/memstore":   "memstore.New",
	module + "/redisstore": "redisstore.New",
	module + "/hybrid":     "hybrid.New",
	module + "/httplimit":  "httplimit.Middleware",
}

// TestReadmeSnippetsCompile compiles every Go snippet of README.md
// against the module as it is, so that the README's code stays code.
func TestReadmeSnippetsCompile(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	snippets := goBlocks(string(readme))
	if len(snippets) < 2 {
		t.Fatalf("found %d Go snippets in README.md; want the library tour's", len(snippets))
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module readmesnippets\n\ngo 1.26\n\nrequire github.com/bouncerhq/bouncer v0.0.0\n\nreplace github.com/bouncerhq/bouncer => " + root + "\n"
	sum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	src.WriteString("package main\n\nimport (\n")
	for p := range readmeImports {
		fmt.Fprintf(&src, "\t%q\n", p)
	}
	src.WriteString(")\n\n")
	for _, use := range readmeImports {
		fmt.Fprintf(&src, "var _ = %s\n", use)
	}
	for i, s := range snippets {
		fmt.Fprintf(&src, "\n// README.md snippet %d, from line %d.\nfunc snippet%d(ctx context.Context) error {\n%s\nreturn nil\n}\n", i+1, s.line, i+1, s.code)
	}
	src.WriteString("\nfunc main() {}\n")
	for name, body := range map[string]string{"go.mod": gomod, "go.sum": string(sum), "main.go": src.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "build", "-o", os.DevNull, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("README.md's Go snippets do not compile: %v\n%s\n(the program:)\n%s", err, out, src.String())
	}
}

type snippet struct {
	line int
	code string
}

// goBlocks returns the ```go blocks of a Markdown page.
func goBlocks(page string) []snippet {
	var out []snippet
	lines := strings.Split(page, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```go" {
			continue
		}
		start := i + 1
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
		}
		out = append(out, snippet{line: start + 1, code: strings.Join(lines[start:i], "\n")})
	}
	return out
}
