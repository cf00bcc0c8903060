// Package clientip tells which client a request comes from, for limits
// per client IP.
//
// The only address a server knows is the socket's: the peer that opened
// the connection. When that peer is a proxy of one's own, the client is
// further back, and the proxies say who it was in a forwarding header,
// X-Forwarded-For or Forwarded (RFC 7239), each appending the address of
// the peer it saw. A client can write those headers too, so a Resolver
// believes them only from the peers listed in TrustedProxies, and reads
// them right to left, the end the trusted proxies wrote: it skips every
// hop that is itself a trusted proxy and stops at the first that is not.
// Nothing to the left of that hop is read, because the client wrote it.
//
// The zero Resolver trusts no one: the client is the socket peer, and a
// client cannot choose its own key by sending a header. Key groups an
// address to a prefix, /32 for IPv4 and /64 for IPv6 by default, because
// one IPv6 client usually holds a whole /64 and could otherwise rotate
// through its addresses to escape its limit.
//
// A Resolver reads at most 64 hops and the last 4 KiB of a chain, and
// allocates nothing for a well-formed one (at most a parse error
// otherwise): no header a client sends makes it do more work or hold
// more memory than that. FromPeer serves callers other than net/http,
// such as a gRPC interceptor with the peer's address and metadata.
package clientip
