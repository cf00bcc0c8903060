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
// it afresh and limits of one key never share state. The version tag
// changes with the layout of stored states, so that a store never reads a
// state an older one wrote in another layout.
func limitID(l bouncer.Limit) string {
	s := "v2\x00" + l.Name + "\x00" + l.Algorithm.String() + "\x00" +
		strconv.FormatInt(l.Rate, 10) + "\x00" +
		strconv.FormatInt(int64(l.Period), 10) + "\x00" +
		strconv.FormatInt(l.Burst, 10) + "\x00" +
		strconv.FormatBool(l.Shape)
	if l.ChargeDenied {
		s += "\x00charge_denied"
	}
	if !l.Calendar.IsZero() {
		s += "\x00" + l.Calendar.String()
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

// Keys. A bucket's hash is "<prefix>:<limit id>:{<tag>}<bucket>", and a
// log limit's key of its own that hash's name, ":" and the key's field in
// hex. The hash tag is that of the bucket's group, bucket mod groups: a
// Cluster puts every key of a group, of every limit, in one slot, so that
// the checks of one group can share a script call (a script's keys must
// share a slot). The tags are chosen so that the groups' slots spread
// evenly over the 16384 (see groupTags).

// hashKey is the Redis hash of a limit's one-word states in a bucket.
func (s *Store) hashKey(lid string, bucket uint64) string {
	var a [128]byte // a prefix of at most 64 bytes leaves room
	return string(s.appendHashKey(a[:0], lid, bucket))
}

func (s *Store) appendHashKey(b []byte, lid string, bucket uint64) []byte {
	b = append(b, s.prefix...)
	b = append(b, ':')
	b = append(b, lid...)
	b = append(b, ":{"...)
	b = append(b, s.tags[bucket%uint64(len(s.tags))]...)
	b = append(b, '}')
	return strconv.AppendUint(b, bucket, 10)
}

// logKey is the Redis sorted set of a log limit's state for one key.
func (s *Store) logKey(lid string, d digest) string {
	var a [160]byte
	b := s.appendHashKey(a[:0], lid, d.bucket)
	b = append(b, ':')
	b = hex.AppendEncode(b, d.field[:])
	return string(b)
}

// groupOf is the group of a bucket.
func (s *Store) groupOf(bucket uint64) int { return int(bucket % uint64(len(s.tags))) }

// groupTags returns n hash tags whose Cluster slots lie one in each of n
// equal slices of the slot space, in order: a Cluster that splits its
// slots evenly in contiguous ranges, as redis-cli --cluster create does,
// gets its share of the groups on every master. The tags are the shortest
// decimal numbers that land in each slice.
func groupTags(n int) []string {
	tags := make([]string, n)
	found := 0
	for i := 0; found < n; i++ {
		t := strconv.Itoa(i)
		g := int(keySlot("{"+t+"}")) * n / slotCount
		if tags[g] == "" {
			tags[g] = t
			found++
		}
	}
	return tags
}
