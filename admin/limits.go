package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/rules"
)

// LimitsChange is one change of a key's runtime limits, for the audit:
// who asked (the request's by, and its address), when, the key, and its
// rates before and after (nil: none, the rule's apply).
type LimitsChange struct {
	Action     string // "set" or "delete"
	By, Remote string
	At         time.Time
	Domain     string
	Rule       string
	Key        string
	Old, New   map[string]string // by limit name, as the config writes them
}

// LimitsView is a key's runtime limits as the admin API shows them:
// each rate as its config writes it (a budget as an amount of its
// currency), and who set them when; Custom nil when the key has none.
type LimitsView struct {
	Key       string           `json:"key"`
	Domain    string           `json:"domain"`
	Rule      string           `json:"rule"`
	Custom    *CustomView      `json:"custom"`
	Overrides map[string]Bound `json:"overrides"` // what the rule lets a key set, by limit name
	Limits    []LimitStatus    `json:"limits"`    // the limits its next check is decided under, and their state
}

// CustomView is a key's runtime limits.
type CustomView struct {
	Rates map[string]string `json:"rates"`
	By    string            `json:"by"`
	At    time.Time         `json:"at"`
}

// Bound is the range a rule lets a key's runtime rate for one limit
// take.
type Bound struct {
	Min string `json:"min"`
	Max string `json:"max"`
}

// limitsBody is what PUT /v1/limits takes.
type limitsBody struct {
	Rates map[string]json.Number `json:"rates"`
	By    string                 `json:"by"`
}

// maxLimitsBody bounds PUT /v1/limits's body.
const maxLimitsBody = 64 << 10

func (o Options) limits(w http.ResponseWriter, r *http.Request) {
	k, ok := findKey(w, r, o)
	if !ok {
		return
	}
	if k.Rule == nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "the key has no rule whose limits it could override")
		return
	}
	switch r.Method {
	case http.MethodGet:
		o.showLimits(w, r, k)
	case http.MethodPut:
		o.setLimits(w, r, k)
	case http.MethodDelete:
		o.deleteLimits(w, r, k)
	}
}

func (o Options) showLimits(w http.ResponseWriter, r *http.Request, k rules.KeyInfo) {
	c, had, err := o.Engine.Limits(r.Context(), k)
	if err != nil {
		writeLimitsError(w, err)
		return
	}
	var ok bool
	v := LimitsView{Key: k.Key, Domain: k.Domain, Rule: k.Rule.Label(), Overrides: map[string]Bound{}}
	for name, b := range k.Rule.Overrides {
		v.Overrides[name] = Bound{Min: k.Rule.FormatRate(b.Min), Max: k.Rule.FormatRate(b.Max)}
	}
	if had {
		v.Custom = &CustomView{Rates: amounts(k.Rule, c.Rates), By: c.By, At: c.At}
	}
	if v.Limits, ok = o.states(w, r, k); ok {
		writeJSON(w, http.StatusOK, v)
	}
}

func (o Options) setLimits(w http.ResponseWriter, r *http.Request, k rules.KeyInfo) {
	if !o.credentialed(w) {
		return
	}
	var in limitsBody
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxLimitsBody))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	err := dec.Decode(&in)
	if _, end := dec.Token(); err == nil && end != io.EOF {
		err = errors.New("data after the object")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "malformed JSON: want {\"rates\": {\"<limit>\": <rate or amount>}, \"by\": \"<who>\"}: "+err.Error())
		return
	}
	if strings.TrimSpace(in.By) == "" || len(in.By) > 256 {
		writeError(w, http.StatusBadRequest, "invalid_request", "by: required, at most 256 bytes: who makes the change, for the audit")
		return
	}
	rates := map[string]int64{}
	for name, n := range in.Rates {
		v, err := k.Rule.ParseRate(n.String())
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("rates.%s: %v", name, err))
			return
		}
		rates[name] = v
	}
	old, had, err := o.Engine.SetLimits(r.Context(), k, rates, in.By)
	if err != nil {
		writeLimitsError(w, err)
		return
	}
	o.audit(r, "set", k, in.By, old.Rates, had, rates)
	o.showLimits(w, r, k)
}

func (o Options) deleteLimits(w http.ResponseWriter, r *http.Request, k rules.KeyInfo) {
	if !o.credentialed(w) {
		return
	}
	by := r.URL.Query().Get("by")
	if strings.TrimSpace(by) == "" || len(by) > 256 {
		writeError(w, http.StatusBadRequest, "invalid_request", "by: required (?by=), at most 256 bytes: who makes the change, for the audit")
		return
	}
	old, had, err := o.Engine.DeleteLimits(r.Context(), k)
	if err != nil {
		writeLimitsError(w, err)
		return
	}
	if had {
		o.audit(r, "delete", k, by, old.Rates, true, nil)
	}
	o.showLimits(w, r, k)
}

// credentialed answers 403 unless the admin API's writes need a token:
// runtime limits change what a key may spend.
func (o Options) credentialed(w http.ResponseWriter) bool {
	if !o.Credentials {
		writeError(w, http.StatusForbidden, "credentials_required", "runtime limits change what a key may spend: give the admin API's writes a token (--admin-token-file) first")
		return false
	}
	return true
}

// audit logs a change at info and hands it to Options.OnLimitsChange.
func (o Options) audit(r *http.Request, action string, k rules.KeyInfo, by string, old map[string]int64, had bool, now map[string]int64) {
	c := LimitsChange{Action: action, By: by, Remote: r.RemoteAddr, At: time.Now().UTC(), Domain: k.Domain, Rule: k.Rule.Label(), Key: k.Key,
		New: amounts(k.Rule, now)}
	if had {
		c.Old = amounts(k.Rule, old)
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	log.Info("runtime limits "+action, "by", c.By, "remote", c.Remote, "domain", c.Domain, "rule", c.Rule, "key", c.Key, "old", rateList(c.Old), "new", rateList(c.New))
	if o.OnLimitsChange != nil {
		o.OnLimitsChange(c)
	}
}

func writeLimitsError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, bouncer.ErrInvalidRequest):
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
	case errors.Is(err, errors.ErrUnsupported):
		writeError(w, http.StatusNotImplemented, "unsupported", err.Error())
	default:
		writeError(w, storeStatus(err), "store_unavailable", err.Error())
	}
}

func amounts(rule *rules.Rule, rates map[string]int64) map[string]string {
	if rates == nil {
		return nil
	}
	out := make(map[string]string, len(rates))
	for name, v := range rates {
		out[name] = rule.FormatRate(v)
	}
	return out
}

// rateList writes rates in name order, "month=100.00 day=5.00", or
// "none".
func rateList(rates map[string]string) string {
	if rates == nil {
		return "none"
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(rates)) {
		parts = append(parts, name+"="+rates[name])
	}
	return strings.Join(parts, " ")
}
