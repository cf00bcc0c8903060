// Package simulate is the simulator behind "bouncer simulate": it runs
// rate-limit algorithms over a traffic pattern on a virtual clock (it never
// sleeps) and reports, per row of time, what each admitted and refused, as
// text, CSV and an SVG chart. It calls the same algorithm code as the
// stores (package algo), on one key.
//
// Parse reads the command line (the flags are the simulator's input
// grammar: its validation names the flag at fault, so the flags are
// defined here beside it), Run runs it, and Usage describes it. The
// command in cmd/bouncer wires these to its output streams and exit codes.
//
// Files: simulate.go holds the flags and their validation, traffic.go the
// traffic patterns, sim.go the run itself, text.go the text and CSV
// tables, svg.go the chart.
package simulate
