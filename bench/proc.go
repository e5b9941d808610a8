package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// procInfo is what /proc tells of one process of a target's tree.
type procInfo struct {
	pid  int
	comm string
	// rss and hwm are VmRSS and VmHWM (the peak of VmRSS over the
	// process's life), in KiB.
	rss, hwm int64
}

// treeOf returns root and every descendant of it that is alive, reading
// the parent of each process from /proc/PID/stat.
func treeOf(root int) []procInfo {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(pid); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []procInfo
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if info, ok := readStatus(pid); ok {
			out = append(out, info)
		}
		queue = append(queue, children[pid]...)
	}
	return out
}

// statFields returns the fields of /proc/PID/stat after the command name,
// which is in parentheses and may itself hold spaces or parentheses: the
// first is the state (field 3 of proc(5)).
func statFields(pid int) ([]string, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(string(b[i+1:])), true
}

// parentOf reads the ppid field of /proc/PID/stat.
func parentOf(pid int) (int, bool) {
	f, ok := statFields(pid)
	if !ok || len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

func readStatus(pid int) (procInfo, bool) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return procInfo{}, false
	}
	defer f.Close()
	info := procInfo{pid: pid}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Name":
			info.comm = v
		case "VmRSS":
			info.rss = kib(v)
		case "VmHWM":
			info.hwm = kib(v)
		}
	}
	return info, info.comm != ""
}

func kib(v string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64)
	return n
}

// memory sums a tree's figures in MiB: all of it, and the part that is not
// a benchmark child (the proxy and every helper process it started).
type memory struct {
	treeHWM, proxyHWM, rootHWM float64
	treeRSS, proxyRSS, rootRSS float64
	procs, proxyProcs          int
}

func measureTree(root int, childComm string) memory {
	var m memory
	for i, p := range treeOf(root) {
		hwm, rss := float64(p.hwm)/1024, float64(p.rss)/1024
		m.treeHWM += hwm
		m.treeRSS += rss
		m.procs++
		if i == 0 {
			m.rootHWM, m.rootRSS = hwm, rss
		}
		if p.comm != childComm {
			m.proxyHWM += hwm
			m.proxyRSS += rss
			m.proxyProcs++
		}
	}
	return m
}

// descendantsNamed returns the pids of root's descendants whose command
// name is comm.
func descendantsNamed(root int, comm string) []int {
	var out []int
	for _, p := range treeOf(root) {
		if p.comm == comm && p.pid != root {
			out = append(out, p.pid)
		}
	}
	return out
}

func mib(v float64) string { return fmt.Sprintf("%.1f", v) }

// clockTicks is the kernel's clock tick (USER_HZ) that /proc/PID/stat
// counts CPU time in: AT_CLKTCK of the benchmark's auxiliary vector, or
// 100 (Linux's value everywhere) if that cannot be read.
var clockTicks = func() float64 {
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return 100
	}
	const atClkTck = 17
	for i := 0; i+16 <= len(b); i += 16 {
		key := binary.NativeEndian.Uint64(b[i:])
		if key == atClkTck {
			if v := binary.NativeEndian.Uint64(b[i+8:]); v > 0 {
				return float64(v)
			}
		}
		if key == 0 {
			break
		}
	}
	return 100
}()

// cpuTicks returns utime+stime of pid (every thread of it, alive or
// ended), in clock ticks, from /proc/PID/stat.
func cpuTicks(pid int) (int64, bool) {
	// After the command: state (field 3) ... utime (14), stime (15).
	f, ok := statFields(pid)
	if !ok || len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	return u + s, err1 == nil && err2 == nil
}

// treeCPU is the CPU time a target's tree has used so far, in clock ticks:
// the target's own process, and its descendants that are not benchmark
// children (the helpers a proxy starts, such as mcpmux's supervisor).
type treeCPU struct{ own, helpers int64 }

func readTreeCPU(root int, childComm string) treeCPU {
	var c treeCPU
	for i, p := range treeOf(root) {
		t, _ := cpuTicks(p.pid)
		switch {
		case i == 0:
			c.own = t
		case p.comm != childComm:
			c.helpers += t
		}
	}
	return c
}

// usPerCall converts the ticks between two readings into microseconds per
// call.
func usPerCall(before, after int64, calls int) float64 {
	return float64(after-before) / clockTicks * 1e6 / float64(calls)
}

// listeningPort returns a TCP port pid listens on at 127.0.0.1, found by
// matching the socket inodes of its open files against /proc/PID/net/tcp;
// ok is false while it listens on none.
func listeningPort(pid int) (port int, ok bool) {
	fds, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	if err != nil {
		return 0, false
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "fd", fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "net", "tcp"))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		f := strings.Fields(line)
		if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
			continue
		}
		addr, portHex, ok := strings.Cut(f[1], ":")
		if !ok || addr != "0100007F" && addr != "00000000" {
			continue
		}
		if p, err := strconv.ParseUint(portHex, 16, 16); err == nil {
			return int(p), true
		}
	}
	return 0, false
}
