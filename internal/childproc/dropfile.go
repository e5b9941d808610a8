package childproc

import (
	"os"

	"golang.org/x/sys/unix"
)

// DropFilePages hands back to the kernel the resident pages of the
// process's private, read-only file mappings (code and read-only data) no
// page of which was ever written, as the supervisor's trim does: the kernel
// maps them again from the page cache as they are used. Unlike the
// supervisor, the caller keeps the kernel's fault-around, since it goes on
// running the code it drops.
func DropFilePages() { dropFilePages(false) }

// dropFilePages drops those pages; with random, a page used again is mapped
// alone (no fault-around).
func dropFilePages(random bool) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return
	}
	defer f.Close()
	for _, m := range unwrittenFileMappings(f) {
		if random {
			_ = madvise(m.start, m.end-m.start, unix.MADV_RANDOM)
		}
		_ = madvise(m.start, m.end-m.start, unix.MADV_DONTNEED)
	}
}
