package memstore

import "testing"

// The reference vectors of SipHash-2-4 from its paper's appendix: key
// 00 01 … 0f, messages 00 01 … of each length.
func TestSipHashVectors(t *testing.T) {
	const k0, k1 = 0x0706050403020100, 0x0f0e0d0c0b0a0908
	msg := make([]byte, 16)
	for i := range msg {
		msg[i] = byte(i)
	}
	for _, c := range []struct {
		n    int
		want uint64
	}{{0, 0x726fdb47dd0e0e31}, {1, 0x74f839c593dc67fd}, {8, 0x93f5f5799a932462}, {15, 0xa129ca6149be45e5}} {
		if got := sipHash(k0, k1, 2, 4, string(msg[:c.n])); got != c.want {
			t.Errorf("SipHash-2-4 of %d bytes = %#x, want %#x", c.n, got, c.want)
		}
	}
}
