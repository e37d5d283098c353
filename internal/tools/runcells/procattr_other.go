//go:build !linux

package main

import "syscall"

// childAttr puts a child in a process group of its own (procattr_linux.go also has it stopped with runcells).
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
