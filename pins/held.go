package pins

// The held record: what the serve processes of one pin file hold (a tool
// or prompt new or changed that pinning keeps out of the catalog), with
// the definitions, so that mcpmux pins diff and approve act on exactly
// what is held, without starting children of their own, which may not
// list it (a child adds tools as it runs, or changed since).
//
// Each serve process has its own record, a JSON file in the directory
// PIN_FILE.held, which it flocks for as long as it exists: a record whose
// lock is free is of a process that is gone (killed, or on a host that
// died), and whoever reads it next removes it. Records are written and
// read under the pin file's flock (lockFile), so a reader never sees part
// of one; replicas sharing a pin file never write each other's.

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// HeldDir is the directory of the held records of the pin file at path.
func HeldDir(path string) string { return path + ".held" }

// Holder is a serve process that holds definitions.
type Holder struct {
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	Written time.Time `json:"written"`
}

// Held is a definition that running serve processes hold: as approving it
// pins it, and who holds it.
type Held struct {
	Pin
	Holders []Holder
}

// heldFile is one process's record.
type heldFile struct {
	Holder
	Held []heldEntry `json:"held"`
}

type heldEntry struct {
	Kind   Kind                       `json:"kind"`
	Name   string                     `json:"name"`
	Digest string                     `json:"digest"`
	Fields map[string]json.RawMessage `json:"fields"`
}

// heldRecord is a Store's own record.
type heldRecord struct {
	mu      sync.Mutex
	f       *os.File // the record, flocked; nil while nothing is held
	started time.Time
	done    bool // ForgetHeld was called
	warned  bool // a failed write was logged
}

// RecordHeld makes this process's record hold exactly held, the
// definitions the catalog leaves out now, and removes it when held is
// empty. A Store opened with NoWrite records nothing. A record that cannot
// be written is logged once until one can; nothing fails.
func (s *Store) RecordHeld(held []Pin) {
	if s.noWrite {
		return
	}
	r := &s.held
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done || len(held) == 0 && r.f == nil {
		return
	}
	err := s.writeHeld(held)
	switch {
	case err != nil && !r.warned:
		s.log.Warn().Err(err).Int("held", len(held)).
			Msg("the record of what this process holds cannot be written: mcpmux pins diff and approve start the servers to compare instead")
		r.warned = true
	case err == nil && r.warned:
		s.log.Info().Msg("the record of what this process holds is written again")
		r.warned = false
	}
}

// ForgetHeld removes this process's record, for good: serve calls it as it
// stops, once nothing records any more.
func (s *Store) ForgetHeld() {
	r := &s.held
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.done && r.f != nil {
		_ = s.writeHeld(nil)
	}
	r.done = true
}

// writeHeld writes the record, called with held.mu held.
func (s *Store) writeHeld(held []Pin) error {
	r := &s.held
	unlock, err := lockFile(s.path)
	if err != nil {
		return err
	}
	defer unlock()
	dir := HeldDir(s.path)
	if len(held) == 0 {
		name := r.f.Name()
		err := os.Remove(name)
		_ = r.f.Close() // lets go of its lock
		r.f = nil
		_ = os.Remove(dir) // only if no other process has a record
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("held record %s: %w", name, err)
		}
		return nil
	}
	if r.f != nil && !stillNamed(r.f) {
		// Removed by hand, or with its directory: written anew, so that
		// readers find it.
		_ = r.f.Close()
		r.f = nil
	}
	if r.f == nil {
		f, err := createRecord(dir)
		if err != nil {
			return err
		}
		r.f = f
		if r.started.IsZero() {
			r.started = time.Now()
		}
	}
	host, _ := os.Hostname()
	rec := heldFile{Holder: Holder{Host: host, PID: os.Getpid(), Started: r.started, Written: time.Now()}}
	for _, p := range held {
		e := heldEntry{Kind: p.Kind, Name: p.Name, Digest: p.Digest, Fields: make(map[string]json.RawMessage, len(p.Fields))}
		for _, f := range p.Fields {
			e.Fields[f.Key] = json.RawMessage(f.Value)
		}
		rec.Held = append(rec.Held, e)
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("held record: %w", err)
	}
	// In place, under the pin file's lock, which every reader takes: the
	// record's own lock is on this file, which a rename would replace.
	if err = r.f.Truncate(0); err == nil {
		if _, err = r.f.WriteAt(append(data, '\n'), 0); err == nil {
			err = r.f.Sync()
		}
	}
	if err != nil {
		return fmt.Errorf("held record %s: %w", r.f.Name(), err)
	}
	return nil
}

// stillNamed reports whether f's name still names f.
func stillNamed(f *os.File) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(f.Name())
	return err == nil && os.SameFile(a, b)
}

// createRecord creates a record of this process in dir and takes its lock.
func createRecord(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("held records: %w", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := filepath.Join(dir, fmt.Sprintf("serve-%d-%s.json", os.Getpid(), hex.EncodeToString(b[:])))
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("held record: %w", err)
	}
	if err := flock(f, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		_ = os.Remove(name)
		return nil, fmt.Errorf("held record %s: locking it: %w", name, err)
	}
	return f, nil
}

// flock is unix.Flock on f, again when a signal interrupts it.
func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// ReadHeld returns what the running serve processes of the pin file at
// path hold, one Held per definition (kind, name and digest) with every
// process that holds it, tools first, then by name; none when no process
// has a record. The record of a process that is gone is removed. A record
// that cannot be read is left out, and the error names it; the others are
// returned all the same.
func ReadHeld(path string) ([]Held, error) {
	dir := HeldDir(path)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	unlock, err := lockFile(path)
	if err != nil {
		return nil, err
	}
	defer unlock()
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("held records: %w", err)
	}
	type id struct {
		kind         Kind
		name, digest string
	}
	byID := map[id]*Held{}
	var errs []error
	for _, name := range names {
		rec, live, err := readRecord(name)
		switch {
		case err != nil:
			errs = append(errs, err)
			continue
		case !live:
			continue
		}
		for _, e := range rec.Held {
			p, err := e.pin()
			if err != nil {
				errs = append(errs, fmt.Errorf("held record %s: %w", name, err))
				continue
			}
			k := id{p.Kind, p.Name, p.Digest}
			if byID[k] == nil {
				byID[k] = &Held{Pin: p}
			}
			byID[k].Holders = append(byID[k].Holders, rec.Holder)
		}
	}
	out := make([]Held, 0, len(byID))
	for _, h := range byID {
		slices.SortFunc(h.Holders, func(a, b Holder) int { return cmp.Or(strings.Compare(a.Host, b.Host), cmp.Compare(a.PID, b.PID)) })
		out = append(out, *h)
	}
	slices.SortFunc(out, func(a, b Held) int {
		return cmp.Or(cmp.Compare(kindOrder(a.Kind), kindOrder(b.Kind)), strings.Compare(a.Name, b.Name), strings.Compare(a.Digest, b.Digest))
	})
	return out, errors.Join(errs...)
}

// readRecord reads the record at name, unless its process is gone: then
// it removes it and reports it not live.
func readRecord(name string) (rec heldFile, live bool, err error) {
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return rec, false, nil
	}
	if err != nil {
		return rec, false, fmt.Errorf("held record: %w", err)
	}
	defer f.Close()
	switch err := flock(f, unix.LOCK_EX|unix.LOCK_NB); {
	case err == nil:
		// No process holds it: its serve is gone.
		_ = os.Remove(name)
		return rec, false, nil
	case !errors.Is(err, unix.EWOULDBLOCK):
		return rec, false, fmt.Errorf("held record %s: %w", name, err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return rec, false, fmt.Errorf("held record %s: %w", name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return rec, false, fmt.Errorf("held record %s: %w", name, err)
	}
	return rec, true, nil
}

// pin is the definition e records, checked against its digest.
func (e heldEntry) pin() (Pin, error) {
	if e.Kind != Tool && e.Kind != Prompt || e.Name == "" || strings.Trim(e.Name, nameChars) != "" {
		return Pin{}, fmt.Errorf("an entry %s %q: not a tool or prompt name", e.Kind, e.Name)
	}
	d := Def{Kind: e.Kind, Name: e.Name}
	for k, raw := range e.Fields {
		v, err := canonicalJSON(raw)
		if err != nil {
			return Pin{}, fmt.Errorf("%s %s: field %q: %w", e.Kind, e.Name, k, err)
		}
		d.Fields = append(d.Fields, Field{k, string(v)})
	}
	slices.SortFunc(d.Fields, func(a, b Field) int { return compareStrings(a.Key, b.Key) })
	if d.Field(fieldServer) == "" || d.Field(fieldName) == "" {
		return Pin{}, fmt.Errorf("%s %s: it needs both %q and %q", e.Kind, e.Name, fieldServer, fieldName)
	}
	if d.Digest() != e.Digest {
		return Pin{}, fmt.Errorf("%s %s: the digest does not match its fields", e.Kind, e.Name)
	}
	return Pin{Def: d, Digest: e.Digest}, nil
}
