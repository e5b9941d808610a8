package main

import (
	"os"
	"testing"

	"github.com/mcpmux/mcpmux/internal/childproc"
)

// The test binary is also the supervisor, as mcpmux is: serve starts one
// from os.Executable (startSpawner) before it reads the config, and a test
// binary that ran its tests instead never exits when serve stops it.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == childproc.SupervisorArg {
		os.Exit(childproc.RunSupervisor())
	}
	os.Exit(m.Run())
}
