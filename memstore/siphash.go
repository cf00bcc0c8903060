package memstore

import (
	"encoding/binary"
	"math/bits"
)

// sipHash is SipHash-c-d (Aumasson and Bernstein, "SipHash: a fast
// short-input PRF") of s under the key k0, k1. A persistent store hashes
// keys with SipHash-1-3: unlike hash/maphash, whose hashes change from one
// process to the next whatever the seed, it gives the same hash for the
// same key and secret in every process, so saved states can be found
// again; being keyed, it leaves clients no way to make their keys collide
// with another's.
func sipHash(k0, k1 uint64, c, d int, s string) uint64 {
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13) ^ v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16) ^ v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21) ^ v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17) ^ v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	n := len(s)
	for ; len(s) >= 8; s = s[8:] {
		m := binary.LittleEndian.Uint64([]byte(s[:8]))
		v3 ^= m
		for range c {
			round()
		}
		v0 ^= m
	}
	b := uint64(n) << 56
	for i := len(s) - 1; i >= 0; i-- {
		b |= uint64(s[i]) << (8 * i)
	}
	v3 ^= b
	for range c {
		round()
	}
	v0 ^= b
	v2 ^= 0xff
	for range d {
		round()
	}
	return v0 ^ v1 ^ v2 ^ v3
}
