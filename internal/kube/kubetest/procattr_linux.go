package kubetest

import "syscall"

// sysProcAttr kills a child when the test binary dies without Stop (a panic,
// go test's -timeout), so no control plane outlives it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
