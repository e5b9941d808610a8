package config

import (
	"net"
	"strconv"
	"time"
)

// DefaultPeerDialTimeout bounds connecting to a peer replica.
const DefaultPeerDialTimeout = 2 * time.Second

// Replicas is the [replicas] table: several mcpmux replicas behind one load
// balancer, each answering any request. Left out, mcpmux is one replica,
// its ids exactly as without the table.
type Replicas struct {
	// Enabled is true when the file has a [replicas] table; the other
	// fields are then all valid.
	Enabled bool
	// KeyFile is the absolute path of the key file the replicas share (a
	// current and an optional previous key, read again when it changes).
	// A relative key_file is taken relative to the config file's directory.
	KeyFile string
	// Listen is the peer listener's address: where the other replicas
	// forward the requests this one owns. It is never the public listen.
	Listen string
	// Advertise is how the other replicas reach Listen, host:port with a
	// host, ${VAR} expanded (say "${POD_IP}:7310"); sealed ids name it as
	// their owner.
	Advertise string
	// Exactly one of Peers and PeersDNS says who the other replicas are:
	// the only addresses a request is ever forwarded to. Peers is a static
	// list of advertised addresses; PeersDNS a name (a Kubernetes headless
	// Service) whose addresses, each with Listen's port, are the peers.
	Peers    []string
	PeersDNS string
	// DialTimeout bounds connecting to a peer: one that does not answer
	// within it is taken as gone. > 0.
	DialTimeout time.Duration
}

func (d *decoder) replicas(root *table, r *Replicas) {
	*r = Replicas{} // off: the zero value
	if _, ok := root.m["replicas"]; !ok {
		root.lookup("replicas")
		return
	}
	t := root.table("replicas")
	if t.m == nil {
		return
	}
	r.Enabled, r.DialTimeout = true, DefaultPeerDialTimeout
	required := func(key, what string, given bool) {
		if _, ok := t.m[key]; !ok {
			t.selfErrorf("%s is required: %s", key, what)
		} else if given {
			t.errorf(key, "must not be empty")
		}
	}
	if t.str("key_file", &r.KeyFile) && r.KeyFile != "" {
		r.KeyFile = d.abs(r.KeyFile)
	} else {
		required("key_file", "the file holding the key the replicas share (a Kubernetes Secret mount)", r.KeyFile == "" && t.m["key_file"] == "")
	}
	if v, ok := d.expanded(t, "listen"); ok {
		if msgs := addressProblems(v); len(msgs) > 0 {
			t.errorf("listen", "%s", msgs[0])
		} else {
			r.Listen = v
		}
	} else {
		required("listen", `the peer listener's address, such as ":7310"`, t.m["listen"] == "")
	}
	if v, ok := d.expanded(t, "advertise"); ok {
		if msg := peerAddressProblem(v); msg != "" {
			t.errorf("advertise", "%s", msg)
		} else {
			r.Advertise = v
		}
	} else {
		required("advertise", `how the other replicas reach this one's listen, such as "${POD_IP}:7310"`, t.m["advertise"] == "")
	}
	if t.strs("peers", &r.Peers) {
		for i, p := range r.Peers {
			if msg := peerAddressProblem(p); msg != "" {
				t.elemErrorf("peers", i, "%s", msg)
			}
		}
	}
	if t.str("peers_dns", &r.PeersDNS) && r.PeersDNS != "" && !hostnameRE.MatchString(r.PeersDNS) {
		t.errorf("peers_dns", "invalid host name %q", r.PeersDNS)
	}
	switch _, static := t.m["peers"]; {
	case static && r.PeersDNS != "":
		t.selfErrorf("set either peers (a static list) or peers_dns (a headless Service's name), not both")
	case !static && r.PeersDNS == "":
		t.selfErrorf("peers or peers_dns is required: who the other replicas are")
	}
	t.duration("dial_timeout", &r.DialTimeout)
	t.finish()
}

// expanded is the string at key with ${VAR} expanded; false when it is
// missing, empty or in error (reported).
func (d *decoder) expanded(t *table, key string) (string, bool) {
	var s string
	if !t.str(key, &s) || s == "" {
		return "", false
	}
	v, errs := expand(s, d.getenv)
	for _, err := range errs {
		t.errorf(key, "%v", err)
	}
	return v, len(errs) == 0 && v != ""
}

// peerAddressProblem says what is wrong with a peer's address, or "": it
// must be host:port with a host (an address to dial, not to listen on) and
// a port other than 0.
func peerAddressProblem(addr string) string {
	if msgs := addressProblems(addr); len(msgs) > 0 {
		return msgs[0]
	}
	host, port, _ := net.SplitHostPort(addr)
	if n, _ := strconv.Atoi(port); n == 0 {
		return "a peer's address needs a port other than 0, not " + strconv.Quote(addr)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return "a peer's address needs a host the other replicas can dial, not " + strconv.Quote(addr)
	}
	return ""
}

// checkReplicas checks what [replicas] shares with [upstream]: the peer
// listener is never one of the other listeners.
func (d *decoder) checkReplicas(root *table, cfg *Config) {
	r, u := cfg.Replicas, cfg.Upstream
	if !r.Enabled || r.Listen == "" {
		return
	}
	t := root.table("replicas")
	for _, o := range []struct{ key, addr string }{{"listen", u.Listen}, {"admin_listen", u.AdminListen}, {"debug_listen", u.DebugListen}} {
		if o.addr != "" && sameAddress(o.addr, r.Listen) {
			t.errorf("listen", "must differ from [upstream] %s (%q): the peer listener is never the public one", o.key, o.addr)
		}
	}
}
