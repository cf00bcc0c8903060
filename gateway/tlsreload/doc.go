// Package tlsreload terminates TLS with a certificate that is read again
// when its files change, so that a renewed certificate is served without
// a restart.
//
// New loads a certificate, its key and, for client certificates, a CA
// bundle, and fails naming the file and the reason when one is missing,
// is not PEM, or when the key does not match the certificate. The
// Reloader then watches the files' directories, so that a write in place,
// a file renamed over the old one, a symlink swapped (certbot's live/
// links) and a Kubernetes Secret or ConfigMap volume's ..data swap are all
// seen, and loads them again once changes pause for a short debounce.
// Reload does the same on demand, for SIGHUP. A set of files that does not
// load whole — a half-written file, a new certificate whose new key has
// not arrived yet — is logged and rejected, and the certificate already
// served stays.
//
// TLSConfig gives a *tls.Config for an http.Server or tls.NewListener
// that offers HTTP/2; each handshake gets the newest good certificate and
// client CA pool. Current reports the certificate served, for logs,
// readiness checks and expiry metrics.
package tlsreload
