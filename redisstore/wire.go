package redisstore

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"time"
)

// The wire format of a script call (see lua/check.lua): ARGV[1] is the
// pinned time or "", ARGV[2] the number of limit definitions, then the
// definitions, then the number of checks (or refunds, or resets) and one
// argument each: its cost (a little-endian double; not for a reset), for a
// check a flag byte, its number of limits (a byte), and per limit the
// index of its definition and of its key in KEYS (little-endian uint16)
// and its 8-byte hash field. Every key goes once into KEYS.

type op uint8

const (
	opCheck op = iota
	opRefund
	opReset
)

// encode returns the keys and arguments of one call of op deciding ps.
func (s *Store) encode(o op, ps []*part) (keys, args []string) {
	var ibuf [8]*limitInfo
	infos := ibuf[:0]
	n := 0
	for _, p := range ps {
		n += len(p.refs)
	}
	keys = make([]string, 0, n)
	bodies := make([]string, len(ps))
	var b []byte
	for i, p := range ps {
		b = b[:0]
		if o != opReset {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(p.cost)))
		}
		if o == opCheck {
			b = append(b, p.flag)
		}
		b = append(b, byte(len(p.refs)))
		for j := range p.refs {
			r := &p.refs[j]
			di := -1
			for k, in := range infos {
				if in == r.info {
					di = k
					break
				}
			}
			if di < 0 {
				infos = append(infos, r.info)
				di = len(infos) - 1
			}
			ki := indexOf(keys, r.rkey)
			if ki < 0 {
				keys = append(keys, r.rkey)
				ki = len(keys) - 1
			}
			b = binary.LittleEndian.AppendUint16(b, uint16(di+1))
			b = binary.LittleEndian.AppendUint16(b, uint16(ki+1))
			b = append(b, r.field[:]...)
		}
		bodies[i] = string(b)
	}
	args = make([]string, 0, 3+len(infos)+len(ps))
	var pinned string
	var now time.Time
	if s.now != nil {
		now = s.now()
		pinned = strconv.FormatInt(now.UnixNano(), 10)
	}
	args = append(args, pinned, strconv.Itoa(len(infos)))
	for _, in := range infos {
		if in.cal == nil {
			args = append(args, in.def)
			continue
		}
		if now.IsZero() {
			now = time.Now()
		}
		args = append(args, in.calDef(now.UnixNano()))
	}
	args = append(args, strconv.Itoa(len(ps)))
	return keys, append(args, bodies...)
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// A limit's part of a check's reply (lua/check.lua's pack): a byte (1:
// allowed), then remaining, reset-after, retry-after (-1: never) and delay
// as little-endian doubles, durations in the limit's ticks (algo's
// Params.Tick), each below 2⁵³ and so exact.
const limitReplyLen = 1 + 8*4

var errMalformed = errors.New("redisstore: malformed script reply")

// decodeReply splits a check call's reply into each check's results.
func decodeReply(ps []*part, b string) ([][]result, error) {
	out := make([][]result, len(ps))
	for i, p := range ps {
		if len(b) < 1 || b[0] > 1 {
			return nil, errMalformed
		}
		if p.flag == flagCharge {
			// A charge decides nothing: its reply is the byte 1 alone.
			if b[0] != 1 {
				return nil, errMalformed
			}
			p.allowed, b = true, b[1:]
			continue
		}
		p.allowed = b[0] == 1
		b = b[1:]
		rs := p.res[:0]
		if cap(rs) < len(p.refs) {
			rs = make([]result, 0, len(p.refs))
		}
		for j := range p.refs {
			if len(b) < limitReplyLen || b[0] > 1 {
				return nil, errMalformed
			}
			ref := &p.refs[j]
			tick := ref.info.tick
			rs = append(rs, result{
				ref:       ref,
				allowed:   b[0] == 1,
				remaining: int64(f64(b[1:])),
				reset:     ticks(b[9:], tick),
				retry:     ticks(b[17:], tick),
				delay:     ticks(b[25:], tick),
			})
			b = b[limitReplyLen:]
		}
		out[i] = rs
	}
	if len(b) != 0 {
		return nil, errMalformed
	}
	return out, nil
}

// ticks reads a duration as a double of ticks; -1 is never.
func ticks(b string, tick int64) time.Duration {
	v := f64(b)
	if v < 0 {
		return -1
	}
	return time.Duration(int64(v) * tick)
}

func f64(b string) float64 {
	u := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
	return math.Float64frombits(u)
}
