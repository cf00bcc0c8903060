package rules

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/internal/yamlconf"
	"go.yaml.in/yaml/v3"
)

// MaxFileSize bounds a config file, so that a mistaken path cannot make
// Bouncer read a huge file.
const MaxFileSize = 4 << 20

// LoadOptions say what a config may hold beyond what the service (RLS
// and the JSON API) can serve. The zero value is the service's: Load and
// Parse use it.
type LoadOptions struct {
	// AllowConcurrency accepts the concurrency algorithm. Only for a
	// caller that ends every request it decides through its Ledger, which
	// releases the request's leases, such as the gateway. The service is
	// never told when a request ends, so without this a concurrency limit
	// is a problem of the config, reported with its file and line.
	AllowConcurrency bool

	// Mode is the mode of every limit whose rule names none (a flag for
	// envoyproxy/ratelimit-format configs, which have no field for it).
	// Concurrency limits and shaping leaky buckets, which are always
	// strict (bouncer.Limit.Mode), stay strict, and the sliding windows,
	// which cannot lease, stay strict under Lease. The zero value is
	// bouncer.Strict.
	Mode bouncer.Mode
}

// defaultMode is the mode o gives limit l when its file names none:
// o.Mode, except that the limits that are always strict stay strict, so
// that a load-wide default never makes a valid file invalid.
func (o LoadOptions) defaultMode(l bouncer.Limit) bouncer.Mode {
	if l.Algorithm == bouncer.Concurrency || l.Shape {
		return bouncer.Strict
	}
	sliding := l.Algorithm == bouncer.SlidingWindowLog || l.Algorithm == bouncer.SlidingWindowCounter
	if sliding && o.Mode == bouncer.Lease {
		return bouncer.Strict
	}
	return o.Mode
}

// Load reads the config at path: one YAML file, or every *.yaml and *.yml
// file of a directory (not its subdirectories, nor names starting with
// '.', which is how a Kubernetes ConfigMap volume keeps its versions).
// The files are validated together; the error is a *ConfigError listing
// every problem with file and line. Load is shorthand for
// LoadOptions{}.Load(path).
func Load(path string) (*Config, error) { return LoadOptions{}.Load(path) }

// Load reads the config at path, as the function Load does, accepting
// what o allows.
func (o LoadOptions) Load(path string) (*Config, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	names := []string{path}
	if info.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, fmt.Errorf("rules: %w", err)
		}
		names = names[:0]
		for _, e := range entries {
			n := e.Name()
			if strings.HasPrefix(n, ".") || !IsConfigFile(n) {
				continue
			}
			full := filepath.Join(path, n)
			if st, err := os.Stat(full); err != nil || st.IsDir() {
				continue // a dangling link or a directory named like a file
			}
			names = append(names, full)
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("rules: no *.yaml or *.yml files in %s", path)
		}
	}
	data := make([][]byte, len(names))
	for i, n := range names {
		b, err := readBounded(n)
		if err != nil {
			return nil, err
		}
		data[i] = b
	}
	return o.parse(names, data)
}

func readBounded(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("rules: %s: %w", name, err)
	}
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("rules: %s: larger than %d bytes", name, MaxFileSize)
	}
	return b, nil
}

// Parse reads one config file's bytes; name is used in errors. It is
// shorthand for LoadOptions{}.Parse(name, data).
func Parse(name string, data []byte) (*Config, error) { return LoadOptions{}.Parse(name, data) }

// Parse reads one config file's bytes, as the function Parse does,
// accepting what o allows.
func (o LoadOptions) Parse(name string, data []byte) (*Config, error) {
	return o.parse([]string{name}, [][]byte{data})
}

func (o LoadOptions) parse(names []string, data [][]byte) (*Config, error) {
	if !o.Mode.Valid() {
		return nil, fmt.Errorf("rules: LoadOptions.Mode: unknown mode %d", uint8(o.Mode))
	}
	var errs errorList
	c := &Config{Version: version(names, data), Files: slices.Clone(names), domains: map[string]*Domain{}}
	for i, name := range names {
		d := o.parseFile(name, data[i], &errs)
		if d == nil {
			continue
		}
		if prev := c.domains[d.Name]; prev != nil && d.Name != "" {
			errs.add(name, 0, fmt.Sprintf("duplicate domain '%s' in config file (also in %s)", d.Name, prev.File))
			continue
		}
		c.domains[d.Name] = d
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// envoyGuess explains the unknown top-level fields of a file read as
// envoyproxy/ratelimit's format because it has neither top-level rules nor
// descriptors: a misspelt rules is the likely mistake, so a near name is
// suggested, and the reason for the format is said once, at that field
// (or else at the first unknown one).
func envoyGuess(top *yaml.Node) func(path, field string, known []string) string {
	const why = "; read as envoyproxy/ratelimit's format: the file has no top-level rules"
	at := ""
	for i := 0; i+1 < len(top.Content); i += 2 {
		if k := top.Content[i].Value; yamlconf.Suggest(k, []string{"rules"}) != "" {
			at = k
			break
		}
	}
	said := false
	return func(path, field string, known []string) string {
		if path != "" {
			return yamlconf.UnknownReason(field, known)
		}
		if field == at {
			said = true
			return fmt.Sprintf("unknown field %q (did you mean rules?)", field) + why
		}
		reason := yamlconf.UnknownReason(field, known)
		if field == "plans" || field == "client_ip" {
			reason = fmt.Sprintf("unknown field %q: Bouncer's format has it, envoyproxy/ratelimit's does not", field)
		}
		if at == "" && !said {
			said = true
			reason += why
		}
		return reason
	}
}

// syntaxError returns the line and the reason of a YAML syntax error,
// without yaml.v3's prefixes. yaml.v3 reports the line where the
// construct around the mistake began (a block list for a mis-indented
// key, the scalar before a tab), counted from 0 for a parser error: the
// line of the mistake itself is the first at which the file's beginning
// fails to parse with the same reason.
func syntaxError(data []byte, err error) (int, string) {
	line, msg := yamlReason(err)
	lines := strings.SplitAfter(string(data), "\n")
	fails := func(k int) bool {
		var n yaml.Node
		err := yaml.Unmarshal([]byte(strings.Join(lines[:k], "")), &n)
		if err == nil {
			return false
		}
		_, m := yamlReason(err)
		return m == msg
	}
	if k := sort.Search(len(lines), func(i int) bool { return fails(i + 1) }); k < len(lines) {
		return k + 1, msg
	}
	return line, msg
}

// yamlReason splits a yaml.v3 error into its line and reason.
func yamlReason(err error) (int, string) {
	msg, _ := strings.CutPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, after, ok := strings.Cut(rest, ": "); ok {
			if v, err := strconv.Atoi(n); err == nil {
				return v, after
			}
		}
	}
	return 0, msg
}

// parseFile decodes one file in either format: a top-level rules list
// makes it Bouncer's, a top-level descriptors list envoyproxy/ratelimit's.
func (o LoadOptions) parseFile(name string, data []byte, errs *errorList) *Domain {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line, reason := syntaxError(data, err)
		errs.add(name, line, "not valid YAML: "+reason)
		return nil
	}
	if len(doc.Content) == 0 {
		errs.add(name, 0, "empty file")
		return nil
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		errs.add(name, top.Line, "want a mapping with domain and rules (Bouncer's format) or domain and descriptors (envoyproxy/ratelimit's)")
		return nil
	}
	native, descriptors := false, false
	for i := 0; i+1 < len(top.Content); i += 2 {
		switch top.Content[i].Value {
		case "rules":
			native = true
		case "descriptors":
			descriptors = true
		}
	}
	before := len(errs.List)
	dec := yamlconf.Decoder{File: name, Report: errs.add}
	if !native && !descriptors {
		dec.Unknown = envoyGuess(top)
	}
	if native {
		var f nativeFile
		dec.Decode(top, &f)
		wholeRates(name, &f, errs)
		if len(errs.List) > before {
			return nil
		}
		return compileNative(name, &f, top.Line, errs, o)
	}
	var f envoyFile
	dec.Decode(top, &f)
	if len(errs.List) > before {
		return nil
	}
	return compileEnvoy(name, &f, top.Line, errs, o)
}
