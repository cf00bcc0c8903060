package admin

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/rules"
)

// keyCursorTag starts every key cursor, so that a rule cursor (or any
// other string) is refused rather than misread.
const keyCursorTag = "k1:"

// KeyView is one key as the admin API shows it.
type KeyView struct {
	Key      string        `json:"key"`
	Domain   string        `json:"domain"`
	Rule     string        `json:"rule,omitempty"`
	Entries  []EntryView   `json:"entries"`
	LastSeen time.Time     `json:"last_seen,omitzero"`
	Limits   []LimitStatus `json:"limits,omitempty"`
}

// EntryView is one descriptor entry.
type EntryView struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// LimitStatus is one limit of a key and its state now. Durations are
// written as a config writes them ("1m", "1d", rules.FormatDuration),
// and in seconds.
type LimitStatus struct {
	Name              string  `json:"name"`
	Algorithm         string  `json:"algorithm"`
	Rate              int64   `json:"rate"`
	Period            string  `json:"period"`
	PeriodSeconds     float64 `json:"period_seconds"`
	Burst             int64   `json:"burst,omitempty"`
	Override          bool    `json:"override,omitempty"` // rate is the override the key's last request sent
	Remaining         int64   `json:"remaining"`
	Over              bool    `json:"over"` // counted past the limit (charge_denied), so even a peek is denied
	ResetAfter        string  `json:"reset_after"`
	ResetAfterSeconds float64 `json:"reset_after_seconds"`

	// RetryAfter is how long until a request of cost 1 would pass, left
	// out when one would now; "never" when none can.
	RetryAfter        string  `json:"retry_after,omitempty"`
	RetryAfterSeconds float64 `json:"retry_after_seconds,omitempty"`

	// Budget, for a rule with a price, is the limit in money: its rate
	// and remaining are micro-units of the currency.
	Budget *BudgetView `json:"budget,omitempty"`
}

// BudgetView is a priced limit of a key in its currency, each amount a
// decimal string ("12.50"): what the period allows, what the key spent
// of it so far, and what is left.
type BudgetView struct {
	Currency  string `json:"currency"`
	Limit     string `json:"limit"`
	Spent     string `json:"spent"`
	Remaining string `json:"remaining"`
}

func view(k rules.KeyInfo) KeyView {
	v := KeyView{Key: k.Key, Domain: k.Domain, LastSeen: k.LastSeen, Entries: make([]EntryView, len(k.Entries))}
	if k.Rule != nil {
		v.Rule = k.Rule.Label()
	}
	for i, e := range k.Entries {
		v.Entries[i] = EntryView{Key: e.Key, Value: e.Value}
	}
	return v
}

// listKeys answers one page of the engine's key index, in key order.
func listKeys(w http.ResponseWriter, r *http.Request, o Options) {
	if o.keys() == nil {
		writeError(w, http.StatusNotImplemented, "keys_off", "the key index is off (--admin-keys 0)")
		return
	}
	limit, ok := pageSize(w, r)
	if !ok {
		return
	}
	after := ""
	if c := r.URL.Query().Get("cursor"); c != "" {
		b, err := base64.RawURLEncoding.DecodeString(c)
		if err != nil || !strings.HasPrefix(string(b), keyCursorTag) {
			writeError(w, http.StatusBadRequest, "invalid_request", "cursor: not one this API gave")
			return
		}
		after = strings.TrimPrefix(string(b), keyCursorTag)
	}
	keys, more := o.keys().List(after, limit)
	out := make([]KeyView, len(keys))
	for i, k := range keys {
		out[i] = view(k.KeyInfo)
	}
	next := ""
	if more && len(keys) > 0 {
		next = base64.RawURLEncoding.EncodeToString([]byte(keyCursorTag + keys[len(keys)-1].Key))
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": out, "next_cursor": next})
}

// findKey reads which key a request means: ?key= (one the index lists),
// or ?domain= with one ?entry=key=value per descriptor entry.
func findKey(w http.ResponseWriter, r *http.Request, o Options) (rules.KeyInfo, bool) {
	q := r.URL.Query()
	if key := q.Get("key"); key != "" {
		if o.keys() != nil {
			if k, ok := o.keys().Get(key); ok {
				return k.KeyInfo, true
			}
		}
		writeError(w, http.StatusNotFound, "unknown_key", "the key index does not hold this key; name it by ?domain= and ?entry=key=value instead")
		return rules.KeyInfo{}, false
	}
	domain := q.Get("domain")
	if domain == "" || len(q["entry"]) == 0 {
		writeError(w, http.StatusBadRequest, "invalid_request", "name the key: ?key=, or ?domain= and one ?entry=key=value per descriptor entry")
		return rules.KeyInfo{}, false
	}
	var entries []rules.Entry
	for _, e := range q["entry"] {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			writeError(w, http.StatusBadRequest, "invalid_request", "entry: want key=value, got "+quote(e))
			return rules.KeyInfo{}, false
		}
		entries = append(entries, rules.Entry{Key: k, Value: v})
	}
	k, err := o.Engine.Resolve(domain, entries)
	switch {
	case errors.Is(err, rules.ErrUnknownDomain):
		writeError(w, http.StatusNotFound, "unknown_domain", err.Error())
		return rules.KeyInfo{}, false
	case err != nil:
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return rules.KeyInfo{}, false
	}
	return k, true
}

// keyState shows one key and the state of each of its limits; it charges
// nothing.
func keyState(w http.ResponseWriter, r *http.Request, o Options) {
	k, ok := findKey(w, r, o)
	if !ok {
		return
	}
	v := view(k)
	if v.Limits, ok = o.states(w, r, k); ok {
		writeJSON(w, http.StatusOK, v)
	}
}

// states are the limits k's next check is decided under, its runtime
// limits applied, with their state; false when it answered an error.
func (o Options) states(w http.ResponseWriter, r *http.Request, k rules.KeyInfo) ([]LimitStatus, bool) {
	k, err := o.Engine.ApplyLimits(r.Context(), k)
	if err != nil {
		writeLimitsError(w, err)
		return nil, false
	}
	states, err := o.Engine.State(r.Context(), k)
	if err != nil {
		writeError(w, storeStatus(err), "store_unavailable", err.Error())
		return nil, false
	}
	out := make([]LimitStatus, 0, len(states))
	for _, s := range states {
		out = append(out, limitStatus(k, s))
	}
	return out, true
}

// limitStatus is the state s of one limit of key k.
func limitStatus(k rules.KeyInfo, s rules.LimitState) LimitStatus {
	ls := LimitStatus{
		Name: s.Limit.Name, Algorithm: s.Limit.Algorithm.String(), Rate: s.Limit.Rate,
		Period: rules.FormatDuration(s.Limit.Period), PeriodSeconds: s.Limit.Period.Seconds(), Burst: s.Limit.Burst,
		Override: k.Rule == nil && k.Judge != nil, Remaining: s.Remaining, Over: !s.Allowed,
		ResetAfter: rules.FormatDuration(s.ResetAfter), ResetAfterSeconds: s.ResetAfter.Seconds(),
	}
	switch {
	case s.RetryAfter == bouncer.Never:
		ls.RetryAfter = "never"
	case s.RetryAfter > 0:
		ls.RetryAfter, ls.RetryAfterSeconds = rules.FormatDuration(s.RetryAfter), s.RetryAfter.Seconds()
	}
	if c := s.Limit.Calendar; !c.IsZero() {
		ls.Period = c.String()
	}
	if k.Rule != nil && k.Rule.Prices != nil {
		left := max(s.Remaining, 0)
		ls.Budget = &BudgetView{Currency: k.Rule.Prices.Currency, Limit: rules.FormatMoney(s.Limit.Rate),
			Spent: rules.FormatMoney(s.Limit.Rate - left), Remaining: rules.FormatMoney(left)}
	}
	return ls
}

// resetKey forgets one key's state under every limit it may have been
// counted under: its rule's and every plan's (rules.Engine.Reset).
func resetKey(w http.ResponseWriter, r *http.Request, o Options) {
	k, ok := findKey(w, r, o)
	if !ok {
		return
	}
	if err := o.Engine.Reset(r.Context(), k); err != nil {
		if errors.Is(err, errors.ErrUnsupported) {
			writeError(w, http.StatusNotImplemented, "unsupported", err.Error())
			return
		}
		writeError(w, storeStatus(err), "store_unavailable", err.Error())
		return
	}
	n := 0
	for _, ls := range k.AllLimits() {
		n += len(ls)
	}
	writeJSON(w, http.StatusOK, map[string]any{"reset": k.Key, "limits": n})
}

func storeStatus(err error) int {
	if errors.Is(err, context.DeadlineExceeded) {
		return http.StatusGatewayTimeout
	}
	return http.StatusServiceUnavailable
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]string{"error": code, "message": msg})
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return `"` + s + `"`
}
