package rlsload

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// This file is the Lean client's transport: unary gRPC calls over one
// HTTP/2 connection without TLS (h2c with prior knowledge, as gRPC
// clients speak to servers without TLS), written directly on
// golang.org/x/net/http2's Framer and hpack.
//
// A call registers a stream (the next odd id) and queues its two frames:
// one HEADERS with END_HEADERS, whose HPACK block is encoded once per
// method without the dynamic table (so it is valid whatever was sent
// before, and is sent verbatim), and one DATA with END_STREAM, the
// request marshalled in advance behind gRPC's 5-byte message prefix. A
// writer goroutine per connection drains the queue into a buffered
// writer and flushes once nothing more is queued (after yielding once, so
// that the callers a burst of answers woke queue their next calls first),
// so that a burst of calls costs one write. A reader goroutine per
// connection decodes the server's frames, with one HPACK decoder for the
// connection's life (the server may index its headers), and completes a
// call when its stream ends: its answer is the DATA, its outcome the
// trailers' grpc-status and grpc-message.
//
// Flow control: the server's connection and stream windows bound the
// DATA sent (WINDOW_UPDATE and SETTINGS_INITIAL_WINDOW_SIZE move them);
// the client announces 1 GiB stream windows and raises its connection
// window to 1 GiB, returning it with a WINDOW_UPDATE per MiB of DATA
// received (answers are small, so a stream never gets near its window).
// The client acknowledges the server's SETTINGS and PINGs (grpc-go
// servers ping to estimate the bandwidth-delay product) and keeps to its
// SETTINGS_MAX_CONCURRENT_STREAMS. After a GOAWAY the calls on streams
// the server will not process fail, those it will are awaited, and new
// calls go to a new connection; a broken connection fails every call on
// it. Each call has a deadline (Config.CallTimeout, sent as grpc-timeout
// as grpc-go does, and checked by a sweeper per connection every tenth of
// the timeout, at most 100 ms apart, rather than by a timer per call)
// and ends early when its context is done; either resets its stream. A
// new connection waits for the server's SETTINGS before it takes calls,
// so that the first calls keep to its limits too.

const (
	// h2Window is the flow-control window the client announces for each
	// stream and gives the connection.
	h2Window = 1 << 30
	// h2WindowTopUp is how many bytes of DATA the client receives before
	// it returns them to the connection's window.
	h2WindowTopUp = 1 << 20
	// h2MaxMessage bounds the DATA of one answer, as grpc-go's default
	// limit on received messages does.
	h2MaxMessage = 4 << 20
	// h2BufSize is the size of a connection's read and write buffers.
	h2BufSize = 32 << 10
)

// epoch is the origin of now.
var epoch = time.Now()

// now returns monotonic nanoseconds.
func now() int64 { return int64(time.Since(epoch)) }

// errDraining says that a connection takes no new streams: it had a
// GOAWAY, ran out of stream ids, or broke.
var errDraining = errors.New("rlsload: connection draining")

// h2Client makes unary calls to one address on one HTTP/2 connection at
// a time, dialled on the first call and again once the connection breaks
// or drains.
type h2Client struct {
	addr    string
	timeout time.Duration

	cur atomic.Pointer[h2Conn] // the connection new calls take

	mu     sync.Mutex // guards dialling, conns and closed
	conns  map[*h2Conn]struct{}
	closed bool
}

func newH2Client(addr string, timeout time.Duration) *h2Client {
	return &h2Client{addr: addr, timeout: timeout, conns: map[*h2Conn]struct{}{}}
}

// conn returns the connection new calls take, dialling one if needed.
func (cl *h2Client) conn(ctx context.Context) (*h2Conn, error) {
	if c := cl.cur.Load(); c != nil && !c.unusable.Load() {
		return c, nil
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.closed {
		return nil, status.Error(codes.Canceled, "rlsload: client closed")
	}
	if c := cl.cur.Load(); c != nil && !c.unusable.Load() {
		return c, nil
	}
	c, err := dialH2(ctx, cl.addr, cl.timeout, cl.forget)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "rlsload: connecting to %s: %v", cl.addr, err)
	}
	cl.conns[c] = struct{}{}
	cl.cur.Store(c)
	return c, nil
}

// forget drops c, which has closed.
func (cl *h2Client) forget(c *h2Conn) {
	cl.mu.Lock()
	delete(cl.conns, c)
	cl.mu.Unlock()
}

// Close closes every connection, failing the calls on them, and waits
// for their goroutines.
func (cl *h2Client) Close() error {
	cl.mu.Lock()
	cl.closed = true
	conns := make([]*h2Conn, 0, len(cl.conns))
	for c := range cl.conns {
		conns = append(conns, c)
	}
	cl.mu.Unlock()
	for _, c := range conns {
		c.fail(status.Error(codes.Canceled, "rlsload: client closed"))
		c.wg.Wait()
	}
	return nil
}

// h2Stream is one call. The caller owns it but for the fields the
// connection sets while the stream is registered (under the connection's
// mu), until it signals done.
type h2Stream struct {
	id       uint32
	deadline int64 // now() after which the call fails
	done     chan struct{}

	err         error  // the call failed outside gRPC: transport, deadline, reset
	headers     bool   // the response headers came
	httpStatus  string // :status
	contentType string
	grpcStatus  string // "" if none came
	grpcMessage string
	data        []byte // the DATA received
}

func newH2Stream() *h2Stream { return &h2Stream{done: make(chan struct{}, 1)} }

// reset readies s for another call.
func (s *h2Stream) reset() {
	s.id, s.err, s.headers = 0, nil, false
	s.httpStatus, s.contentType, s.grpcStatus, s.grpcMessage = "", "", "", ""
	s.data = s.data[:0]
}

// unary makes a call with header block hdr and DATA msg (a message behind
// its prefix) on stream s, and returns the answer's message (which
// aliases s's buffer).
func (cl *h2Client) unary(ctx context.Context, hdr, msg []byte, s *h2Stream) ([]byte, error) {
	s.reset()
	s.deadline = now() + int64(cl.timeout)
	var c *h2Conn
	for attempt := 0; ; attempt++ {
		var err error
		if c, err = cl.conn(ctx); err != nil {
			return nil, err
		}
		err = c.start(ctx, s, hdr, msg)
		if err == nil {
			break
		}
		if err != errDraining || attempt == 2 {
			if err == errDraining {
				err = status.Error(codes.Unavailable, "rlsload: three connections in a row took no new call")
			}
			return nil, err
		}
	}
	select {
	case <-s.done:
	case <-ctx.Done():
		c.cancel(s, status.FromContextError(ctx.Err()).Err())
	}
	return s.result()
}

// result returns the message s's answer carries, or the error it
// stands for.
func (s *h2Stream) result() ([]byte, error) {
	switch {
	case s.err != nil:
		return nil, s.err
	case s.grpcStatus == "" && s.httpStatus != "200":
		return nil, status.Errorf(httpCode(s.httpStatus), "rlsload: HTTP status %q and no grpc-status", s.httpStatus)
	case s.grpcStatus == "":
		return nil, status.Error(codes.Internal, "rlsload: the answer has no grpc-status")
	case s.grpcStatus != "0":
		code, err := strconv.ParseUint(s.grpcStatus, 10, 32)
		if err != nil {
			return nil, status.Errorf(codes.Unknown, "rlsload: grpc-status %q", s.grpcStatus)
		}
		return nil, status.Error(codes.Code(code), decodeGRPCMessage(s.grpcMessage))
	case s.httpStatus != "200":
		return nil, status.Errorf(codes.Internal, "rlsload: HTTP status %q", s.httpStatus)
	case !strings.HasPrefix(s.contentType, "application/grpc"):
		return nil, status.Errorf(codes.Internal, "rlsload: content-type %q", s.contentType)
	}
	d := s.data
	switch {
	case len(d) < 5:
		return nil, status.Errorf(codes.Internal, "rlsload: the answer has %d bytes of DATA, no message", len(d))
	case d[0] != 0:
		return nil, status.Errorf(codes.Internal, "rlsload: the answer's message is compressed (flag %d)", d[0])
	case int64(binary.BigEndian.Uint32(d[1:5])) != int64(len(d)-5):
		return nil, status.Errorf(codes.Internal, "rlsload: the answer is not one message of %d bytes (has %d)", binary.BigEndian.Uint32(d[1:5]), len(d)-5)
	}
	return d[5:], nil
}

// httpCode is the gRPC code of an HTTP status without grpc-status, as
// grpc-go maps it.
func httpCode(s string) codes.Code {
	switch s {
	case "400":
		return codes.Internal
	case "401":
		return codes.Unauthenticated
	case "403":
		return codes.PermissionDenied
	case "404":
		return codes.Unimplemented
	case "429", "502", "503", "504":
		return codes.Unavailable
	}
	return codes.Unknown
}

// decodeGRPCMessage undoes grpc-message's percent-encoding.
func decodeGRPCMessage(m string) string {
	if !strings.Contains(m, "%") {
		return m
	}
	var b strings.Builder
	for i := 0; i < len(m); i++ {
		if m[i] == '%' && i+2 < len(m) {
			if v, err := strconv.ParseUint(m[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(m[i])
	}
	return b.String()
}

// headerBlock returns the HPACK block of a call of method (a full method
// name) to authority with the given timeout. Every field is either in
// the static table or a literal never indexed, so the block leaves the
// server's dynamic table alone and may be sent any number of times.
func headerBlock(authority, method string, timeout time.Duration) []byte {
	var buf bytes.Buffer
	e := hpack.NewEncoder(&buf)
	for _, f := range []hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "http"},
		{Name: ":path", Value: method},
		{Name: ":authority", Value: authority},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "te", Value: "trailers"},
		{Name: "grpc-timeout", Value: grpcTimeout(timeout)},
		{Name: "user-agent", Value: "rlsload"},
	} {
		f.Sensitive = true
		if err := e.WriteField(f); err != nil {
			panic(err) // a bytes.Buffer does not fail
		}
	}
	return buf.Bytes()
}

// grpcTimeout encodes d as a grpc-timeout value: at most 8 digits and a
// unit, rounded up.
func grpcTimeout(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		unit string
	}{{time.Nanosecond, "n"}, {time.Microsecond, "u"}, {time.Millisecond, "m"}, {time.Second, "S"}, {time.Minute, "M"}} {
		if n := (d + u.d - 1) / u.d; n <= 99_999_999 {
			return strconv.FormatInt(int64(n), 10) + u.unit
		}
	}
	return strconv.FormatInt(int64(min((d+time.Hour-1)/time.Hour, 99_999_999)), 10) + "H"
}

// h2Op is a frame for the writer: a call's HEADERS and DATA, or a frame
// of the connection's upkeep.
type h2Op struct {
	kind      uint8
	id        uint32
	n         uint32 // opWindow: the increment; opRST: the error code
	hdr, data []byte // opCall
	ping      [8]byte
}

const (
	opCall = iota
	opRST
	opWindow
	opSettingsAck
	opPingAck
)

// h2Conn is one HTTP/2 connection.
type h2Conn struct {
	addr    string
	nc      net.Conn
	bw      *bufio.Writer
	wfr     *http2.Framer // the writer goroutine's
	rfr     *http2.Framer // the reader goroutine's
	dec     *hpack.Decoder
	onClose func(*h2Conn)
	wg      sync.WaitGroup

	// The reader's, for the header block it is decoding.
	hid     uint32 // its stream
	hend    bool   // it ends the stream
	hdr     h2Headers
	unacked uint32 // DATA bytes not yet returned to the connection's window

	wake     chan struct{} // the queue has ops (cap 1)
	winCh    chan struct{} // a send window grew (cap 1)
	closed   chan struct{} // closed with err
	unusable atomic.Bool   // err or draining: new calls go elsewhere

	mu         sync.Mutex
	err        error // why the connection broke
	draining   bool  // no new streams
	streams    map[uint32]*h2Stream
	nextID     uint32
	queue      []h2Op
	slotWait   chan struct{} // closed when a stream ends, for calls waiting for maxStreams
	maxStreams uint32        // the server's SETTINGS_MAX_CONCURRENT_STREAMS
	maxFrame   uint32        // the server's SETTINGS_MAX_FRAME_SIZE
	initWin    uint32        // the server's SETTINGS_INITIAL_WINDOW_SIZE
	connWin    int64         // the server's connection window
	curID      uint32        // the stream whose DATA the writer waits to send, if any
	curWin     int64         // its window
}

// h2Headers is what the client reads of a header block.
type h2Headers struct {
	status, contentType, grpcStatus, grpcMessage string
}

// dialH2 connects to addr, exchanges prefaces and SETTINGS, and starts
// the connection's goroutines. onClose is called once the connection
// has failed.
func dialH2(ctx context.Context, addr string, timeout time.Duration, onClose func(*h2Conn)) (*h2Conn, error) {
	nc, err := (&net.Dialer{Timeout: timeout}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &h2Conn{
		addr:       addr,
		nc:         nc,
		onClose:    onClose,
		wake:       make(chan struct{}, 1),
		winCh:      make(chan struct{}, 1),
		closed:     make(chan struct{}),
		streams:    map[uint32]*h2Stream{},
		nextID:     1,
		maxStreams: ^uint32(0),
		maxFrame:   16 << 10,
		initWin:    65535,
		connWin:    65535,
	}
	c.bw = bufio.NewWriterSize(nc, h2BufSize)
	c.wfr = http2.NewFramer(c.bw, nil)
	c.rfr = http2.NewFramer(nil, bufio.NewReaderSize(nc, h2BufSize))
	c.rfr.SetReuseFrames()
	c.dec = hpack.NewDecoder(4096, c.emit)
	c.dec.SetMaxStringLength(64 << 10)

	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	nc.SetDeadline(deadline)
	if err := c.handshake(); err != nil {
		nc.Close()
		return nil, err
	}
	nc.SetDeadline(time.Time{})

	c.wg.Add(3)
	go c.readLoop()
	go c.writeLoop()
	go c.sweepLoop(min(max(timeout/10, time.Millisecond), 100*time.Millisecond))
	return c, nil
}

// handshake sends the client's preface, SETTINGS and connection window,
// and reads the server's preface, its SETTINGS, which it acknowledges.
func (c *h2Conn) handshake() error {
	c.bw.WriteString(http2.ClientPreface)
	c.wfr.WriteSettings(
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: h2Window},
	)
	c.wfr.WriteWindowUpdate(0, h2Window-65535)
	if err := c.bw.Flush(); err != nil {
		return err
	}
	f, err := c.rfr.ReadFrame()
	if err != nil {
		return fmt.Errorf("reading the server's preface: %w", err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return fmt.Errorf("the server's preface is %v, not SETTINGS", f.Header())
	}
	if err := c.applySettings(sf); err != nil {
		return err
	}
	c.wfr.WriteSettingsAck()
	return c.bw.Flush()
}

// applySettings applies the server's SETTINGS; mu is held, or the
// connection not yet shared.
func (c *h2Conn) applySettings(f *http2.SettingsFrame) error {
	if err := f.ForeachSetting(func(s http2.Setting) error { return s.Valid() }); err != nil {
		return err
	}
	return f.ForeachSetting(func(s http2.Setting) error {
		switch s.ID {
		case http2.SettingMaxConcurrentStreams:
			c.maxStreams = s.Val
		case http2.SettingMaxFrameSize:
			c.maxFrame = s.Val
		case http2.SettingInitialWindowSize:
			if c.curID != 0 {
				c.curWin += int64(s.Val) - int64(c.initWin)
			}
			c.initWin = s.Val
		}
		return nil
	})
}

// start registers s as a new stream and queues its frames. It returns
// errDraining if the connection takes no new streams (it drains, or it
// broke).
func (c *h2Conn) start(ctx context.Context, s *h2Stream, hdr, data []byte) error {
	c.mu.Lock()
	for {
		if c.err != nil || c.draining {
			// The call was not sent: it may go on another connection.
			c.mu.Unlock()
			return errDraining
		}
		if c.nextID > 1<<31-1 {
			c.drain()
			continue
		}
		if uint32(len(c.streams)) < c.maxStreams {
			break
		}
		// Wait for a stream to end.
		if c.slotWait == nil {
			c.slotWait = make(chan struct{})
		}
		ch := c.slotWait
		c.mu.Unlock()
		t := time.NewTimer(time.Duration(s.deadline - now()))
		select {
		case <-ch:
			t.Stop()
		case <-t.C:
			return status.Error(codes.DeadlineExceeded, "rlsload: call timed out waiting for a stream")
		case <-ctx.Done():
			t.Stop()
			return status.FromContextError(ctx.Err()).Err()
		}
		c.mu.Lock()
	}
	s.id = c.nextID
	c.nextID += 2
	c.streams[s.id] = s
	c.enqueue(h2Op{kind: opCall, id: s.id, hdr: hdr, data: data})
	c.mu.Unlock()
	return nil
}

// enqueue queues op for the writer; mu is held.
func (c *h2Conn) enqueue(op h2Op) {
	c.queue = append(c.queue, op)
	if len(c.queue) == 1 {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// end ends s, which is registered, with err (nil: its answer is
// complete), and signals its caller, who may reuse s at once; mu is
// held.
func (c *h2Conn) end(s *h2Stream, err error) {
	delete(c.streams, s.id)
	if err != nil {
		s.err = err
	}
	s.done <- struct{}{}
	if c.slotWait != nil {
		close(c.slotWait)
		c.slotWait = nil
	}
	if c.draining && len(c.streams) == 0 {
		c.nc.Close() // the reader sees it and fails the connection
	}
}

// drain stops the connection taking new streams, and closes it once its
// streams have ended; mu is held.
func (c *h2Conn) drain() {
	c.draining = true
	c.unusable.Store(true)
	if c.slotWait != nil {
		close(c.slotWait)
		c.slotWait = nil
	}
	if len(c.streams) == 0 {
		c.nc.Close()
	}
}

// cancel ends s with err, if it has not ended yet, and resets its
// stream; then it takes s's done signal.
func (c *h2Conn) cancel(s *h2Stream, err error) {
	c.mu.Lock()
	if id := s.id; c.streams[id] == s {
		c.end(s, err)
		c.enqueue(h2Op{kind: opRST, id: id, n: uint32(http2.ErrCodeCancel)})
	}
	c.mu.Unlock()
	<-s.done
}

// fail breaks the connection with err: every call on it fails with it.
func (c *h2Conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	c.unusable.Store(true)
	for _, s := range c.streams {
		c.end(s, err)
	}
	close(c.closed)
	c.mu.Unlock()
	c.nc.Close()
	c.onClose(c)
}

// connErr is the error of calls on a connection that broke with err.
func (c *h2Conn) connErr(err error) error {
	return status.Errorf(codes.Unavailable, "rlsload: connection to %s: %v", c.addr, err)
}

// writeLoop writes the queued frames, flushing when nothing more is
// queued.
func (c *h2Conn) writeLoop() {
	defer c.wg.Done()
	var q []h2Op
	for {
		select {
		case <-c.wake:
		case <-c.closed:
			return
		}
		yielded := false
		for {
			c.mu.Lock()
			q, c.queue = c.queue, q[:0]
			c.mu.Unlock()
			if len(q) == 0 {
				if yielded {
					break
				}
				// Let the callers that are ready to run queue their calls,
				// to go out in the same write.
				yielded = true
				runtime.Gosched()
				continue
			}
			yielded = false
			for i := range q {
				if err := c.write(&q[i]); err != nil {
					c.fail(c.connErr(err))
					return
				}
				q[i] = h2Op{}
			}
		}
		if err := c.bw.Flush(); err != nil {
			c.fail(c.connErr(err))
			return
		}
	}
}

// write writes op's frames to the buffer.
func (c *h2Conn) write(op *h2Op) error {
	switch op.kind {
	case opCall:
		if err := c.wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: op.id, BlockFragment: op.hdr, EndHeaders: true}); err != nil {
			return err
		}
		return c.writeData(op.id, op.data)
	case opRST:
		return c.wfr.WriteRSTStream(op.id, http2.ErrCode(op.n))
	case opWindow:
		return c.wfr.WriteWindowUpdate(op.id, op.n)
	case opSettingsAck:
		return c.wfr.WriteSettingsAck()
	case opPingAck:
		return c.wfr.WritePing(true, op.ping)
	}
	return nil
}

// writeData writes data on stream id, in as many DATA frames as the
// server's frame size and windows ask, the last with END_STREAM; it
// waits for the windows to grow if they must.
func (c *h2Conn) writeData(id uint32, data []byte) error {
	c.mu.Lock()
	n := int64(len(data))
	if n <= int64(c.maxFrame) && n <= c.connWin && n <= int64(c.initWin) {
		c.connWin -= n
		c.mu.Unlock()
		return c.wfr.WriteData(id, true, data)
	}
	c.curID, c.curWin = id, int64(c.initWin)
	for {
		n := min(int64(len(data)), int64(c.maxFrame), c.connWin, c.curWin)
		if n <= 0 {
			if c.err != nil || c.streams[id] == nil {
				// The connection broke, or the stream ended: its rest is
				// not wanted.
				c.curID = 0
				c.mu.Unlock()
				return nil
			}
			c.mu.Unlock()
			if err := c.bw.Flush(); err != nil {
				return err
			}
			select {
			case <-c.winCh:
			case <-c.closed:
			}
			c.mu.Lock()
			continue
		}
		c.connWin -= n
		c.curWin -= n
		c.mu.Unlock()
		err := c.wfr.WriteData(id, n == int64(len(data)), data[:n])
		data = data[n:]
		c.mu.Lock()
		if err != nil || len(data) == 0 {
			c.curID = 0
			c.mu.Unlock()
			return err
		}
	}
}

// sweepLoop fails the calls past their deadline.
func (c *h2Conn) sweepLoop(every time.Duration) {
	defer c.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-c.closed:
			return
		}
		t := now()
		c.mu.Lock()
		for _, s := range c.streams {
			if id := s.id; t > s.deadline {
				c.end(s, status.Error(codes.DeadlineExceeded, "rlsload: call timed out"))
				c.enqueue(h2Op{kind: opRST, id: id, n: uint32(http2.ErrCodeCancel)})
			}
		}
		c.mu.Unlock()
	}
}

// readLoop reads and handles the server's frames until the connection
// breaks.
func (c *h2Conn) readLoop() {
	defer c.wg.Done()
	for {
		f, err := c.rfr.ReadFrame()
		if err == nil {
			err = c.handle(f)
		}
		if err != nil {
			if ce, ok := err.(http2.ConnectionError); ok {
				if d := c.rfr.ErrorDetail(); d != nil {
					err = fmt.Errorf("%v: %v", ce, d)
				}
			}
			c.fail(c.connErr(err))
			return
		}
	}
}

// handle handles frame f.
func (c *h2Conn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.DataFrame:
		data := f.Data()
		c.mu.Lock()
		if s := c.streams[f.StreamID]; s != nil {
			if len(s.data)+len(data) > h2MaxMessage {
				c.end(s, status.Errorf(codes.ResourceExhausted, "rlsload: answer larger than %d bytes", h2MaxMessage))
				c.enqueue(h2Op{kind: opRST, id: f.StreamID, n: uint32(http2.ErrCodeCancel)})
			} else {
				s.data = append(s.data, data...)
				if f.StreamEnded() {
					c.end(s, nil)
				}
			}
		}
		// Padding counts against the window too.
		if c.unacked += f.Length; c.unacked >= h2WindowTopUp {
			c.enqueue(h2Op{kind: opWindow, n: c.unacked})
			c.unacked = 0
		}
		c.mu.Unlock()
	case *http2.HeadersFrame:
		c.hid, c.hend, c.hdr = f.StreamID, f.StreamEnded(), h2Headers{}
		if _, err := c.dec.Write(f.HeaderBlockFragment()); err != nil {
			return http2.ConnectionError(http2.ErrCodeCompression)
		}
		if f.HeadersEnded() {
			return c.endHeaders()
		}
	case *http2.ContinuationFrame:
		if _, err := c.dec.Write(f.HeaderBlockFragment()); err != nil {
			return http2.ConnectionError(http2.ErrCodeCompression)
		}
		if f.HeadersEnded() {
			return c.endHeaders()
		}
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		c.mu.Lock()
		err := c.applySettings(f)
		c.enqueue(h2Op{kind: opSettingsAck})
		c.mu.Unlock()
		c.windowGrew()
		return err
	case *http2.PingFrame:
		if !f.IsAck() {
			c.mu.Lock()
			c.enqueue(h2Op{kind: opPingAck, ping: f.Data})
			c.mu.Unlock()
		}
	case *http2.WindowUpdateFrame:
		c.mu.Lock()
		if f.StreamID == 0 {
			c.connWin += int64(f.Increment)
		} else if f.StreamID == c.curID {
			c.curWin += int64(f.Increment)
		}
		c.mu.Unlock()
		c.windowGrew()
	case *http2.RSTStreamFrame:
		c.mu.Lock()
		if s := c.streams[f.StreamID]; s != nil {
			code := rstCode(f.ErrCode)
			if code == codes.Canceled && now() >= s.deadline {
				// The server gave up at the grpc-timeout the call sent,
				// as grpc-go's clients take it.
				code = codes.DeadlineExceeded
			}
			c.end(s, status.Errorf(code, "rlsload: the server reset the stream: %v", f.ErrCode))
		}
		c.mu.Unlock()
	case *http2.GoAwayFrame:
		err := status.Errorf(codes.Unavailable, "rlsload: the server sent GOAWAY (%v, last stream %d, %q)", f.ErrCode, f.LastStreamID, f.DebugData())
		c.mu.Lock()
		for id, s := range c.streams {
			if id > f.LastStreamID {
				c.end(s, err)
			}
		}
		c.drain()
		c.mu.Unlock()
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	return nil
}

// windowGrew wakes the writer if it waits for a window.
func (c *h2Conn) windowGrew() {
	select {
	case c.winCh <- struct{}{}:
	default:
	}
}

// emit is the HPACK decoder's: it keeps the fields the client reads.
func (c *h2Conn) emit(f hpack.HeaderField) {
	switch f.Name {
	case ":status":
		c.hdr.status = f.Value
	case "content-type":
		c.hdr.contentType = f.Value
	case "grpc-status":
		c.hdr.grpcStatus = f.Value
	case "grpc-message":
		c.hdr.grpcMessage = f.Value
	}
}

// endHeaders gives the header block just decoded to its stream: the
// response headers, the trailers, or both (a trailers-only answer).
func (c *h2Conn) endHeaders() error {
	if err := c.dec.Close(); err != nil {
		return http2.ConnectionError(http2.ErrCodeCompression)
	}
	c.mu.Lock()
	if s := c.streams[c.hid]; s != nil {
		if !s.headers {
			s.headers = true
			s.httpStatus, s.contentType = c.hdr.status, c.hdr.contentType
		}
		if c.hdr.grpcStatus != "" {
			s.grpcStatus, s.grpcMessage = c.hdr.grpcStatus, c.hdr.grpcMessage
		}
		if c.hend {
			c.end(s, nil)
		}
	}
	c.mu.Unlock()
	return nil
}

// rstCode is the gRPC code of a stream the server reset with code, as
// grpc-go maps it.
func rstCode(code http2.ErrCode) codes.Code {
	switch code {
	case http2.ErrCodeRefusedStream:
		return codes.Unavailable
	case http2.ErrCodeCancel:
		return codes.Canceled
	case http2.ErrCodeEnhanceYourCalm:
		return codes.ResourceExhausted
	case http2.ErrCodeInadequateSecurity:
		return codes.PermissionDenied
	}
	return codes.Internal
}
