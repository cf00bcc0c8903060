package tlsreload_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"

	"github.com/bouncerhq/bouncer/gateway/tlsreload"
)

func Example() {
	r, err := tlsreload.New(tlsreload.Config{
		CertFile: "testdata/server.pem",
		KeyFile:  "testdata/server.key",
	}, tlsreload.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err) // names the file and the reason
		return
	}
	defer r.Close()
	// The files are watched; on SIGHUP, call r.Reload as well.

	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			fmt.Fprintln(w, "hello over", req.Proto)
		}),
		TLSConfig: r.TLSConfig(),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	go srv.ServeTLS(ln, "", "") // the certificate comes from TLSConfig
	defer srv.Close()

	// A client that trusts the test CA.
	caPEM, err := os.ReadFile("testdata/ca.pem")
	if err != nil {
		fmt.Println(err)
		return
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots, ServerName: "localhost"},
		ForceAttemptHTTP2: true,
	}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("https://" + ln.Addr().String() + "/")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(string(body))
	leaf := r.Current()
	fmt.Println("serving", leaf.Subject.CommonName, "until", leaf.NotAfter.Year())
	// Output:
	// hello over HTTP/2.0
	// serving localhost until 2126
}
