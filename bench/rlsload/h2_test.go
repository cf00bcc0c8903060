package rlsload

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestLeanSameAnswers sends the same calls, one at a time, with grpc-go
// to one fake server and with the lean client to another, configured
// alike, and wants the same answers, message for message, including the
// denials once a key is over its limit.
func TestLeanSameAnswers(t *testing.T) {
	for _, p := range []Protocol{RLS, Gubernator} {
		for _, d := range []int{1, 3} {
			t.Run(p.String()+"/"+string(rune('0'+d)), func(t *testing.T) {
				const limit, keys = 2, 10
				addrG, _ := serve(t, p, limit, false)
				addrL, _ := serve(t, p, limit, false)
				cfg := Config{Addr: addrL, Protocol: p, Keys: keys, Descriptors: d, Limit: limit}
				if err := cfg.setDefaults(); err != nil {
					t.Fatal(err)
				}
				w := workloads[p](&cfg)
				cc, err := grpc.NewClient(addrG, grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					t.Fatal(err)
				}
				defer cc.Close()
				lean := newLeanCaller(&cfg, cfg.Addr, w)
				defer lean.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				var denials int
				for i := range 4 * keys {
					k := i % keys
					want := w.newResp()
					if err := cc.Invoke(ctx, w.method, w.reqs[k], want); err != nil {
						t.Fatalf("grpc-go call %d: %v", i, err)
					}
					s := newH2Stream()
					msg, err := lean.cl.unary(ctx, lean.hdr, w.wire[k], s)
					if err != nil {
						t.Fatalf("lean call %d: %v", i, err)
					}
					got := w.newResp()
					if err := proto.Unmarshal(msg, got); err != nil {
						t.Fatal(err)
					}
					if !proto.Equal(got, want) {
						t.Fatalf("call %d: lean client got %v, grpc-go %v", i, got, want)
					}
					if o, err := w.judge(k, got); err != nil {
						t.Fatalf("call %d: %v", i, err)
					} else if o == denied {
						denials++
					}
				}
				if denials == 0 {
					t.Error("no call was denied; want the keys over their limit of 2 denied")
				}
			})
		}
	}
}

// errServer answers every ShouldRateLimit with err, or, if err is nil,
// with OK after release is closed (release nil: at once).
type errServer struct {
	rlspb.UnimplementedRateLimitServiceServer
	err     error
	release chan struct{}
	calls   atomic.Int64
}

func (s *errServer) ShouldRateLimit(ctx context.Context, req *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	s.calls.Add(1)
	if s.err != nil {
		return nil, s.err
	}
	if s.release != nil {
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	resp := &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_OK}
	for range req.Descriptors {
		resp.Statuses = append(resp.Statuses, &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK})
	}
	return resp, nil
}

// serveErr starts a grpc-go server of s with opts on a loopback port.
func serveErr(t *testing.T, s *errServer, opts ...grpc.ServerOption) (string, *grpc.Server) {
	t.Helper()
	gs := grpc.NewServer(opts...)
	rlspb.RegisterRateLimitServiceServer(gs, s)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	return ln.Addr().String(), gs
}

// leanRLS returns a lean caller of RLS requests (one descriptor, keys
// of cfg) to addr.
func leanRLS(t *testing.T, cfg Config) *leanCaller {
	t.Helper()
	if err := cfg.setDefaults(); err != nil {
		t.Fatal(err)
	}
	c := newLeanCaller(&cfg, cfg.Addr, newRLS(&cfg))
	t.Cleanup(func() { c.Close() })
	return c
}

func TestLeanErrorStatus(t *testing.T) {
	for _, want := range []error{
		status.Error(codes.Unavailable, "down"),
		status.Error(codes.ResourceExhausted, "100% full: ünïcode\nand a newline"),
		status.Error(codes.PermissionDenied, ""),
	} {
		addr, _ := serveErr(t, &errServer{err: want})
		c := leanRLS(t, Config{Addr: addr})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		o, err := c.call(ctx, 0)
		cancel()
		if o != failed || status.Code(err) != status.Code(want) || status.Convert(err).Message() != status.Convert(want).Message() {
			t.Errorf("got %v, %v; want failed, %v", o, err, want)
		}
	}

	t.Run("unknown method", func(t *testing.T) {
		addr, _ := serveErr(t, &errServer{})
		cfg := Config{Addr: addr}
		cfg.setDefaults()
		w := newRLS(&cfg)
		w.method = "/envoy.service.ratelimit.v3.RateLimitService/NoSuchMethod"
		c := newLeanCaller(&cfg, cfg.Addr, w)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := c.call(ctx, 0); status.Code(err) != codes.Unimplemented {
			t.Errorf("got %v, want Unimplemented", err)
		}
	})

	t.Run("nothing listening", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		c := leanRLS(t, Config{Addr: addr})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := c.call(ctx, 0); status.Code(err) != codes.Unavailable {
			t.Errorf("got %v, want Unavailable", err)
		}
	})
}

// TestLeanTimeouts: a call that gets no answer fails at its CallTimeout,
// or when its context is cancelled, and the connection serves the next
// call.
func TestLeanTimeouts(t *testing.T) {
	s := &errServer{release: make(chan struct{})}
	addr, _ := serveErr(t, s)
	c := leanRLS(t, Config{Addr: addr, CallTimeout: 200 * time.Millisecond})

	start := time.Now()
	if _, err := c.call(context.Background(), 0); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("got %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
		t.Errorf("the call took %v, want its timeout of 200ms (and a sweep)", d)
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := c.call(ctx, 0); status.Code(err) != codes.Canceled {
		t.Errorf("got %v, want Canceled", err)
	}

	close(s.release)
	if o, err := c.call(context.Background(), 0); o != allowed || err != nil {
		t.Errorf("after the timeouts: got %v, %v; want allowed", o, err)
	}
	c.cl.mu.Lock()
	n := len(c.cl.conns)
	c.cl.mu.Unlock()
	if n != 1 {
		t.Errorf("%d connections, want the one", n)
	}
}

// TestLeanServerGone: calls in flight when the server goes fail, rather
// than wait; after a graceful stop (GOAWAY), the calls the server took
// still complete.
func TestLeanServerGone(t *testing.T) {
	for _, graceful := range []bool{false, true} {
		name := "stop"
		if graceful {
			name = "graceful stop"
		}
		t.Run(name, func(t *testing.T) {
			s := &errServer{release: make(chan struct{})}
			addr, gs := serveErr(t, s)
			c := leanRLS(t, Config{Addr: addr, CallTimeout: time.Minute})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			const n = 8
			errs := make(chan error, n)
			for k := range n {
				go func() {
					_, err := c.call(ctx, k)
					errs <- err
				}()
			}
			for s.calls.Load() < n {
				time.Sleep(time.Millisecond)
			}
			if graceful {
				stopped := make(chan struct{})
				go func() {
					gs.GracefulStop()
					close(stopped)
				}()
				// Wait for the GOAWAY to reach the client.
				for !c.cl.cur.Load().unusable.Load() {
					time.Sleep(time.Millisecond)
				}
				close(s.release)
				<-stopped
			} else {
				gs.Stop()
			}
			for range n {
				err := <-errs
				if graceful && err != nil {
					t.Errorf("a call in flight at the graceful stop: %v, want it answered", err)
				}
				if !graceful && status.Code(err) != codes.Unavailable {
					t.Errorf("a call in flight at the stop: %v, want Unavailable", err)
				}
			}
			if _, err := c.call(ctx, 0); status.Code(err) != codes.Unavailable {
				t.Errorf("a call after the stop: %v, want Unavailable", err)
			}
		})
	}
}

// rawServer accepts HTTP/2 connections on a loopback port and runs
// handle on each, after the client's preface and a SETTINGS frame of
// settings.
func rawServer(t *testing.T, settings []http2.Setting, handle func(t *testing.T, fr *http2.Framer, nc net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer nc.Close()
				go func() { // the test's end closes the connection
					<-t.Context().Done()
					nc.Close()
				}()
				preface := make([]byte, len(http2.ClientPreface))
				if _, err := io.ReadFull(nc, preface); err != nil || string(preface) != http2.ClientPreface {
					t.Errorf("client preface %q, %v", preface, err)
					return
				}
				fr := http2.NewFramer(nc, nc)
				fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
				if err := fr.WriteSettings(settings...); err != nil {
					return
				}
				handle(t, fr, nc)
			})
		}
	})
	return ln.Addr().String()
}

// okAnswer writes an OK RLS answer with n descriptor statuses on stream
// id: headers, message, trailers.
func okAnswer(fr *http2.Framer, id uint32, n int) error {
	resp := &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_OK}
	for range n {
		resp.Statuses = append(resp.Statuses, &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK})
	}
	b, _ := proto.Marshal(resp)
	msg := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(b)))
	msg = append(msg, b...)
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true,
		BlockFragment: encodeHeaders(":status", "200", "content-type", "application/grpc")}); err != nil {
		return err
	}
	if err := fr.WriteData(id, false, msg); err != nil {
		return err
	}
	return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true, EndStream: true,
		BlockFragment: encodeHeaders("grpc-status", "0")})
}

func encodeHeaders(kv ...string) []byte {
	var buf bytes.Buffer
	e := hpack.NewEncoder(&buf)
	for i := 0; i < len(kv); i += 2 {
		e.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	return buf.Bytes()
}

// TestLeanGoAway: a GOAWAY that leaves the calls in flight out fails
// them at once, and the next call goes out on a new connection.
func TestLeanGoAway(t *testing.T) {
	var conns atomic.Int32
	addr := rawServer(t, nil, func(t *testing.T, fr *http2.Framer, nc net.Conn) {
		first := conns.Add(1) == 1
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if f, ok := f.(*http2.DataFrame); ok && f.StreamEnded() {
				if first {
					fr.WriteGoAway(0, http2.ErrCodeNo, []byte("bye"))
					continue // and leave the connection open
				}
				if err := okAnswer(fr, f.StreamID, 1); err != nil {
					return
				}
			}
		}
	})
	c := leanRLS(t, Config{Addr: addr, CallTimeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.call(ctx, 0)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "GOAWAY") {
		t.Errorf("the call the server left out: %v, want Unavailable after GOAWAY", err)
	}
	if o, err := c.call(ctx, 1); o != allowed || err != nil {
		t.Errorf("the next call: %v, %v; want allowed", o, err)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}

// TestLeanClosed: a connection closed under calls in flight fails them.
func TestLeanClosed(t *testing.T) {
	addr := rawServer(t, nil, func(t *testing.T, fr *http2.Framer, nc net.Conn) {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if f, ok := f.(*http2.DataFrame); ok && f.StreamEnded() && f.StreamID >= 5 {
				nc.Close() // with three calls in flight
				return
			}
		}
	})
	c := leanRLS(t, Config{Addr: addr, CallTimeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make(chan error, 3)
	for k := range 3 {
		go func() {
			_, err := c.call(ctx, k)
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; status.Code(err) != codes.Unavailable {
			t.Errorf("got %v, want Unavailable", err)
		}
	}
}

// TestLeanFlowControl: with stream windows of 7 bytes and a connection
// window the server hands out slowly, the client sends each request in
// pieces no larger than its windows, waits for WINDOW_UPDATEs, answers
// PINGs, and the calls complete; the server also sees its frame size
// and concurrent streams limits kept.
func TestLeanFlowControl(t *testing.T) {
	const window = 7
	var pings atomic.Int32
	settings := []http2.Setting{
		{ID: http2.SettingInitialWindowSize, Val: window},
		{ID: http2.SettingMaxConcurrentStreams, Val: 2},
	}
	cfg := Config{Addr: "", Keys: 100}
	cfg.Addr = rawServer(t, settings, func(t *testing.T, fr *http2.Framer, nc net.Conn) {
		type stream struct {
			got      []byte
			received int // since the last WINDOW_UPDATE
		}
		streams := map[uint32]*stream{}
		connWin := 65535 // what the client may still send
		var maxOpen int
		if err := fr.WritePing(false, [8]byte{1, 2, 3}); err != nil {
			return
		}
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				streams[f.StreamID] = &stream{}
				maxOpen = max(maxOpen, len(streams))
				if maxOpen > 2 {
					t.Errorf("%d streams open, want at most 2", maxOpen)
				}
			case *http2.PingFrame:
				if f.IsAck() && f.Data == [8]byte{1, 2, 3} {
					pings.Add(1)
				}
			case *http2.DataFrame:
				s := streams[f.StreamID]
				s.got = append(s.got, f.Data()...)
				s.received += len(f.Data())
				if connWin -= len(f.Data()); connWin < 0 {
					t.Errorf("the client sent %d bytes past the connection window", -connWin)
				}
				if s.received > window {
					t.Errorf("stream %d: %d bytes in a window of %d", f.StreamID, s.received, window)
				}
				if !f.StreamEnded() {
					// Give the stream its window back, and the connection a
					// bit of one.
					fr.WriteWindowUpdate(f.StreamID, uint32(s.received))
					s.received = 0
					fr.WriteWindowUpdate(0, 10)
					connWin += 10
					continue
				}
				if len(s.got) < 5 || int(binary.BigEndian.Uint32(s.got[1:5])) != len(s.got)-5 {
					t.Errorf("stream %d: request %x is not one message", f.StreamID, s.got)
				}
				var req rlspb.RateLimitRequest
				if err := proto.Unmarshal(s.got[5:], &req); err != nil || len(req.Descriptors) != 1 {
					t.Errorf("stream %d: request %v, %v", f.StreamID, &req, err)
				}
				delete(streams, f.StreamID)
				if err := okAnswer(fr, f.StreamID, 1); err != nil {
					return
				}
			}
		}
	})
	c := leanRLS(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Enough calls to go through the connection's first 65 535 bytes.
	var wg sync.WaitGroup
	var fails atomic.Int32
	for g := range 8 {
		wg.Go(func() {
			for k := g; k < 4000; k += 8 {
				if o, err := c.call(ctx, k%100); o != allowed || err != nil {
					if fails.Add(1) == 1 {
						t.Errorf("call %d: %v, %v", k, o, err)
					}
				}
			}
		})
	}
	wg.Wait()
	if pings.Load() != 1 {
		t.Errorf("%d PING acks, want 1", pings.Load())
	}
}

// TestLeanConcurrency: 64 streams on two connections, against a grpc-go
// server that takes at most 8 streams per connection at a time.
func TestLeanConcurrency(t *testing.T) {
	s := &errServer{}
	addr, _ := serveErr(t, s, grpc.MaxConcurrentStreams(8))
	l, err := New(Config{Addr: addr, Conns: 2, Keys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := l.Run(ctx, Spec{Streams: 64, Calls: 20_000})
	if err != nil {
		t.Fatal(err)
	}
	if r.Calls != 20_000 || r.Allowed != r.Calls || s.calls.Load() != r.Calls {
		t.Errorf("got %v and %d calls at the server; want 20000 calls, all allowed", r, s.calls.Load())
	}
}

// TestLeanClose: Close fails the calls in flight and ends the
// connections' goroutines.
func TestLeanClose(t *testing.T) {
	s := &errServer{release: make(chan struct{})}
	defer close(s.release)
	addr, _ := serveErr(t, s)
	cfg := Config{Addr: addr}
	cfg.setDefaults()
	c := newLeanCaller(&cfg, cfg.Addr, newRLS(&cfg))
	done := make(chan error)
	go func() {
		_, err := c.call(context.Background(), 0)
		done <- err
	}()
	for s.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	c.Close()
	select {
	case err := <-done:
		if status.Code(err) != codes.Canceled {
			t.Errorf("got %v, want Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call did not end at Close")
	}
	if _, err := c.call(context.Background(), 0); err == nil {
		t.Error("a call after Close succeeded")
	}
}

func TestGRPCTimeout(t *testing.T) {
	for d, want := range map[time.Duration]string{
		5 * time.Second:            "5000000u",
		time.Nanosecond:            "1n",
		99_999_999:                 "99999999n",
		100_000_000:                "100000u",
		100_000_001:                "100001u",
		200 * time.Hour:            "720000S",
		1000 * 24 * 3600 * 1e9 * 5: "7200000M",
	} {
		if got := grpcTimeout(d); got != want {
			t.Errorf("grpcTimeout(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestDecodeGRPCMessage(t *testing.T) {
	for in, want := range map[string]string{
		"plain":          "plain",
		"100%25 full":    "100% full",
		"%C3%BC%0Aa":     "ü\na",
		"bad %zz and %4": "bad %zz and %4",
	} {
		if got := decodeGRPCMessage(in); got != want {
			t.Errorf("decodeGRPCMessage(%q) = %q, want %q", in, got, want)
		}
	}
}
