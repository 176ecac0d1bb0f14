package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/controlapi"
	"github.com/eas-server/eas-server/internal/server"
	"github.com/eas-server/eas-server/internal/teststack"
)

const echoE = `{"name":"e","processor":"echo","token":"T","metadata":{"instance":1}}`

// TestMetricsHistory: predicts through the real stack show up in
// /api/v2/metrics once sampled, behind the admin token.
func TestMetricsHistory(t *testing.T) {
	st := teststack.New(t, teststack.Options{Server: server.Options{AdminToken: admin}}, echoE)
	h := adminHdr(admin)
	for range 5 {
		if r := do(t, "POST", st.URL+"/api/predict/e", []byte("hi"), map[string]string{"Authorization": "T"}); r.code != 200 {
			t.Fatalf("predict: %d %s", r.code, r.body)
		}
	}
	do(t, "POST", st.URL+"/api/predict/e", []byte("hi"), map[string]string{"Authorization": "wrong"}) // a 401
	must(t, st.History.Sample(time.Now()))

	r := do(t, "GET", st.URL+"/api/v2/metrics?service=e", nil, h)
	if r.code != http.StatusOK {
		t.Fatalf("GET /api/v2/metrics?service=e: %d %s", r.code, r.body)
	}
	var mh server.MetricsHistory
	must(t, json.Unmarshal([]byte(r.body), &mh))
	pts := mh.Services["e"]
	if mh.IntervalMs != 2000 || mh.WindowMs != 600000 || len(mh.Services) != 1 || len(pts) != 1 {
		t.Fatalf("answer %s: want IntervalMs 2000, WindowMs 600000 and one point of e", r.body)
	}
	p := pts[0]
	if p.RPS["200"] <= 0 || p.RPS["401"] <= 0 || p.P99Ms == nil || p.P50Ms == nil {
		t.Errorf("point %s: want RPS 200 and 401 > 0, P50Ms and P99Ms", r.body)
	}
	for _, key := range []string{`"IntervalMs":`, `"WindowMs":`, `"Services":{"e":[{"T":`, `"RPS":{`, `"P50Ms":`, `"P99Ms":`, `"QueueDepth":`, `"InFlight":`} {
		if !strings.Contains(r.body, key) {
			t.Errorf("answer %s lacks %s", r.body, key)
		}
	}

	// since: only later points; the service is known, so an empty list.
	r = do(t, "GET", st.URL+"/api/v2/metrics?service=e&since="+strconv.FormatInt(p.T, 10), nil, h)
	if r.code != http.StatusOK || !strings.Contains(r.body, `"Services":{"e":[]}`) {
		t.Errorf("since the last point: %d %s, want e with []", r.code, r.body)
	}
	// Every service.
	r = do(t, "GET", st.URL+"/api/v2/metrics", nil, h)
	if r.code != http.StatusOK || !strings.Contains(r.body, `"e":[{`) {
		t.Errorf("all services: %d %s", r.code, r.body)
	}

	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
		code       int
		kind       string
	}{
		{"no token", "/api/v2/metrics?service=e", nil, 401, "Unauthorized"},
		{"service token", "/api/v2/metrics", adminHdr("T"), 401, "Unauthorized"},
		{"unknown service", "/api/v2/metrics?service=nope", h, 404, "NotFound"},
		{"bad since", "/api/v2/metrics?service=e&since=yesterday", h, 400, "InvalidParameter"},
	} {
		r := do(t, "GET", st.URL+tc.path, nil, tc.hdr)
		var eo controlapi.ErrorObject
		if r.code != tc.code || json.Unmarshal([]byte(r.body), &eo) != nil || eo.Code != tc.kind {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.code, r.body, tc.code, tc.kind)
		}
	}
}

// A service known to the control plane but not yet sampled has an empty
// list, not a 404.
func TestMetricsHistoryKnownButUnsampled(t *testing.T) {
	st := teststack.New(t, teststack.Options{Server: server.Options{AdminToken: admin}})
	h := adminHdr(admin)
	r := do(t, "POST", st.URL+"/api/v2/services", []byte(echoE), h)
	if r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	r = do(t, "GET", st.URL+"/api/v2/metrics?service=e", nil, h)
	if r.code != http.StatusOK || !strings.Contains(r.body, `"Services":{"e":[]}`) {
		t.Errorf("unsampled service: %d %s, want e with []", r.code, r.body)
	}
}

// Without a sampler the route says that there is no history.
func TestMetricsHistoryWithoutSampler(t *testing.T) {
	ts := httptest.NewServer(server.New(server.Options{AdminToken: admin}).ControlHandler())
	defer ts.Close()
	r := do(t, "GET", ts.URL+"/api/v2/metrics?service=e", nil, adminHdr(admin))
	var eo controlapi.ErrorObject
	if r.code != http.StatusNotFound || json.Unmarshal([]byte(r.body), &eo) != nil || eo.Code != "NotFound" || !strings.Contains(eo.Message, "no metrics history") {
		t.Errorf("no sampler: %d %s, want 404 NotFound saying there is no history", r.code, r.body)
	}
}
