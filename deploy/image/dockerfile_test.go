package main

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, its continuation lines
// joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, ...
	args string
}

// parseDockerfile reads the instructions of a Dockerfile's text: lines
// ending in \ continue on the next, # starts a comment line.
func parseDockerfile(text string) []instruction {
	var out []instruction
	var cur strings.Builder
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if more, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(more + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{strings.ToUpper(cmd), strings.Join(strings.Fields(args), " ")})
		cur.Reset()
	}
	return out
}

// TestDockerfile holds the Dockerfile to the image make image builds:
// the same user, ports, environment, entry point, command, labels and
// files, a static trimmed binary, and a Go image matching go.mod.
func TestDockerfile(t *testing.T) {
	all := parseDockerfile(string(readFile(t, "../../Dockerfile")))
	var froms []string
	last := 0 // the final stage's first instruction
	for i, in := range all {
		if in.cmd == "FROM" {
			froms, last = append(froms, in.args), i
		}
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(readFile(t, "../../go.mod")))
	if len(froms) != 2 || froms[0] != "--platform=$BUILDPLATFORM golang:"+goVersion[1]+" AS build" || froms[1] != "scratch" {
		t.Errorf("FROM: got %q, want a build stage on golang:%s and the final on scratch", froms, goVersion[1])
	}
	final := map[string][]string{}
	for _, in := range all[last:] {
		final[in.cmd] = append(final[in.cmd], in.args)
	}
	want := runConfig(source{version: "$VERSION", revision: "$REVISION"})
	for _, c := range []struct{ cmd, want string }{
		{"USER", want.User},
		{"WORKDIR", want.WorkingDir},
		{"EXPOSE", strings.Join(ports, " ")},
		{"ENV", strings.Join(want.Env, " ")},
		{"ENTRYPOINT", jsonArray(want.Entrypoint)},
		{"CMD", jsonArray(want.Cmd)},
		{"COPY", "--from=build /out/ /"},
	} {
		if got := final[c.cmd]; len(got) != 1 || got[0] != c.want {
			t.Errorf("%s: got %q, want %q", c.cmd, got, c.want)
		}
	}
	labels := map[string]string{}
	for _, l := range final["LABEL"] {
		for _, kv := range strings.Fields(l) {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = strings.Trim(v, `"`)
		}
	}
	if !maps.Equal(labels, want.Labels) {
		t.Errorf("LABEL: got %v, want %v", labels, want.Labels)
	}

	var runs string
	for _, in := range all[:last] {
		if in.cmd == "RUN" {
			runs += in.args + "\n"
		}
	}
	for _, w := range []string{
		"CGO_ENABLED=0", "GOAMD64=v1", "GOARM64=v8.0", "go build -trimpath", `-ldflags "-s -w -X main.version=$VERSION"`,
		"-o /out" + binaryPath + " ./cmd/bouncer", "mkdir -p /out" + configDir,
		"cp /etc/ssl/certs/ca-certificates.crt /out" + caCertsPath[:strings.LastIndex(caCertsPath, "/")+1],
		"printf '" + strings.ReplaceAll(passwd, "\n", `\n`) + "' > /out/etc/passwd",
		"printf '" + strings.ReplaceAll(group, "\n", `\n`) + "' > /out/etc/group",
		"chown 65532:65532 /out/home/nonroot", "chmod 0700 /out/home/nonroot", "chmod 1777 /out/tmp",
	} {
		if !strings.Contains(runs, w) {
			t.Errorf("the build stage's RUN does not say %q:\n%s", w, runs)
		}
	}
	if ignore := string(readFile(t, "../../.dockerignore")); !slices.Contains(strings.Fields(ignore), "dist") {
		t.Errorf(".dockerignore: want dist left out of the build context, got\n%s", ignore)
	}
}

func jsonArray(s []string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestParseDockerfile checks the parser on comments, continuations and
// spacing.
func TestParseDockerfile(t *testing.T) {
	got := parseDockerfile("# c\nFROM  a AS b\n\nRUN x \\\n    y\nenv A=1 \\\n  B=2\n")
	want := []instruction{{"FROM", "a AS b"}, {"RUN", "x y"}, {"ENV", "A=1 B=2"}}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
