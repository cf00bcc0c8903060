//go:build gubernator

package rlsload

import (
	"fmt"

	guber "github.com/gubernator-io/gubernator/v2"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

func init() { workloads[Gubernator] = newGubernator }

// newGubernator returns the GetRateLimits calls of cfg, with one
// RateLimitReq per key: reqs[k] checks keys k, k+1, ... (mod Keys), each
// a token bucket of Limit per Period named Domain_DescriptorKey, with
// behaviour GLOBAL if cfg.Global. An answer must carry one response per
// key, each without error and with Limit as its limit.
func newGubernator(cfg *Config) *workload {
	name := cfg.Domain + "_" + cfg.DescriptorKey
	behavior := guber.Behavior_BATCHING // gubernator's default
	if cfg.Global {
		behavior = guber.Behavior_GLOBAL
	}
	one := make([]*guber.RateLimitReq, cfg.Keys)
	for k := range one {
		one[k] = &guber.RateLimitReq{
			Name:      name,
			UniqueKey: cfg.value(k),
			Hits:      1,
			Limit:     cfg.Limit,
			Duration:  cfg.Period.Milliseconds(),
			Algorithm: guber.Algorithm_TOKEN_BUCKET,
			Behavior:  behavior,
		}
	}
	reqs := make([]proto.Message, cfg.Keys)
	for k := range reqs {
		r := &guber.GetRateLimitsReq{}
		for j := range cfg.Descriptors {
			r.Requests = append(r.Requests, one[(k+j)%cfg.Keys])
		}
		reqs[k] = r
	}
	w := &workload{
		method:  guber.V1_GetRateLimits_FullMethodName,
		reqs:    reqs,
		newResp: func() proto.Message { return new(guber.GetRateLimitsResp) },
	}
	limit, n := cfg.Limit, cfg.Descriptors
	w.judge = func(_ int, m proto.Message) (outcome, error) {
		resp := m.(*guber.GetRateLimitsResp)
		if got := len(resp.GetResponses()); got != n {
			return failed, fmt.Errorf("rlsload: %d rate limit responses, want %d", got, n)
		}
		o := allowed
		for _, r := range resp.GetResponses() {
			switch {
			case r.GetError() != "":
				return failed, fmt.Errorf("rlsload: gubernator: %s", r.GetError())
			case r.GetLimit() != limit:
				return failed, fmt.Errorf("rlsload: limit %d in the answer, want %d", r.GetLimit(), limit)
			case r.GetStatus() == guber.Status_OVER_LIMIT:
				o = denied
			}
		}
		return o, nil
	}
	w.judgeWire = func(_ int, b []byte) (outcome, error) { return judgeGubernatorWire(b, n, limit) }
	w.marshal()
	return w
}

// Field numbers read by judgeGubernatorWire (checked against the
// generated descriptors by TestGubernatorWireFieldNumbers).
const (
	guberRespResponses = 1 // GetRateLimitsResp.responses
	guberRespStatus    = 1 // RateLimitResp.status
	guberRespLimit     = 2 // RateLimitResp.limit
	guberRespError     = 5 // RateLimitResp.error
)

// judgeGubernatorWire judges a marshalled GetRateLimitsResp as
// newGubernator's judge does the message: want responses, each without
// error and with limit as its limit.
func judgeGubernatorWire(b []byte, want int, limit int64) (outcome, error) {
	o := allowed
	var first error // the first response's failure
	count := 0
	for len(b) > 0 {
		num, typ, _, sub, n, err := wireField(b)
		if err != nil {
			return failed, err
		}
		b = b[n:]
		if num != guberRespResponses || typ != protowire.BytesType {
			continue
		}
		count++
		var st guber.Status
		var lim int64
		var errStr []byte
		for len(sub) > 0 {
			num, typ, v, s, n, err := wireField(sub)
			if err != nil {
				return failed, err
			}
			sub = sub[n:]
			switch {
			case num == guberRespStatus && typ == protowire.VarintType:
				st = guber.Status(int32(v))
			case num == guberRespLimit && typ == protowire.VarintType:
				lim = int64(v)
			case num == guberRespError && typ == protowire.BytesType:
				errStr = s
			}
		}
		if first != nil {
			continue
		}
		switch {
		case len(errStr) > 0:
			first = fmt.Errorf("rlsload: gubernator: %s", errStr)
		case lim != limit:
			first = fmt.Errorf("rlsload: limit %d in the answer, want %d", lim, limit)
		case st == guber.Status_OVER_LIMIT:
			o = denied
		}
	}
	if count != want {
		return failed, fmt.Errorf("rlsload: %d rate limit responses, want %d", count, want)
	}
	if first != nil {
		return failed, first
	}
	return o, nil
}
