//go:build !linux

package redistest

import "os/exec"

// dieWithParent does nothing where the system cannot.
func dieWithParent(*exec.Cmd) {}
