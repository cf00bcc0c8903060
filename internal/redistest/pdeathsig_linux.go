package redistest

import (
	"os/exec"
	"syscall"
)

// dieWithParent has cmd killed when the test binary dies, so that a
// test killed by its timeout leaves no server behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
