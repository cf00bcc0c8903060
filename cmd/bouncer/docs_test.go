package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestAlgorithmsDoc runs every `bouncer simulate` command that
// docs/algorithms.md shows and checks that its output is the one printed
// there, so that the page never drifts from the code. Other shell commands
// in the page (the ones that write traffic files) run first, in a temporary
// directory that the simulations then run in.
func TestAlgorithmsDoc(t *testing.T) {
	page, err := os.ReadFile("../../docs/algorithms.md")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	blocks := consoleBlocks(string(page))
	if len(blocks) < 10 {
		t.Fatalf("found %d console blocks, want at least 10", len(blocks))
	}
	for _, b := range blocks {
		args, ok := strings.CutPrefix(b.command, "bouncer ")
		if !ok {
			out, err := exec.Command("sh", "-c", b.command).CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", b.command, err, out)
			}
			continue
		}
		t.Run(args, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, strings.Fields(args)...)
			if code != exitOK || stderr != "" {
				t.Fatalf("got exit code %d, stderr %q; want 0 and nothing", code, stderr)
			}
			if got := trimLines(stdout); got != b.output {
				t.Errorf("output differs from docs/algorithms.md; got\n%s\nwant\n%s", got, b.output)
			}
		})
	}
}

type consoleBlock struct{ command, output string }

// consoleBlocks returns the ```console blocks of a Markdown page: each one's
// "$ " command and the lines after it.
func consoleBlocks(page string) []consoleBlock {
	var out []consoleBlock
	rest := page
	for {
		_, after, ok := strings.Cut(rest, "```console\n$ ")
		if !ok {
			return out
		}
		body, tail, _ := strings.Cut(after, "\n```")
		command, output, _ := strings.Cut(body, "\n")
		out = append(out, consoleBlock{command: command, output: output})
		rest = tail
	}
}

// trimLines drops trailing spaces from every line and the final newline,
// as a Markdown page keeps them.
func trimLines(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}
