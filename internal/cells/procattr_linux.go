package cells

import "syscall"

// proxyAttr puts HAProxy in a process group of its own, so that a Ctrl-C in the terminal reaches the process that
// started it, which stops it in its turn (make run-cells: after the cells), and has the kernel send it SIGTERM should
// that process die without stopping it (kill -9): a proxy left running would hold its address and admin socket.
func proxyAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
