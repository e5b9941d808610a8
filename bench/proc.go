package main

import (
	"bufio"
	"bytes"
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

// parentOf reads the ppid field of /proc/PID/stat; the command name before
// it is in parentheses and may itself hold spaces or parentheses.
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
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
