package main

import (
	"fmt"
	"io"

	"github.com/bouncerhq/bouncer/internal/simulate"
)

// runSimulate runs bouncer simulate: package simulate parses and runs it,
// and this wires it to the streams and exit codes.
func runSimulate(args []string, stdout, stderr io.Writer) int {
	sim, err := simulate.Parse(args) // run answers --help before
	if err != nil {
		fmt.Fprintf(stderr, "bouncer simulate: %v\nRun 'bouncer help simulate' for usage.\n", err)
		return exitUsage
	}
	for _, n := range sim.Notes() {
		fmt.Fprintf(stderr, "bouncer simulate: note: %s\n", n)
	}
	if err := sim.Run(stdout); err != nil {
		fmt.Fprintf(stderr, "bouncer simulate: %v\n", err)
		return exitFail
	}
	return exitOK
}
