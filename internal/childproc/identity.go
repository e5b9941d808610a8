package childproc

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrNotRoot is returned by Start for a child that is to run as another
// user or group while mcpmux does not run as root.
var ErrNotRoot = errors.New("mcpmux must run as root")

// ProtectSelf makes the calling process non-dumpable: only root (strictly,
// CAP_SYS_PTRACE) may then read its /proc/<pid>/environ, mem, fd and maps,
// or ptrace it, so a child running as the same user cannot read the
// secrets mcpmux holds. It also means the process writes no core dump.
// exec resets it, so every process that must keep it calls this itself.
func ProtectSelf() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return nil
}

// ids is who a child runs as.
type ids struct {
	uid, gid uint32
}

// credential resolves a Spec's User and Group. It returns nil when neither
// is set, and the ids to run as otherwise; change says whether they differ
// from the process's own (and so need root).
func credential(userSpec, groupSpec string) (id *ids, change bool, err error) {
	if userSpec == "" && groupSpec == "" {
		return nil, false, nil
	}
	euid, egid := uint32(os.Geteuid()), uint32(os.Getegid())
	id = &ids{uid: euid, gid: egid}
	if userSpec != "" {
		u, err := lookupUser(userSpec)
		if err != nil {
			return nil, false, err
		}
		id.uid = u.uid
		if groupSpec == "" {
			if !u.known {
				return nil, false, fmt.Errorf("user %s: not in the user database, so it has no group: set group too", userSpec)
			}
			id.gid = u.gid
		}
	}
	if groupSpec != "" {
		if id.gid, err = lookupGroup(groupSpec); err != nil {
			return nil, false, err
		}
	}
	change = id.uid != euid || id.gid != egid
	if change && euid != 0 {
		if id.uid != euid {
			return nil, false, fmt.Errorf("user %s: %w to start a child as another user", userSpec, ErrNotRoot)
		}
		if groupSpec == "" {
			groupSpec = strconv.Itoa(int(id.gid)) + " (the group of user " + userSpec + ")"
		}
		return nil, false, fmt.Errorf("group %s: %w to start a child in another group", groupSpec, ErrNotRoot)
	}
	return id, change, nil
}

type userEntry struct {
	uid, gid uint32
	known    bool // in the user database
	name     string
	home     string
}

// lookupUser takes a name or a numeric id. A numeric id need not be in the
// user database, but then it has no primary group.
func lookupUser(spec string) (userEntry, error) {
	if n, ok := numericID(spec); ok {
		u, err := user.LookupId(spec)
		if err != nil {
			return userEntry{uid: n}, nil
		}
		return entryOf(spec, u)
	}
	u, err := user.Lookup(spec)
	if err != nil {
		return userEntry{}, fmt.Errorf("user %s: %w", spec, err)
	}
	return entryOf(spec, u)
}

func entryOf(spec string, u *user.User) (userEntry, error) {
	uid, ok := numericID(u.Uid)
	gid, gok := numericID(u.Gid)
	if !ok || !gok {
		return userEntry{}, fmt.Errorf("user %s: non-numeric ids %s:%s in the user database", spec, u.Uid, u.Gid)
	}
	return userEntry{uid: uid, gid: gid, known: true, name: u.Username, home: u.HomeDir}, nil
}

func lookupGroup(spec string) (uint32, error) {
	if n, ok := numericID(spec); ok {
		return n, nil
	}
	g, err := user.LookupGroup(spec)
	if err != nil {
		return 0, fmt.Errorf("group %s: %w", spec, err)
	}
	n, ok := numericID(g.Gid)
	if !ok {
		return 0, fmt.Errorf("group %s: non-numeric id %s in the group database", spec, g.Gid)
	}
	return n, nil
}

func numericID(s string) (uint32, bool) {
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), err == nil
}

// UserEnviron returns parent with HOME and USER describing userSpec (a name
// or a numeric id, as in Spec.User) rather than mcpmux's own user, for use
// as the parent environment of a child that runs as userSpec; a user with
// no database entry gets neither. With userSpec "" it returns parent. A
// lookup failure is Start's to report, so here it only drops the two.
func UserEnviron(parent []string, userSpec string) []string {
	if userSpec == "" {
		return parent
	}
	env := slices.DeleteFunc(slices.Clone(parent), func(kv string) bool {
		return strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "USER=")
	})
	if u, err := lookupUser(userSpec); err == nil && u.known {
		env = append(env, "HOME="+u.home, "USER="+u.name)
	}
	return env
}

// sysCredential is what the kernel is asked to switch to in the forked
// child: supplementary groups are cleared, so the child has its gid alone.
func (id *ids) sysCredential() *syscall.Credential {
	return &syscall.Credential{Uid: id.uid, Gid: id.gid, Groups: []uint32{}}
}

// arg and parseIDs carry the ids to the supervisor, which runs as root and
// switches the child it starts.
func (id *ids) arg() string {
	return fmt.Sprintf("%d:%d", id.uid, id.gid)
}

func parseIDs(s string) (*ids, error) {
	u, g, ok := strings.Cut(s, ":")
	uid, uok := numericID(u)
	gid, gok := numericID(g)
	if !ok || !uok || !gok {
		return nil, fmt.Errorf("bad ids %q: want UID:GID", s)
	}
	return &ids{uid: uid, gid: gid}, nil
}
