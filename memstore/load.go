package memstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"time"

	"github.com/bouncerhq/bouncer"
	"github.com/bouncerhq/bouncer/algo"
	"github.com/bouncerhq/bouncer/calendar"
	"github.com/bouncerhq/bouncer/store"
)

// Loaded says what Load restored.
type Loaded struct {
	States  int // states restored
	Fresh   int // states in the file back to fresh by now, left out
	Records int // records (store.Records) restored
}

// Load restores the states that Save wrote to the file at path into s,
// which must be new: Load returns an error if s holds state, and must
// return before s's first check. States that are back to fresh by s's
// clock are left out, so a restore later in time is exact: a window that
// ended meanwhile starts afresh, a bucket has refilled. A file that is not
// a state file, of another version, truncated or damaged (its checksum
// does not match) is refused with an error naming the file and the
// problem, and s is left empty. Past MaxKeys, states are evicted as
// checks would evict them.
func (s *Store) Load(path string) (Loaded, error) {
	if s.sip == nil {
		return Loaded{}, fmt.Errorf("memstore: load %s: %w", path, errNotPersistent)
	}
	if s.Len() > 0 {
		return Loaded{}, fmt.Errorf("memstore: load %s: %w", path, errEmpty)
	}
	f, err := os.Open(path)
	if err != nil {
		return Loaded{}, fmt.Errorf("memstore: load %s: %w", path, err)
	}
	defer f.Close()
	bodyLen, version, err := checkFile(f)
	if err != nil {
		return Loaded{}, fmt.Errorf("memstore: load %s: %w", path, err)
	}
	if _, err := f.Seek(headerLen, io.SeekStart); err != nil {
		return Loaded{}, fmt.Errorf("memstore: load %s: %w", path, err)
	}
	r := &countReader{r: bufio.NewReaderSize(f, 1<<20), end: bodyLen, version: version}
	ld, err := s.readBody(r)
	if err == nil && r.n != bodyLen {
		err = fmt.Errorf("the body ends at byte %d of %d", r.n, bodyLen)
	}
	if err != nil {
		s.clear()
		return Loaded{}, fmt.Errorf("memstore: load %s: malformed body: %w", path, err)
	}
	return ld, nil
}

// checkFile reads the header and the whole body, and returns the body's
// length and the format's version if the magic, version, length and
// checksum are right. Version 1, from before calendar limits, reads too.
func checkFile(f *os.File) (int64, uint32, error) {
	h := make([]byte, headerLen)
	if n, err := io.ReadFull(f, h); err != nil {
		return 0, 0, fmt.Errorf("truncated: %d bytes, shorter than the %d-byte header", n, headerLen)
	}
	if !bytes.Equal(h[:8], []byte(fileMagic)) {
		return 0, 0, errors.New("not a memory store state file (wrong magic)")
	}
	v := binary.LittleEndian.Uint32(h[8:])
	if v != fileVersion && v != 1 {
		return 0, 0, fmt.Errorf("format version %d, this build reads versions 1 and %d", v, fileVersion)
	}
	sum := binary.LittleEndian.Uint32(h[12:])
	bodyLen := int64(binary.LittleEndian.Uint64(h[16:]))
	crc := crc32.New(castagnoli)
	n, err := io.Copy(crc, f)
	switch {
	case err != nil:
		return 0, 0, err
	case n < bodyLen:
		return 0, 0, fmt.Errorf("truncated: the body holds %d bytes, the header says %d", n, bodyLen)
	case n > bodyLen:
		return 0, 0, fmt.Errorf("%d bytes past the end of the body the header gives", n-bodyLen)
	case crc.Sum32() != sum:
		return 0, 0, fmt.Errorf("corrupt: the body's checksum is %08x, the header says %08x", crc.Sum32(), sum)
	}
	return bodyLen, v, nil
}

// countReader reads the body, counting its bytes up to end.
type countReader struct {
	r       *bufio.Reader
	n       int64
	end     int64
	version uint32 // the file format's
}

func (c *countReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countReader) uint64() (uint64, error) {
	var b [8]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// readBody reads the hash key and the sections, and stores their states.
func (s *Store) readBody(r *countReader) (Loaded, error) {
	var ld Loaded
	var key [2]uint64
	for i := range key {
		var err error
		if key[i], err = r.uint64(); err != nil {
			return ld, err
		}
	}
	*s.sip = key
	for {
		tag, err := r.ReadByte()
		switch {
		case err != nil:
			return ld, err
		case tag == tagEnd:
			return ld, nil
		case tag == tagRecord && r.version >= 2:
			if err := s.readRecord(r); err != nil {
				return ld, err
			}
			ld.Records++
			continue
		case tag != tagTable:
			return ld, fmt.Errorf("unknown section tag %d at byte %d", tag, r.n-1)
		}
		if err := s.readSection(r, &ld); err != nil {
			return ld, err
		}
	}
}

// readRecord reads one record (store.Records) and keeps it.
func (s *Store) readRecord(r *countReader) error {
	var kv [2][]byte
	for i, bound := range []int{store.MaxRecordKey, store.MaxRecordValue} {
		n, err := binary.ReadUvarint(r)
		if err != nil {
			return err
		}
		if n > uint64(bound) {
			return fmt.Errorf("a record of %d bytes", n)
		}
		kv[i] = make([]byte, n)
		if _, err := io.ReadFull(r, kv[i]); err != nil {
			return err
		}
	}
	return s.PutRecord(context.Background(), string(kv[0]), kv[1])
}

// readSection reads one limit's states and stores those not back to fresh.
func (s *Store) readSection(r *countReader, ld *Loaded) error {
	l, err := readLimit(r)
	if err != nil {
		return err
	}
	if err := l.Validate(); err != nil {
		return err
	}
	shape := newTable(l) // says how the states are packed and when they expire
	n, err := r.uint64()
	if err != nil {
		return err
	}
	for ; n > 0; n-- {
		h, err := r.uint64()
		if err != nil {
			return err
		}
		st, err := readState(r, shape)
		if err != nil {
			return err
		}
		if h == 0 {
			return errors.New("a zero key hash")
		}
		sh := &s.shards[s.shardOf(h)]
		sh.mu.Lock()
		now := s.now()
		if shape.p.Expiry(st) <= now {
			ld.Fresh++
		} else {
			t := sh.table(&l, true)
			_, known := t.load(h)
			sh.save(t, h, st, now, known)
			ld.States++
		}
		sh.mu.Unlock()
	}
	return nil
}

func readLimit(r *countReader) (bouncer.Limit, error) {
	var l bouncer.Limit
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return l, err
	}
	if n > maxName {
		return l, fmt.Errorf("a limit name of %d bytes", n)
	}
	name := make([]byte, n)
	if _, err := io.ReadFull(r, name); err != nil {
		return l, err
	}
	l.Name = string(name)
	alg, err := r.ReadByte()
	if err != nil {
		return l, err
	}
	l.Algorithm = bouncer.Algorithm(alg)
	var period int64
	for _, v := range []*int64{&l.Rate, &period, &l.Burst} {
		if *v, err = binary.ReadVarint(r); err != nil {
			return l, err
		}
	}
	l.Period = time.Duration(period)
	flags, err := r.ReadByte()
	if err != nil {
		return l, err
	}
	l.Shape, l.ChargeDenied = flags&1 != 0, flags&2 != 0
	if r.version < 2 {
		return l, nil // before calendar limits
	}
	unit, err := r.ReadByte()
	if err != nil || unit == 0 {
		return l, err
	}
	l.Calendar.Unit = calendar.Unit(unit)
	if n, err = binary.ReadUvarint(r); err != nil {
		return l, err
	}
	if n > maxName {
		return l, fmt.Errorf("a time zone name of %d bytes", n)
	}
	zone := make([]byte, n)
	if _, err := io.ReadFull(r, zone); err != nil {
		return l, err
	}
	l.Calendar.Zone = string(zone)
	anchor, err := binary.ReadVarint(r)
	if err != nil {
		return l, err
	}
	if anchor < 0 || anchor > 31 {
		return l, fmt.Errorf("a calendar anchor of %d", anchor)
	}
	l.Calendar.Anchor = int(anchor)
	return l, nil
}

func readState(r *countReader, t *table) (algo.State, error) {
	var st algo.State
	var err error
	switch {
	case t.one != nil:
		st.T, err = binary.ReadVarint(r)
		return st, err
	case t.two != nil:
		if st.T, err = binary.ReadVarint(r); err != nil {
			return st, err
		}
		st.N, err = binary.ReadVarint(r)
		return st, err
	}
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return st, err
	}
	if n > uint64(t.capacity)+1 || n > uint64(r.end-r.n)/2 {
		return st, fmt.Errorf("a log of %d entries, for a capacity of %d, with %d bytes left", n, t.capacity, r.end-r.n)
	}
	st.Log = make([]algo.Entry, n)
	for i := range st.Log {
		if st.Log[i].At, err = binary.ReadVarint(r); err != nil {
			return st, err
		}
		if st.Log[i].N, err = binary.ReadVarint(r); err != nil {
			return st, err
		}
	}
	return st, nil
}

// clear forgets every state, for a load that failed half-way.
func (s *Store) clear() {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.tables.Store(nil)
		sh.count = 0
		sh.mu.Unlock()
	}
}
