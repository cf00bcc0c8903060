package rules_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/memstore"
	"github.com/bouncerhq/bouncer/rules"
	"github.com/bouncerhq/bouncer/storetest"
)

// newEngine loads the config at path and serves it from a memory store on
// a fake clock that both the store and the engine read.
func newEngine(t *testing.T, path string) (*rules.Engine, *storetest.Clock) {
	t.Helper()
	c, err := rules.Load(path)
	if err != nil {
		t.Fatalf("Load(%s): %v", path, err)
	}
	clock := storetest.NewClock(storetest.Start.Add(10 * time.Second))
	st := memstore.New(memstore.Options{Now: clock.Now})
	t.Cleanup(func() { st.Close() })
	e := rules.NewEngine(c, st)
	e.Now = clock.Now
	return e, clock
}

// desc builds a descriptor from "key=value" pairs ("key=" for an empty
// value).
func desc(pairs ...string) rules.Descriptor {
	var d rules.Descriptor
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		d.Entries = append(d.Entries, rules.Entry{Key: k, Value: v})
	}
	return d
}

func hits(d rules.Descriptor, n uint64) rules.Descriptor {
	d.Hits = &n
	return d
}

func decide(t *testing.T, e *rules.Engine, domain string, ds ...rules.Descriptor) rules.Response {
	t.Helper()
	resp, err := e.Decide(context.Background(), rules.Request{Domain: domain, Descriptors: ds})
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	if len(resp.Statuses) != len(ds) {
		t.Fatalf("got %d statuses, want %d", len(resp.Statuses), len(ds))
	}
	return resp
}

// codes writes statuses as "OK/2" (code and remaining) for compact
// comparison; "OK" alone when no limit applied.
func codes(resp rules.Response) string {
	var b strings.Builder
	b.WriteString(resp.Code.String())
	b.WriteString(":")
	for _, st := range resp.Statuses {
		b.WriteString(" ")
		b.WriteString(st.Code.String())
		switch {
		case st.Unlimited:
			b.WriteString("/unlimited")
		case st.Limit != nil:
			b.WriteString("/")
			b.WriteString(strconv.FormatUint(uint64(st.Remaining), 10))
		}
	}
	return b.String()
}
