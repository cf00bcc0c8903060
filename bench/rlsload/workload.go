package rlsload

import (
	"encoding/binary"
	"fmt"

	"google.golang.org/protobuf/proto"
)

// workload is the calls of one protocol, the same for every connection
// and client: reqs[k] checks keys k, k+1, ... (mod Keys), and wire[k] is
// reqs[k] marshalled behind gRPC's 5-byte message prefix (a zero byte,
// then the length, big-endian), ready to go out as the DATA of a call.
// The messages are shared: they may be marshalled by many goroutines at
// once, and must not be changed.
type workload struct {
	method string // full method name, /package.Service/Method
	reqs   []proto.Message
	wire   [][]byte
	// newResp returns an empty response message, and judge says what
	// resp, the answer to reqs[k], tells; judgeWire says the same of
	// the answer marshalled (wire.go).
	newResp   func() proto.Message
	judge     func(k int, resp proto.Message) (outcome, error)
	judgeWire func(k int, resp []byte) (outcome, error)
}

// marshal fills w.wire from w.reqs, every message in one backing array.
func (w *workload) marshal() {
	var buf []byte
	ends := make([]int, len(w.reqs))
	for k, r := range w.reqs {
		n := proto.Size(r)
		buf = binary.BigEndian.AppendUint32(append(buf, 0), uint32(n))
		var err error
		if buf, err = (proto.MarshalOptions{Deterministic: true}).MarshalAppend(buf, r); err != nil {
			panic(fmt.Sprintf("rlsload: marshalling request %d: %v", k, err)) // cannot happen for these messages
		}
		ends[k] = len(buf)
	}
	w.wire = make([][]byte, len(w.reqs))
	start := 0
	for k, end := range ends {
		w.wire[k] = buf[start:end:end]
		start = end
	}
}
