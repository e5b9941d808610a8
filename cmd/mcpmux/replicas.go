package main

import (
	"errors"
	"net/http"

	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/mux/replicas"
)

// newReplicaNode returns this replica's node when [replicas] is on, its
// ids sealed through opts; nil when it is off.
func newReplicaNode(cfg *config.Config, log zerolog.Logger, opts *mux.Options) (*replicas.Node, error) {
	if !cfg.Replicas.Enabled {
		return nil, nil
	}
	if cfg.Upstream.Listen == "" {
		return nil, errors.New("[replicas] needs the HTTP upstream: set [upstream] listen or --listen")
	}
	n, err := replicas.New(cfg.Replicas, cfg.Limits, log)
	if err != nil {
		return nil, err
	}
	opts.SealSessionID, opts.SealRequestState = n.SealSessionID, n.SealRequestState
	opts.TaskIDs = n.TaskIDs()
	log.Info().Str("advertise", n.Self()).Strs("keys", n.Keys()).Msg("serving as one of several replicas")
	return n, nil
}

// peerHandler is the peer listener's: the MCP endpoint, mcp, for requests
// another replica forwarded, and this process's boot id (replicas.BootPath).
func peerHandler(n *replicas.Node, path string, mcp http.Handler) http.Handler {
	root := http.NewServeMux()
	root.Handle(path, n.Peer(mcp))
	root.Handle(replicas.BootPath, n.PeerBoot())
	return root
}
