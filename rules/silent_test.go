package rules_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/rules"
)

// logTo makes e log, at every level, into a buffer it returns.
func logTo(e *rules.Engine) *bytes.Buffer {
	var buf bytes.Buffer
	e.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	return &buf
}

// A domain the config lacks is answered OK, with no limit, and logged
// once per domain: the first MaxLoggedDomains of them, then one line.
func TestUnknownDomainIsLogged(t *testing.T) {
	for _, reject := range []bool{false, true} {
		t.Run(fmt.Sprintf("reject=%v", reject), func(t *testing.T) {
			e, _ := newEngine(t, "testdata/envoy.yaml")
			e.RejectUnknownDomains = reject
			buf := logTo(e)
			var observed []string
			e.Observe = func(domain string, _ *rules.Response, _ error) { observed = append(observed, domain) }
			req := func(domain string) {
				_, err := e.Decide(context.Background(), rules.Request{Domain: domain, Descriptors: []rules.Descriptor{desc("zone=a")}})
				if want := reject && domain != "edge"; (err != nil) != want {
					t.Fatalf("Decide(%q): got error %v, want one: %v", domain, err, want)
				}
			}
			req("Edge")
			req("Edge")
			req("edge") // defined: not logged
			answer := `"answered OK with no limit"`
			if reject {
				answer = "rejected"
			}
			want := `level=WARN msg="request for a domain the config does not define (logged once per domain)" domain=Edge answer=` + answer + ` did_you_mean=edge` + "\n"
			if got := buf.String(); got != want {
				t.Fatalf("log: got %q, want %q", got, want)
			}
			if got, want := strings.Join(observed, ","), ",,edge"; got != want {
				t.Errorf("Observe's domains: got %q, want %q", got, want)
			}

			buf.Reset()
			for i := range rules.MaxLoggedDomains + 5 {
				req(fmt.Sprintf("d%d", i))
			}
			lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
			// Edge was the first of the MaxLoggedDomains.
			if got, want := len(lines), rules.MaxLoggedDomains; got != want {
				t.Fatalf("got %d lines, want %d:\n%s", got, want, buf)
			}
			if got, want := lines[len(lines)-1], `level=WARN msg="more unknown domains requested; no more are logged (see bouncer_unknown_domain_requests_total)" logged=100`; got != want {
				t.Errorf("last line: got %q, want %q", got, want)
			}
			if got, want := lines[0], `level=WARN msg="request for a domain the config does not define (logged once per domain)" domain=d0 answer=`+answer; got != want {
				t.Errorf("first line: got %q, want %q", got, want)
			}
		})
	}
}

// A descriptor whose rule another rule of the request replaces says so:
// its Status names the rule and is Replaced, and a debug line says by
// which rule. So does a descriptor that carries only the plan entry.
func TestSilentNoLimitIsExplained(t *testing.T) {
	tests := []struct {
		name         string
		file, domain string
		ds           []rules.Descriptor
		wantCodes    string
		wantReplaced []bool
		wantRule     []string // Status.Rule's path, "" for nil
		wantLog      string
	}{
		{
			name: "replaced", file: "testdata/envoy.yaml", domain: "edge",
			ds:           []rules.Descriptor{desc("source=proxy", "dest=vip"), desc("source=proxy", "dest=x")},
			wantCodes:    "OK: OK/3 OK",
			wantReplaced: []bool{false, true},
			wantRule:     []string{"source_proxy.dest_vip", "source_proxy.dest"},
			wantLog:      `level=DEBUG msg="descriptor not limited: its rule is replaced by another rule of the request" domain=edge descriptor=1 rule=source_proxy.dest rule_name=per_dest replaced_by=source_proxy.dest_vip replaced_by_name=""` + "\n",
		},
		{
			name: "not replaced alone", file: "testdata/envoy.yaml", domain: "edge",
			ds:           []rules.Descriptor{desc("source=proxy", "dest=x")},
			wantCodes:    "OK: OK/1",
			wantReplaced: []bool{false},
			wantRule:     []string{"source_proxy.dest"},
		},
		{
			name: "no rule", file: "testdata/envoy.yaml", domain: "edge",
			ds:           []rules.Descriptor{desc("nope=1")},
			wantCodes:    "OK: OK",
			wantReplaced: []bool{false},
			wantRule:     []string{""},
		},
		{
			name: "plan as its own descriptor", file: "testdata/native.yaml", domain: "api",
			ds:           []rules.Descriptor{desc("user_id=alice"), desc("plan=pro")},
			wantCodes:    "OK: OK/1 OK",
			wantReplaced: []bool{false, false},
			wantRule:     []string{"user_id", ""},
			wantLog:      `level=DEBUG msg="descriptor not limited: it carries only the plan entry; the plan entry belongs in the descriptor it qualifies" domain=api descriptor=1 plan_key=plan` + "\n",
		},
		{
			name: "plan in its descriptor", file: "testdata/native.yaml", domain: "api",
			ds:           []rules.Descriptor{desc("user_id=alice", "plan=pro")},
			wantCodes:    "OK: OK/19",
			wantReplaced: []bool{false},
			wantRule:     []string{"user_id"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := newEngine(t, tt.file)
			buf := logTo(e)
			resp := decide(t, e, tt.domain, tt.ds...)
			if got := codes(resp); got != tt.wantCodes {
				t.Errorf("answer: got %q, want %q", got, tt.wantCodes)
			}
			for i := range resp.Statuses {
				st := &resp.Statuses[i]
				if got := st.Replaced(); got != tt.wantReplaced[i] {
					t.Errorf("status %d: Replaced() got %v, want %v", i, got, tt.wantReplaced[i])
				}
				rule := ""
				if st.Rule != nil {
					rule = st.Rule.Path
				}
				if rule != tt.wantRule[i] {
					t.Errorf("status %d: Rule got %q, want %q", i, rule, tt.wantRule[i])
				}
				if st.Replaced() && (st.Limit != nil || st.Remaining != 0 || st.Code != rules.OK) {
					t.Errorf("status %d: got %+v, want OK with no limit and 0 remaining, as envoyproxy/ratelimit answers", i, st)
				}
			}
			if got := buf.String(); got != tt.wantLog {
				t.Errorf("log: got %q, want %q", got, tt.wantLog)
			}
		})
	}
}

// The debug lines cost nothing above Debug: nothing is written.
func TestSilentNoLimitQuietAboveDebug(t *testing.T) {
	e, _ := newEngine(t, "testdata/envoy.yaml")
	var buf bytes.Buffer
	e.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	decide(t, e, "edge", desc("source=proxy", "dest=vip"), desc("source=proxy", "dest=x"))
	if buf.Len() != 0 {
		t.Errorf("log at Info: got %q, want nothing", buf.String())
	}
}

func TestFormatDuration(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{time.Second, "1s"},
		{21 * time.Second, "21s"},
		{90 * time.Second, "1m30s"},
		{time.Minute, "1m"},
		{time.Hour, "1h"},
		{90 * time.Minute, "1h30m"},
		{24 * time.Hour, "1d"},
		{7 * 24 * time.Hour, "7d"},
		{1500 * time.Millisecond, "1.5s"},
	} {
		if got := rules.FormatDuration(tt.d); got != tt.want {
			t.Errorf("FormatDuration(%v): got %q, want %q", tt.d, got, tt.want)
		}
	}
}
