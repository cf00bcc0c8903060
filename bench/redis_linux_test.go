package bench

import (
	"os/exec"
	"syscall"
)

// setDeathSignal has the kernel kill cmd if the benchmark dies without
// stopping it.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
