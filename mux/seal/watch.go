package seal

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/internal/dirwatch"
)

// Timing of Watch, as for the other watched files.
const (
	settleDelay     = 100 * time.Millisecond
	maxDelay        = time.Second
	rewatchInterval = time.Second
)

// Watch keeps r's keys those of the key file at path until ctx is done:
// whenever the file's directory changes (an editor's rename, Kubernetes'
// ..data swap of a Secret), the file is read again once the directory has
// been quiet for about 100ms. A file that cannot be used then is logged as
// an error and the keys in force stay: unlike a JWKS, which may be revoked,
// a key ring that went empty would make every replica refuse the ids of
// every other. watching, if not nil, is called once the directory is
// watched (tests). Watch returns nil once ctx is done and everything it
// started has stopped, or an error if it could not start watching.
func (r *Ring) Watch(ctx context.Context, path string, log zerolog.Logger, watching func()) error {
	log = log.With().Str("key_file", path).Logger()
	reload := func() {
		k, err := ReadKeys(path)
		if err != nil {
			log.Error().Err(err).Strs("keys", r.Fingerprints()).Msg("replica key file not usable; the keys in force stay")
			return
		}
		was := r.Fingerprints()
		r.Set(k)
		if now := r.Fingerprints(); !slices.Equal(was, now) {
			log.Info().Strs("keys", now).Strs("was", was).Msg("replica keys reloaded")
		}
	}
	err := dirwatch.Watch(ctx, filepath.Dir(path), dirwatch.Options{
		Settle:   settleDelay,
		MaxDelay: maxDelay,
		Rewatch:  rewatchInterval,
		Log:      log,
		ErrorMsg: "watching the replica key directory",
		GoneMsg:  "replica key directory is gone; the keys in force stay",
		BackMsg:  "replica key directory is back",
		Watching: watching,
	}, reload)
	if err != nil {
		return fmt.Errorf("replica keys: %w", err)
	}
	return nil
}
