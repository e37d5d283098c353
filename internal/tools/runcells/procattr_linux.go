package main

import "syscall"

// childAttr puts a child (a cell's retentiond) in a process group of its own, so that Ctrl-C reaches runcells alone
// and it stops the cells in order, and has the kernel send it SIGTERM should runcells die without doing so (kill -9):
// a retentiond left running would keep serving a cell nobody stops.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
