package config

import (
	"reflect"
	"testing"
	"time"
)

func TestReplicas(t *testing.T) {
	if r := mustParse(t, srv, nil).Replicas; r.Enabled || !reflect.DeepEqual(r, Replicas{}) {
		t.Errorf("no [replicas]: %+v; want off", r)
	}
	src := "[replicas]\nkey_file = \"keys/replica.key\"\nlisten = \":7310\"\nadvertise = \"${POD_IP}:7310\"\n" +
		"peers_dns = \"mcpmux-peers.default.svc.cluster.local\"\ndial_timeout = \"500ms\"\n" + srv
	cfg := mustParse(t, src, map[string]string{"POD_IP": "10.1.2.3"})
	want := Replicas{Enabled: true, KeyFile: cfg.Replicas.KeyFile, Listen: ":7310", Advertise: "10.1.2.3:7310",
		PeersDNS: "mcpmux-peers.default.svc.cluster.local", DialTimeout: 500 * time.Millisecond}
	if !reflect.DeepEqual(cfg.Replicas, want) {
		t.Errorf("Replicas = %+v; want %+v", cfg.Replicas, want)
	}
	if got := cfg.Replicas.KeyFile; got[0] != '/' || got[len(got)-len("keys/replica.key"):] != "keys/replica.key" {
		t.Errorf("key_file %q not made absolute", got)
	}
	static := mustParse(t, "[replicas]\nkey_file = \"/k\"\nlisten = \"127.0.0.1:7310\"\nadvertise = \"127.0.0.1:7310\"\n"+
		"peers = [\"127.0.0.1:7310\", \"127.0.0.1:7311\"]\n"+srv, nil).Replicas
	if !reflect.DeepEqual(static.Peers, []string{"127.0.0.1:7310", "127.0.0.1:7311"}) || static.DialTimeout != DefaultPeerDialTimeout {
		t.Errorf("static peers: %+v", static)
	}
}

func TestReplicasErrors(t *testing.T) {
	const ok = "key_file = \"/k\"\nlisten = \":7310\"\nadvertise = \"10.0.0.1:7310\"\npeers = [\"10.0.0.1:7310\"]\n"
	checkErrors(t, []errorTest{
		{name: "empty table", src: "[replicas]\n" + srv,
			want: "mcpmux.toml:1: [replicas]: key_file is required: the file holding the key the replicas share (a Kubernetes Secret mount)\n" +
				"mcpmux.toml:1: [replicas]: listen is required: the peer listener's address, such as \":7310\"\n" +
				"mcpmux.toml:1: [replicas]: advertise is required: how the other replicas reach this one's listen, such as \"${POD_IP}:7310\"\n" +
				"mcpmux.toml:1: [replicas]: peers or peers_dns is required: who the other replicas are"},
		{name: "unknown key", src: "[replicas]\n" + ok + "sticky = true\n" + srv,
			want: `mcpmux.toml:6: [replicas] sticky: unknown key`},
		{name: "empty key_file", src: "[replicas]\n" + ok[len("key_file = \"/k\"\n"):] + "key_file = \"\"\n" + srv,
			want: `mcpmux.toml:5: [replicas] key_file: must not be empty`},
		{name: "advertise on every interface", src: "[replicas]\nkey_file = \"/k\"\nlisten = \":7310\"\nadvertise = \":7310\"\npeers = []\n" + srv,
			want: `mcpmux.toml:4: [replicas] advertise: a peer's address needs a host the other replicas can dial, not ":7310"`},
		{name: "advertise unset variable", src: "[replicas]\nkey_file = \"/k\"\nlisten = \":7310\"\nadvertise = \"${POD_IP}:7310\"\npeers = []\n" + srv,
			want: `mcpmux.toml:4: [replicas] advertise: environment variable POD_IP is not set`},
		{name: "peer port 0", src: "[replicas]\nkey_file = \"/k\"\nlisten = \":7310\"\nadvertise = \"a:1\"\npeers = [\"a:1\", \"b:0\"]\n" + srv,
			want: `mcpmux.toml:5: [replicas] peers[1]: a peer's address needs a port other than 0, not "b:0"`},
		{name: "both peer sources", src: "[replicas]\n" + ok + "peers_dns = \"peers\"\n" + srv,
			want: `mcpmux.toml:1: [replicas]: set either peers (a static list) or peers_dns (a headless Service's name), not both`},
		{name: "peer listener is the public one", src: "[upstream]\nlisten = \"127.0.0.1:7310\"\n[replicas]\n" + ok + srv,
			want: `mcpmux.toml:5: [replicas] listen: must differ from [upstream] listen ("127.0.0.1:7310"): the peer listener is never the public one`},
		{name: "bad dial_timeout", src: "[replicas]\n" + ok + "dial_timeout = \"0s\"\n" + srv,
			want: `mcpmux.toml:6: [replicas] dial_timeout: must be positive, not "0s"`},
	})
}
