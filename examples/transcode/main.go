// Transcode is the upstream of the example transcoding gateway
// (gateway.yaml): a gRPC Greeter on 127.0.0.1:9094 whose methods carry
// google.api.http bindings, which bouncer gateway serves as JSON over
// HTTP on 127.0.0.1:8094, 3 requests a minute per API key.
//
//	go run ./examples/transcode     # the gRPC side
//	go run ./cmd/bouncer gateway --config examples/transcode/gateway.yaml
//
// The service is built from its descriptors at run time (dynamicpb), so
// the example needs no protoc. greeter.pb, the descriptor set the gateway
// reads, is what
//
//	go run ./examples/transcode -write-descriptor examples/transcode/greeter.pb
//
// writes; a test checks that it still is.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9094", "the gRPC server's address")
	write := flag.String("write-descriptor", "", "write the descriptor set to this file and exit")
	flag.Parse()
	if *write != "" {
		if err := writeDescriptorSet(*write); err != nil {
			log.Fatal(err)
		}
		return
	}
	srv, err := newServer()
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("gRPC greeter on %s. With the gateway running, try:\n\n", ln.Addr())
	fmt.Printf("  curl -i -H 'X-API-Key: demo-alice-key' localhost:8094/v1/hello/world\n")
	fmt.Printf("  curl -i -H 'X-API-Key: demo-alice-key' -H 'Content-Type: application/json' -d '{\"text\":\"hi\"}' localhost:8094/v1/notes\n")
	fmt.Printf("  curl -i -H 'X-API-Key: demo-bob-key' localhost:8094/v1/hello/busy\n\n")
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
		<-stop
		srv.GracefulStop()
	}()
	if err := srv.Serve(ln); err != nil {
		log.Fatal(err)
	}
}
