// Package bench measures Bouncer's in-memory store side by side with the
// peer libraries, in one run, so that the ratios in docs/benchmarks.md
// compare numbers taken on the same machine at the same moment.
//
// It is a module of its own so that the peers never enter Bouncer's
// go.mod. It holds only benchmarks, a quick test that each peer is
// configured as intended, and ratios.go, which turns the output of
// go test -bench into the tables of docs/benchmarks.md:
//
//	go test -run '^$' -bench . -benchtime 1s -count 3 ./... | tee out.txt
//	go run ratios.go < out.txt
package bench
