package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
)

// startProfiles starts the profiles that the environment asks for and
// returns what writes them out. Off unless MCPMUX_CPUPROFILE or
// MCPMUX_MEMPROFILE names a file: they are for measuring mcpmux (bench/),
// not for production. Each file name gets ".PID" appended, since one
// benchmark run starts many mcpmux processes.
func startProfiles() (stop func()) {
	cpu, mem := os.Getenv("MCPMUX_CPUPROFILE"), os.Getenv("MCPMUX_MEMPROFILE")
	if cpu == "" && mem == "" {
		return func() {}
	}
	suffix := "." + strconv.Itoa(os.Getpid())
	var cpuFile *os.File
	if cpu != "" {
		f, err := os.Create(cpu + suffix)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			cpuFile = f
		} else {
			fmt.Fprintf(os.Stderr, "mcpmux: MCPMUX_CPUPROFILE: %v\n", err)
		}
	}
	return func() {
		if cpuFile != nil {
			pprof.StopCPUProfile()
			_ = cpuFile.Close()
		}
		if mem != "" {
			f, err := os.Create(mem + suffix)
			if err != nil {
				fmt.Fprintf(os.Stderr, "mcpmux: MCPMUX_MEMPROFILE: %v\n", err)
				return
			}
			runtime.GC() // the heap profile's in-use figures are as of the last GC
			_ = pprof.Lookup("heap").WriteTo(f, 0)
			_ = f.Close()
		}
	}
}
