// Package linkproxy is a TCP proxy for tests that puts a slow, breakable
// network link between two processes on one machine: a region's
// instances and another region's Redis, say.
//
// A Proxy listens on a free loopback port and forwards each connection
// to its target, in both directions. It delays each chunk of bytes it
// reads by Options.Delay (plus up to Options.Jitter), in each direction,
// so that a round trip through it grows by twice the delay; bytes keep
// their order. Partition makes the link go dark as a real partition
// does: nothing is delivered and nothing is reset, so a client waits
// until its own deadline; Heal brings the link back.
//
// What a partition held is delivered when it heals, not dropped. On a
// real link TCP retransmits what a partition lost, and a connection that
// outlives the partition receives every byte, in order; no network can
// take bytes out of the middle of a TCP stream (a Redis client would
// read a reply with a hole in it, which no real failure produces).
//
// The proxy works in real time, reading the system clock: it exists to
// slow down real sockets between real processes, which a fake clock
// cannot do. Tests that use it should bound times from below only.
package linkproxy
