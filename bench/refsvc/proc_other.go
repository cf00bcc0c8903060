//go:build !linux

package refsvc

import "os/exec"

// dieWithParent does nothing here: only Linux can tie a child's life to
// its parent's. Stop the servers you start.
func dieWithParent(*exec.Cmd) {}
