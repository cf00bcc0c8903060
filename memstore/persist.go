package memstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/algo"
)

// The state file: a header of headerLen bytes (fileMagic, the format's
// version, the CRC-32C of the body and the body's length, little-endian),
// then the body: the store's SipHash key (see Options.Persistent), then sections of one limit's
// states, each a tagTable byte, the limit's identity, a count and the
// states, and a tagEnd byte. A state is its key's hash and the state as
// the store packs it, in the store's clock's terms (Unix nanoseconds).
const (
	fileMagic   = "BNCRMEM\x00"
	fileVersion = 2
	headerLen   = 24
	tagEnd      = 0
	tagTable    = 1
	tagRecord   = 2       // a record (store.Records): its key and value, each a length and bytes
	maxName     = 1 << 16 // longer limit names mark a damaged file
)

// saveBlock is how many consecutive slots of a words table Save writes
// together; scatter, odd, orders the blocks.
const (
	saveBlock = 64
	scatter   = 0x9E3779B1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// testHookBeforeRename, when set, runs between writing a state file and
// renaming it into place; tests kill the process there.
var testHookBeforeRename func()

// Saved says what Save wrote.
type Saved struct {
	States  int   // (key, limit) states written: those not back to fresh
	Records int   // records (store.Records) written
	Bytes   int64 // the file's size
}

// Save writes every (key, limit) state of s that is not back to fresh to
// the file at path, replacing it only once the new file is whole: it
// writes a temporary file in the same directory, syncs it, renames it
// over path and syncs the directory, so that a crash at any point leaves
// either the old file or the new one (and perhaps a stray temporary file
// named path.*.tmp, which the next save removes). It copies one shard at a time under the shard's lock;
// checks of keys with state go on meanwhile, and other checks wait at
// most for one shard's copy. Save is safe to call concurrently with
// checks, not with another Save to the same path.
func (s *Store) Save(path string) (Saved, error) {
	if s.sip == nil {
		return Saved{}, fmt.Errorf("memstore: save %s: %w", path, errNotPersistent)
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return Saved{}, fmt.Errorf("memstore: save %s: %w", path, err)
	}
	tmp := f.Name()
	saved, err := s.writeState(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && testHookBeforeRename != nil {
		testHookBeforeRename()
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return Saved{}, fmt.Errorf("memstore: save %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return Saved{}, fmt.Errorf("memstore: save %s: sync directory: %w", path, err)
	}
	removeStray(path)
	return saved, nil
}

// removeStray removes the temporary files that saves to path which
// crashed left behind: saves to one path do not run at once, so once
// this one's file is in place every other is a leftover.
func removeStray(path string) {
	stray, _ := filepath.Glob(globEscape(path) + ".*.tmp")
	for _, f := range stray {
		_ = os.Remove(f)
	}
}

// globEscape escapes the characters filepath.Match gives a meaning to.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeState writes the header's room, the body, then the header.
// The body starts with the store's SipHash key: states are held by their
// key's hash, and the store keeps no key strings.
func (s *Store) writeState(f *os.File) (Saved, error) {
	var saved Saved
	if _, err := f.Write(make([]byte, headerLen)); err != nil {
		return saved, err
	}
	crc := crc32.New(castagnoli)
	w := bufio.NewWriterSize(io.MultiWriter(f, crc), 1<<20)
	var buf []byte
	buf = binary.LittleEndian.AppendUint64(buf, s.sip[0])
	buf = binary.LittleEndian.AppendUint64(buf, s.sip[1])
	body := int64(0)
	for i := range s.shards {
		var n int
		buf, n = s.shards[i].appendStates(buf, s.now())
		saved.States += n
		if _, err := w.Write(buf); err != nil {
			return saved, err
		}
		body += int64(len(buf))
		buf = buf[:0]
	}
	buf, saved.Records = s.appendRecords(buf)
	if _, err := w.Write(buf); err != nil {
		return saved, err
	}
	body += int64(len(buf))
	if err := w.WriteByte(tagEnd); err != nil {
		return saved, err
	}
	body++
	if err := w.Flush(); err != nil {
		return saved, err
	}
	h := make([]byte, 0, headerLen)
	h = append(h, fileMagic...)
	h = binary.LittleEndian.AppendUint32(h, fileVersion)
	h = binary.LittleEndian.AppendUint32(h, crc.Sum32())
	h = binary.LittleEndian.AppendUint64(h, uint64(body))
	if _, err := f.WriteAt(h, 0); err != nil {
		return saved, err
	}
	saved.Bytes = headerLen + body
	return saved, nil
}

// appendStates appends a section for each of the shard's tables with the
// states not back to fresh at now, under the shard's lock, and returns
// how many states it appended.
func (sh *shard) appendStates(buf []byte, now int64) ([]byte, int) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	set := sh.tables.Load()
	if set == nil {
		return buf, 0
	}
	total := 0
	for _, t := range set.list {
		var n int
		buf, n = t.appendSection(buf, now)
		total += n
	}
	return buf, total
}

// appendSection appends t's section: its limit, its count and its states.
func (t *table) appendSection(buf []byte, now int64) ([]byte, int) {
	buf = append(buf, tagTable)
	buf = appendLimit(buf, &t.limit)
	at := len(buf)
	buf = append(buf, make([]byte, 8)...) // the count, filled in below
	n := 0
	put := func(h uint64, st algo.State) {
		if t.p.Expiry(st) <= now {
			return
		}
		n++
		buf = binary.LittleEndian.AppendUint64(buf, h)
		buf = appendState(buf, t, st)
	}
	switch {
	case t.one != nil:
		if p := t.one.slots.Load(); p != nil {
			slots := *p
			// Blocks of slots in a scattered order: a file in slot order
			// makes Load insert keys in the order of their home slots,
			// which piles them into ever longer runs of the growing table
			// (a 10 M key load took minutes; docs/benchmarks.md).
			block := min(len(slots), saveBlock)
			blocks := len(slots) / block
			for k := range blocks {
				b := (k * scatter) & (blocks - 1)
				for i := b * block; i < (b+1)*block; i++ {
					if h, v := slots[i].h.Load(), slots[i].v.Load(); h != 0 && isLive(v) {
						put(h, algo.State{T: v})
					}
				}
			}
		}
	case t.two != nil:
		for h, v := range t.two {
			put(h, algo.State{T: v[0], N: v[1]})
		}
	default:
		for h, v := range t.log {
			put(h, algo.State{Log: v})
		}
	}
	binary.LittleEndian.PutUint64(buf[at:], uint64(n))
	return buf, n
}

func appendBytes(buf, b []byte) []byte {
	return append(binary.AppendUvarint(buf, uint64(len(b))), b...)
}

func appendState(buf []byte, t *table, st algo.State) []byte {
	switch {
	case t.one != nil:
		return binary.AppendVarint(buf, st.T)
	case t.two != nil:
		return binary.AppendVarint(binary.AppendVarint(buf, st.T), st.N)
	}
	buf = binary.AppendUvarint(buf, uint64(len(st.Log)))
	for _, e := range st.Log {
		buf = binary.AppendVarint(binary.AppendVarint(buf, e.At), e.N)
	}
	return buf
}

// appendLimit appends the fields of a limit's identity (see identity).
// A field added to bouncer.Limit must be added here, with a new
// fileVersion.
func appendLimit(buf []byte, l *bouncer.Limit) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(l.Name)))
	buf = append(buf, l.Name...)
	buf = append(buf, byte(l.Algorithm))
	buf = binary.AppendVarint(buf, l.Rate)
	buf = binary.AppendVarint(buf, int64(l.Period))
	buf = binary.AppendVarint(buf, l.Burst)
	var flags byte
	if l.Shape {
		flags |= 1
	}
	if l.ChargeDenied {
		flags |= 2
	}
	buf = append(buf, flags, byte(l.Calendar.Unit))
	if l.Calendar.Unit != 0 {
		buf = binary.AppendUvarint(buf, uint64(len(l.Calendar.Zone)))
		buf = append(buf, l.Calendar.Zone...)
		buf = binary.AppendVarint(buf, int64(l.Calendar.Anchor))
	}
	return buf
}

// errNotPersistent is Save's and Load's error on a store made without
// Options.Persistent.
var errNotPersistent = errors.New("the store was made without Options.Persistent")

// errEmpty is Load's error on a store that already holds state.
var errEmpty = errors.New("the store already holds state: load into a new store")
