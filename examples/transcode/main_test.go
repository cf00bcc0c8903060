package main

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// greeter.pb, which gateway.yaml reads, is what -write-descriptor
// writes today.
func TestDescriptorSetUpToDate(t *testing.T) {
	b, err := os.ReadFile(descriptorFile)
	if err != nil {
		t.Fatal(err)
	}
	var got descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if want := descriptorSet(); !proto.Equal(&got, want) {
		t.Errorf("%s is not the descriptor set the example builds: run go run ./examples/transcode -write-descriptor examples/transcode/%s", descriptorFile, descriptorFile)
	}
}

// -write-descriptor writes a set that reads back as the one built.
func TestWriteDescriptorSet(t *testing.T) {
	file := t.TempDir() + "/set.pb"
	if err := writeDescriptorSet(file); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var got descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&got, descriptorSet()) {
		t.Error("the written set differs from descriptorSet()")
	}
	if err := writeDescriptorSet(t.TempDir() + "/no/such/dir/set.pb"); err == nil {
		t.Error("writing into a missing directory: got nil, want an error")
	}
}

// The gRPC side as the gateway calls it: each method's answer, the busy
// refusal with its RetryInfo, the caller from the metadata, and the
// health service.
func TestGreeter(t *testing.T) {
	srv, err := newServer()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	g, err := newGreeter()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	call := func(ctx context.Context, method string, in, out protoreflect.MessageDescriptor, fields map[string]string) (*dynamicpb.Message, error) {
		t.Helper()
		req := dynamicpb.NewMessage(in)
		for k, v := range fields {
			req.Set(in.Fields().ByName(protoreflect.Name(k)), protoreflect.ValueOfString(v))
		}
		resp := dynamicpb.NewMessage(out)
		return resp, cc.Invoke(ctx, "/greeter.v1.Greeter/"+method, req, resp)
	}
	str := func(m *dynamicpb.Message, field string) string {
		return m.Get(m.Descriptor().Fields().ByName(protoreflect.Name(field))).String()
	}

	t.Run("SayHello", func(t *testing.T) {
		resp, err := call(ctx, "SayHello", g.helloRequest, g.helloReply, map[string]string{"name": "world"})
		if err != nil {
			t.Fatal(err)
		}
		if got := str(resp, "message"); got != "Hello, world!" {
			t.Errorf("got %q, want %q", got, "Hello, world!")
		}
	})
	t.Run("busy", func(t *testing.T) {
		_, err := call(ctx, "SayHello", g.helloRequest, g.helloReply, map[string]string{"name": busyName})
		st := status.Convert(err)
		if st.Code() != codes.ResourceExhausted {
			t.Fatalf("got %v, want RESOURCE_EXHAUSTED", err)
		}
		var delay time.Duration
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				delay = ri.GetRetryDelay().AsDuration()
			}
		}
		if delay != busyRetry {
			t.Errorf("RetryInfo delay: got %v, want %v", delay, busyRetry)
		}
	})
	t.Run("AddNote", func(t *testing.T) {
		tests := []struct {
			name, subject, text string
			wantID              int64
			wantAuthor          string
		}{
			{"signed", "carol", "buy milk", 1, "carol"},
			{"anonymous", "", "buy bread", 2, "anonymous"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ctx := ctx
				if tt.subject != "" {
					ctx = metadata.AppendToOutgoingContext(ctx, "x-bouncer-subject", tt.subject)
				}
				resp, err := call(ctx, "AddNote", g.addNoteRequest, g.note, map[string]string{"text": tt.text})
				if err != nil {
					t.Fatal(err)
				}
				id := resp.Get(g.note.Fields().ByName("id")).Int()
				if id != tt.wantID || str(resp, "text") != tt.text || str(resp, "author") != tt.wantAuthor {
					t.Errorf("got id %d, text %q, author %q; want %d, %q, %q", id, str(resp, "text"), str(resp, "author"), tt.wantID, tt.text, tt.wantAuthor)
				}
			})
		}
	})
	t.Run("AddNote without a text", func(t *testing.T) {
		_, err := call(ctx, "AddNote", g.addNoteRequest, g.note, map[string]string{"text": "  "})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("got %v, want INVALID_ARGUMENT", err)
		}
	})
	t.Run("health", func(t *testing.T) {
		resp, err := grpc_health_v1.NewHealthClient(cc).Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: "greeter.v1.Greeter"})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
			t.Errorf("got %v, want SERVING", resp.GetStatus())
		}
	})
}
