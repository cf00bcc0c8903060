package grpclimit

import "strings"

// ExcludeMethods excludes calls whose full method name is one of methods,
// or, for an entry ending in "/", of a method of that service:
// ExcludeMethods("/grpc.health.v1.Health/") leaves health checks
// unlimited. Nothing is excluded unless the Options say so.
func ExcludeMethods(methods ...string) func(*Call) bool {
	return func(c *Call) bool {
		for _, m := range methods {
			if c.Method == m || strings.HasSuffix(m, "/") && strings.HasPrefix(c.Method, m) {
				return true
			}
		}
		return false
	}
}
