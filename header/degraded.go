package header

// Degraded names the field that marks an answer decided without the
// shared store (a store error decided by the rule's on_store_error
// policy): "Bouncer-Degraded: true", an HTTP header, or as gRPC metadata
// (whose keys are lower case) "bouncer-degraded: true". Every edge and
// service writes it under this name.
const Degraded = "Bouncer-Degraded"
