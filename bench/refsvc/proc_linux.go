package refsvc

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill cmd's process when the thread that
// started it exits, so that a test binary that crashes or times out
// leaves no server running.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
