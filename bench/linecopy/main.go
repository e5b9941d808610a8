// Command linecopy is the floor of the benchmark: a stdio proxy that does
// nothing but copy bytes, the client's to its child and the child's back,
// on two goroutines. What it costs per call (latency, calls per second, CPU)
// is what any Go process between a client and a child pays on the machine
// measured, before it reads a single message.
//
//	linecopy COMMAND [ARG...]
package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: linecopy COMMAND [ARG...]")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		fail(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		fail(err)
	}
	if err := cmd.Start(); err != nil {
		fail(err)
	}
	go func() {
		// The client's end of input is the child's.
		_, _ = io.Copy(in, os.Stdin)
		in.Close()
	}()
	_, _ = io.Copy(os.Stdout, out)
	if err := cmd.Wait(); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "linecopy:", err)
	os.Exit(1)
}
