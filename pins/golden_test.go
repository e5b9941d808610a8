package pins

import "testing"

// goldenCases are definitions whose digests were computed by the first
// canonical form (decoded into any, re-encoded) and are written in pin
// files since: any rewrite of the canonical form must give them exactly.
var goldenCases = []struct {
	kind   Kind
	child  string
	def    string
	digest string
}{
	{Tool, "search_issues", `{"name":"search_issues","title":"Search issues","description":"Search issues and pull requests across every repository the token can see, with GitHub's query syntax.","inputSchema":{"type":"object","properties":{"q":{"type":"string","description":"query"},"sort":{"type":"string","enum":["comments","reactions","created","updated"]},"order":{"type":"string","enum":["asc","desc"]},"per_page":{"type":"integer","minimum":1,"maximum":100},"page":{"type":"integer","minimum":1}},"required":["q"]},"annotations":{"readOnlyHint":true,"openWorldHint":true}}`, "sha256:28678623eb9c084b6e2c44fab443c48d8e7efdb72f41ebedf93831517703fbcd"},
	{Tool, "t", `{ "description" : "tab\there \"q\" back\\slash \u0001 \u001f \u007f \u2028 <&> é 😀 \ud83d\ude00", "inputSchema" : { "z":1, "a": [ 1.50e+3, -0, 12345678901234567890, 1E-7, true, false, null, {}, [] ] } }`, "sha256:e14d608b0a2ef7da9cf08d55b041cce3258ae27ca5d421a74bfa0a35cceaafd3"},
	{Tool, "u", "{\"description\":\"bad \xff\xfe utf8, a real \uFFFD, \\ufffd, a lone \\ud800 surrogate, cr \\r lf \\n bs \\b ff \\f slash \\/\",\"title\":\"T\",\"outputSchema\":{\"type\":\"object\"},\"annotations\":null}", "sha256:24a251ef8c0f08765d31c6dbfe8f37cd59b94cdf4a6f00548bd9b6545ab7895b"},
	{Tool, "k", `{"inputSchema":{"properties":{"é":1,"z":2,"😀":3,"ｚ":4,"":5,"a\"b":6,"Z":7,"aa":8,"a":9}}}`, "sha256:f8a0caef9dcead9a6728fac8494c4091ceec806aa2c472e1065a374b69929284"},
	{Prompt, "greet", `{"name":"greet","description":"Greets.","arguments":[{"name":"who","required":true,"description":"whom"}],"title":"Greeting"}`, "sha256:3cae81148fdb40ab49b96ea2e814c8183dfda94f5b142245117ec2df3278a14e"},
	{Prompt, "bare", `{"name":"bare"}`, "sha256:6d52398771b976619a320709a1f6932b42bf543bff06705455fe7a74f1074801"},
}

func TestGoldenDigests(t *testing.T) {
	for _, c := range goldenCases {
		d, err := Canonical(c.kind, "x__"+c.child, "x", c.child, []byte(c.def))
		if err != nil {
			t.Fatalf("%s: %v", c.child, err)
		}
		if got := d.Digest(); got != c.digest {
			t.Errorf("%s %s: digest %s, want %s", c.kind, c.child, got, c.digest)
		}
	}
}
