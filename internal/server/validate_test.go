package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/server"
)

// TestValidate: POST /api/v2/validate answers what create would, problem
// by problem with the key each is on, and changes nothing.
func TestValidate(t *testing.T) {
	st := newStack(t, server.Options{AdminToken: admin})
	h := adminHdr(admin)
	url := st.URL + "/api/v2/validate"

	// Valid, with a key that has no effect here.
	r := do(t, "POST", url, []byte(`{"name":"v","processor":"echo","metadata":{"instance":1,"memory":2000}}`), h)
	var ok server.ValidateAnswer
	must(t, json.Unmarshal([]byte(r.body), &ok))
	if r.code != http.StatusOK || !ok.Valid || len(ok.Warnings) != 1 || ok.Warnings[0].Path != "metadata.memory" ||
		!strings.HasPrefix(ok.Warnings[0].Message, "accepted for EAS compatibility") {
		t.Fatalf("valid with a warning: %d %s", r.code, r.body)
	}
	// Valid without one: an empty list, not null.
	r = do(t, "POST", url, []byte(echoE), h)
	if r.code != http.StatusOK || r.body != `{"Valid":true,"Warnings":[]}` {
		t.Errorf("valid: %d %s", r.code, r.body)
	}
	// Nothing was created.
	if r := do(t, "GET", st.URL+"/api/v2/services", nil, h); !strings.Contains(r.body, `"TotalCount":0`) {
		t.Errorf("validate created something: %s", r.body)
	}

	for _, tc := range []struct {
		name, body string
		want       []server.ValidateProblem // Message: a part of it
	}{
		{"top-level typo", `{"name":"v","processor":"echo","metdata":{"instance":1}}`, []server.ValidateProblem{
			{Path: "metdata", Message: "unknown key; did you mean metadata?"},
			{Path: "metadata.instance", Message: "is required"}}},
		{"nested typo", `{"name":"v","processor":"echo","metadata":{"instance":1,"rpc":{"keepalve":5000}}}`, []server.ValidateProblem{
			{Path: "metadata.rpc.keepalve", Message: "unknown key; did you mean metadata.rpc.keepalive?"}}},
		{"wrong type", `{"name":"v","processor":"echo","metadata":{"instance":"x"}}`, []server.ValidateProblem{
			{Path: "metadata.instance", Message: `must be a whole number, got "x"`}}},
		{"bad JSON", "{\"name\":\"v\",\n \"processor\":\"echo\",,}", []server.ValidateProblem{
			{Line: 2, Column: 21, Message: "invalid character ','"}}},
		{"bad model_config", `{"name":"v","processor":"echo","metadata":{"instance":1},"model_config":{"sleep_m":1}}`, []server.ValidateProblem{
			{Path: "model_config", Message: `unknown field "sleep_m"`}}},
		{"model_config value", `{"name":"v","processor":"echo","metadata":{"instance":1},"model_config":{"sleep_ms":-1}}`, []server.ValidateProblem{
			{Path: "model_config", Message: "model_config.sleep_ms: must be between 0 and 600000"}}},
		{"unknown processor code", `{"name":"v","processor":"tensorflow_cpu_9.9","metadata":{"instance":1}}`, nil},
	} {
		r := do(t, "POST", url, []byte(tc.body), h)
		var ve server.ValidateAnswer
		if err := json.Unmarshal([]byte(r.body), &ve); err != nil || r.code != http.StatusOK || ve.Valid || len(ve.Problems) == 0 {
			t.Errorf("%s: %d %s, want 200, not valid, with problems", tc.name, r.code, r.body)
			continue
		}
		t.Logf("%s: %s", tc.name, r.body)
		if tc.want == nil {
			continue
		}
		if len(ve.Problems) != len(tc.want) {
			t.Errorf("%s: problems %+v, want %+v", tc.name, ve.Problems, tc.want)
			continue
		}
		for i, w := range tc.want {
			g := ve.Problems[i]
			if g.Path != w.Path || g.Line != w.Line || g.Column != w.Column || !strings.Contains(g.Message, w.Message) {
				t.Errorf("%s: problem %d is %+v, want %+v", tc.name, i, g, w)
			}
			if !strings.Contains(ve.Message, g.Message) {
				t.Errorf("%s: message %q lacks problem %q", tc.name, ve.Message, g.Message)
			}
		}
		if n := strings.Count(ve.Message, "\n") + 1; n != len(ve.Problems) {
			t.Errorf("%s: message %q has %d lines for %d problems", tc.name, ve.Message, n, len(ve.Problems))
		}
	}

	// Behind the admin token.
	r = do(t, "POST", url, []byte(echoE), nil)
	if r.code != http.StatusUnauthorized {
		t.Errorf("without the token: %d %s", r.code, r.body)
	}
}

// An unknown processor code is a problem on processor.
func TestValidateUnknownProcessor(t *testing.T) {
	st := newStack(t, server.Options{AdminToken: admin})
	r := do(t, "POST", st.URL+"/api/v2/validate", []byte(`{"name":"v","processor":"nonesuch","metadata":{"instance":1}}`), adminHdr(admin))
	var ve server.ValidateAnswer
	must(t, json.Unmarshal([]byte(r.body), &ve))
	if r.code != http.StatusOK || ve.Valid || len(ve.Problems) != 1 || ve.Problems[0].Path != "processor" {
		t.Errorf("unknown processor: %d %s", r.code, r.body)
	}
}

// Oversized bodies get 413, as create's do, answered from Content-Length.
func TestValidateBodyTooLarge(t *testing.T) {
	st := newStack(t, server.Options{AdminToken: admin})
	conn, err := net.Dial("tcp", strings.TrimPrefix(st.URL, "http://"))
	must(t, err)
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/v2/validate HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\nContent-Length: %d\r\n\r\n", admin, 2<<20)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("2 MiB declared: %d, want 413", resp.StatusCode)
	}
}
