package pipeline

// What may be read of the pipeline's state from outside, for status and
// for the tests that drive a whole Mux: counts, never the state itself.

// RoundAsks reports the requests of its child the round waiting for a
// retry under state holds: handed to the client (asked) and not yet
// (pending); ok is false if no round waits under state.
func (m *Pipeline) RoundAsks(state string) (pending, asked int, ok bool) {
	v, ok := m.rounds.byToken.Load(state)
	if !ok {
		return 0, 0, false
	}
	r := v.(*round)
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending), len(r.asked), true
}

// RoundsAsking is how many rounds have asked their client something, of
// every identity.
func (m *Pipeline) RoundsAsking() int64 { return m.rounds.waiting.Load() }
