package rules

import (
	"fmt"
	"github.com/bouncerhq/bouncer/internal/yamlconf"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

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
	// caller that ends every request it decides with Engine.Refund, which
	// releases the request's leases, such as the gateway. The service is
	// never told when a request ends, so without this a concurrency limit
	// is a problem of the config, reported with its file and line.
	AllowConcurrency bool
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
			if strings.HasPrefix(n, ".") || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
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

// parseFile decodes one file in either format: a top-level rules list
// makes it Bouncer's, a top-level descriptors list envoyproxy/ratelimit's.
func (o LoadOptions) parseFile(name string, data []byte, errs *errorList) *Domain {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		errs.add(name, 0, fmt.Sprintf("not valid YAML: %v", err))
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
	native := false
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value == "rules" {
			native = true
		}
	}
	before := len(errs.problems)
	dec := yamlconf.Decoder{File: name, Report: errs.add}
	if native {
		var f nativeFile
		dec.Decode(top, &f)
		if len(errs.problems) > before {
			return nil
		}
		return compileNative(name, &f, top.Line, errs, o)
	}
	var f envoyFile
	dec.Decode(top, &f)
	if len(errs.problems) > before {
		return nil
	}
	return compileEnvoy(name, &f, top.Line, errs, o)
}
