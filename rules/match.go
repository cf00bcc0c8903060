package rules

import "strings"

// Entry is one key/value pair of a descriptor, as Envoy sends them.
type Entry struct {
	Key   string
	Value string
}

// node is one level of a domain's descriptor tree: what an entry at this
// depth may match, and the rule that applies when a descriptor ends here.
type node struct {
	exact     map[Entry]*node  // key and value
	any       map[string]*node // key with any value
	wildcards []wildcard       // key with a value pattern ("foo*", "/api/*/v1"), in file order
	rule      *Rule

	// share, for a node reached through a wildcard, makes every value
	// the wildcard matches count as one (share_threshold): the key is
	// built with pattern in place of the value.
	share   bool
	pattern string
}

type wildcard struct {
	key     string
	pattern pattern
	next    *node
}

// pattern is a value with at least one '*', split at each: every '*'
// matches any run of characters, none included. "foo*" is the pattern
// {"foo", ""}, "/api/*/v1" is {"/api/", "/v1"}, "*" is {"", ""}.
type pattern []string

// isPattern reports whether a config value is a pattern rather than one
// exact value.
func isPattern(value string) bool { return strings.Contains(value, "*") }

func newPattern(value string) pattern { return strings.Split(value, "*") }

// prefix is the literal text every value p matches starts with; p is a
// prefix pattern ("foo*") when it is all p says.
func (p pattern) prefix() string { return p[0] }

func (p pattern) isPrefix() bool { return len(p) == 2 && p[1] == "" }

// matches reports whether v is one of p's values. The first and last
// parts are anchored at v's ends; each part between is found leftmost in
// what is left, which for '*' alone finds a match whenever there is one.
func (p pattern) matches(v string) bool {
	first, last := p[0], p[len(p)-1]
	if len(v) < len(first)+len(last) || !strings.HasPrefix(v, first) || !strings.HasSuffix(v, last) {
		return false
	}
	rest := v[len(first) : len(v)-len(last)]
	for _, part := range p[1 : len(p)-1] {
		i := strings.Index(rest, part)
		if i < 0 {
			return false
		}
		rest = rest[i+len(part):]
	}
	return true
}

// covers reports whether every value q matches is matched by p too, as
// far as that is simple to know: a prefix pattern covers any pattern
// whose prefix extends its own. (A later pattern that an earlier one of
// another shape covers is not found; it is only never matched.)
func (p pattern) covers(q pattern) bool {
	return p.isPrefix() && strings.HasPrefix(q.prefix(), p.prefix())
}

func (p pattern) String() string { return strings.Join(p, "*") }

func newNode() *node {
	return &node{exact: map[Entry]*node{}, any: map[string]*node{}}
}

func (n *node) leaf() bool {
	return len(n.exact) == 0 && len(n.any) == 0 && len(n.wildcards) == 0
}

// match is the result of looking a descriptor up in a domain's tree.
type match struct {
	rule *Rule

	// values are the values the descriptor's key is made of: the
	// entries' values, with share_threshold patterns in place.
	values []string
}

// lookup finds the rule for a descriptor the way envoyproxy/ratelimit
// does: each entry descends one level, trying the exact key and value
// first, then value patterns ("foo*", "/api/*/v1") in file order, then the key with
// any value; the rule applies only if the descriptor's last entry lands on
// a level that has one. A descriptor longer than the tree's branch finds
// nothing.
//
// Unlike envoyproxy/ratelimit, which matches the string key+"_"+value,
// Bouncer compares keys and values separately, so that key "a_b" with
// value "c" never matches key "a" with value "b_c".
func (n *node) lookup(entries []Entry, values []string) match {
	var m match
	cur := n
	for i, e := range entries {
		next, viaWildcard := cur.exact[e], false
		if next == nil {
			for _, w := range cur.wildcards {
				if w.key == e.Key && w.pattern.matches(e.Value) {
					next, viaWildcard = w.next, true
					break
				}
			}
		}
		if next == nil {
			next = cur.any[e.Key]
		}
		values[i] = e.Value
		if viaWildcard && next.share {
			values[i] = next.pattern
		}
		if next == nil {
			break
		}
		if next.rule != nil && i == len(entries)-1 {
			m.rule = next.rule
		}
		if next.leaf() {
			break
		}
		cur = next
	}
	m.values = values[:len(entries)] // read only when a rule was found: all set then
	return m
}
