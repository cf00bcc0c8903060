package main

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// printFlags writes the flags of fs as flag.PrintDefaults does — name,
// type placeholder, usage (which carries the environment variable),
// default — but in the --name form the docs and the examples use, which
// the flag package accepts as well as -name.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		var b strings.Builder
		fmt.Fprintf(&b, "  --%s", f.Name)
		name, usage := flag.UnquoteUsage(f)
		if name != "" {
			b.WriteString(" " + name)
		}
		b.WriteString("\n    \t")
		b.WriteString(strings.ReplaceAll(usage, "\n", "\n    \t"))
		if !isZeroValue(f) {
			if isString(f) {
				fmt.Fprintf(&b, " (default %q)", f.DefValue)
			} else {
				fmt.Fprintf(&b, " (default %v)", f.DefValue)
			}
		}
		b.WriteString("\n")
		io.WriteString(w, b.String())
	})
}

// isZeroValue reports whether f's default is its type's zero value, which
// flag.PrintDefaults leaves unsaid too.
func isZeroValue(f *flag.Flag) bool {
	t := reflect.TypeOf(f.Value)
	var z reflect.Value
	if t.Kind() == reflect.Pointer {
		z = reflect.New(t.Elem())
	} else {
		z = reflect.Zero(t)
	}
	v, ok := z.Interface().(flag.Value)
	return ok && f.DefValue == v.String()
}

// isString reports whether f holds a string, whose default is quoted.
func isString(f *flag.Flag) bool {
	t := reflect.TypeOf(f.Value)
	return t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.String
}
