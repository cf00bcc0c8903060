package edge

import "github.com/bouncerhq/bouncer/internal/storekey"

// Compose is the edges' Compose: a key of each combination of the values
// of fns, for the requests every fn applies to.
func Compose[R any, F ~func(R) (string, bool)](fns []F) F {
	return func(r R) (string, bool) {
		parts := make([]string, len(fns))
		for i, f := range fns {
			v, ok := f(r)
			if !ok {
				return "", false
			}
			parts[i] = v
		}
		return storekey.Join(parts...), true
	}
}
