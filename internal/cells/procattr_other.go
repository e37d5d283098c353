//go:build !linux

package cells

import "syscall"

// proxyAttr puts HAProxy in a process group of its own (procattr_linux.go also has it stopped with its starter).
func proxyAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
