package admin

import (
	"cmp"
	"slices"
	"strings"
	"sync"

	"github.com/bouncerhq/bouncer/rules"
)

// KeyIndex remembers the keys an engine decided most recently, up to a
// bound, so that an operator can list them, look at their state and reset
// them: set it as Options.Engine's Keys.
// Stores keep hashes or digests of keys, never the keys (that is how they
// stay small and safe with client-controlled values), so this index is
// where keys can be listed from. It is safe for concurrent use.
type KeyIndex struct {
	max int

	mu    sync.Mutex
	keys  map[string]*IndexedKey
	order []string // ring of keys in the order they were first seen
	next  int      // the ring's oldest entry once full
}

var _ rules.KeyObserver = (*KeyIndex)(nil)

// IndexedKey is what the index knows of one key: what the engine told it
// last, and how often the key was denied.
type IndexedKey struct {
	rules.KeyInfo
	Denied uint64 // requests answered over the limit since the index first held the key
}

// NewKeyIndex returns an index of at most n keys (at least 1); past it,
// the key first seen longest ago is forgotten.
func NewKeyIndex(n int) *KeyIndex {
	n = max(n, 1)
	return &KeyIndex{max: n, keys: make(map[string]*IndexedKey, min(n, 1<<16))}
}

// Decided records one counted key of a decision (rules.KeyObserver).
func (x *KeyIndex) Decided(k rules.KeyInfo) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if had, ok := x.keys[k.Key]; ok {
		had.LastSeen, had.Rule, had.Limits, had.Judge = k.LastSeen, k.Rule, k.Limits, keepJudge(k.Judge, had.Judge)
		return
	}
	k.Entries, k.Judge = shorten(k.Entries), keepJudge(k.Judge, nil)
	if len(x.order) < x.max {
		x.order = append(x.order, k.Key)
	} else {
		delete(x.keys, x.order[x.next])
		x.order[x.next] = k.Key
		x.next = (x.next + 1) % x.max
	}
	x.keys[k.Key] = &IndexedKey{KeyInfo: k}
}

// keepJudge is the judge to keep for a key told of judge: was, the one the
// index holds, when it is the same limit (copies of an IndexedKey share
// it, so it is never changed in place), else a copy of judge, or nil.
func keepJudge(judge, was *rules.CurrentLimit) *rules.CurrentLimit {
	switch {
	case judge == nil:
		return nil
	case was != nil && *was == *judge:
		return was
	}
	p := new(rules.CurrentLimit)
	*p = *judge
	return p
}

// Denied counts a denial of key, if the index holds it
// (rules.KeyObserver).
func (x *KeyIndex) Denied(key string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if k, ok := x.keys[key]; ok {
		k.Denied++
	}
}

// MostDenied returns up to n keys with the most denials, most first
// (ties to the key seen last); keys never denied are left out.
func (x *KeyIndex) MostDenied(n int) []IndexedKey {
	x.mu.Lock()
	var out []IndexedKey
	for _, k := range x.keys {
		if k.Denied > 0 {
			out = append(out, *k)
		}
	}
	x.mu.Unlock()
	slices.SortFunc(out, func(a, b IndexedKey) int {
		if a.Denied != b.Denied {
			return cmp.Compare(b.Denied, a.Denied)
		}
		return b.LastSeen.Compare(a.LastSeen)
	})
	return out[:min(n, len(out))]
}

// maxShownValue bounds the entry values the index keeps: they come from
// clients, and ten thousand keys of 32 entries of 4 KiB would hold over a
// gigabyte. The key itself is bounded (bouncer.KeyOf) and stays exact.
const maxShownValue = 64

// shorten copies entries for the index, cutting long values to
// maxShownValue bytes followed by "…".
func shorten(entries []rules.Entry) []rules.Entry {
	out := slices.Clone(entries)
	for i, e := range out {
		if len(e.Value) > maxShownValue {
			out[i].Value = strings.ToValidUTF8(e.Value[:maxShownValue], "") + "…"
		}
		if len(e.Key) > maxShownValue {
			out[i].Key = strings.ToValidUTF8(e.Key[:maxShownValue], "") + "…"
		}
	}
	return out
}

// Get returns what the index knows of key.
func (x *KeyIndex) Get(key string) (IndexedKey, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	k, ok := x.keys[key]
	if !ok {
		return IndexedKey{}, false
	}
	return *k, true
}

// List returns up to n keys that sort after after (all keys when after is
// ""), in key order, and whether more follow.
func (x *KeyIndex) List(after string, n int) ([]IndexedKey, bool) {
	x.mu.Lock()
	keys := make([]string, 0, len(x.keys))
	for k := range x.keys {
		if k > after {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	more := len(keys) > n
	keys = keys[:min(n, len(keys))]
	out := make([]IndexedKey, len(keys))
	for i, k := range keys {
		out[i] = *x.keys[k]
	}
	x.mu.Unlock()
	return out, more
}

// Len returns how many keys the index holds.
func (x *KeyIndex) Len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.keys)
}

// keys returns the engine's key index, or nil if it has none.
func (o Options) keys() *KeyIndex {
	x, _ := o.Engine.Keys.(*KeyIndex)
	return x
}
