package redisstore

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"

	"github.com/bouncerhq/bouncer"
)

// digest is what the store keeps of a key: the bucket it belongs to and
// its field within the bucket's hash. Keys are hashed with SHA-256, which
// every instance computes alike and no client can aim at a collision
// with.
type digest struct {
	bucket uint64
	field  [8]byte
}

func digestOf(key string, buckets uint64) digest {
	// The key is copied to the stack (up to 128 bytes, more than most
	// keys take) rather than to the heap, as []byte(key) would beyond 32.
	var a [128]byte
	sum := sha256.Sum256(append(a[:0], key...))
	d := digest{bucket: binary.BigEndian.Uint64(sum[0:8]) & (buckets - 1)}
	copy(d.field[:], sum[8:16])
	return d
}

// limitID names a limit in Redis keys: a digest of everything that
// shapes its state (not its OnStoreError), so that changing a limit starts
// it afresh and limits of one key never share state. ChargeDenied, which
// packs counts differently, is part of it only when set, so that the ids
// of the limits without it stay what they were.
func limitID(l bouncer.Limit) string {
	s := l.Name + "\x00" + l.Algorithm.String() + "\x00" +
		strconv.FormatInt(l.Rate, 10) + "\x00" +
		strconv.FormatInt(int64(l.Period), 10) + "\x00" +
		strconv.FormatInt(l.Burst, 10) + "\x00" +
		strconv.FormatBool(l.Shape)
	if l.ChargeDenied {
		s += "\x00charge_denied"
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

// hashKey is the Redis hash of a limit's one-word states in a bucket.
func hashKey(prefix, lid string, bucket uint64) string {
	return prefix + ":" + lid + ":{" + strconv.FormatUint(bucket, 10) + "}"
}

// hashField returns hashKey(prefix, lid, d.bucket) and d's field in that
// hash. Every check needs them: they are made in one allocation.
func hashField(prefix, lid string, d digest) (key, field string) {
	var a [128]byte // a prefix of at most 64 bytes leaves room
	b := append(a[:0], prefix...)
	b = append(b, ':')
	b = append(b, lid...)
	b = append(b, ":{"...)
	b = strconv.AppendUint(b, d.bucket, 10)
	b = append(b, '}')
	b = append(b, d.field[:]...)
	s := string(b)
	n := len(s) - len(d.field)
	return s[:n], s[n:]
}

// logKey is the Redis string of a log limit's state for one key.
func logKey(prefix, lid string, d digest) string {
	return hashKey(prefix, lid, d.bucket) + ":" + hex.EncodeToString(d.field[:])
}
