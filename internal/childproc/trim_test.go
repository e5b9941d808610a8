package childproc

import (
	"slices"
	"strings"
	"testing"
)

// Only read-only private file mappings with no written page are trimmed: a
// relocated page swapped out shows Anonymous 0 but Swap above it, and
// dropping it would map the file's unrelocated bytes back in.
func TestUnwrittenFileMappings(t *testing.T) {
	smaps := `00400000-00401000 r-xp 00000000 08:01 12 /usr/bin/mcpmux
Anonymous:             0 kB
Swap:                  0 kB
Private_Dirty:         0 kB
00401000-00402000 r--p 00001000 08:01 12 /usr/bin/mcpmux
Anonymous:             4 kB
Swap:                  0 kB
00402000-00403000 r--p 00002000 08:01 12 /usr/bin/mcpmux
Anonymous:             0 kB
Swap:                  4 kB
Private_Dirty:         0 kB
00403000-00404000 r--p 00003000 08:01 12 /usr/bin/mcpmux
Anonymous:             0 kB
Swap:                  0 kB
Private_Dirty:         4 kB
00404000-00405000 rw-p 00004000 08:01 12 /usr/bin/mcpmux
Anonymous:             0 kB
00405000-00406000 r--s 00000000 08:01 13 /dev/shm/x
Anonymous:             0 kB
00406000-00407000 r--p 00000000 00:00 0
Anonymous:             0 kB
`
	got := unwrittenFileMappings(strings.NewReader(smaps))
	if want := []mapping{{0x400000, 0x401000}}; !slices.Equal(got, want) {
		t.Errorf("got %x, want %x", got, want)
	}
}
