package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/controlapi"
	"github.com/eas-server/eas-server/internal/server"
	"github.com/eas-server/eas-server/internal/wait"
)

// TestChangeAnswerWarnings: create and modify answer, besides the service,
// the keys of the file sent that have no effect here; a plain file gets
// none (and no Warnings key at all).
func TestChangeAnswerWarnings(t *testing.T) {
	st := newStack(t, server.Options{AdminToken: admin})
	h := adminHdr(admin)
	r := do(t, "POST", st.URL+"/api/v2/services", []byte(`{"name":"warned","processor":"echo","autoscaler":{"min":1,"max":2},"metadata":{"instance":1}}`), h)
	if r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	var ans controlapi.ChangeAnswer
	must(t, json.Unmarshal([]byte(r.body), &ans))
	if ans.ServiceName != "warned" || len(ans.Warnings) != 1 || !strings.HasPrefix(ans.Warnings[0], "autoscaler: accepted for EAS compatibility") {
		t.Fatalf("create answered %s", r.body)
	}
	// A modify while the create still loads is refused (409): wait.
	wait.Until(t, 5*time.Second, func() error {
		if body := do(t, "GET", st.URL+"/api/v2/services/local/warned", nil, h).body; strings.Contains(body, `"Status":"Creating"`) {
			return fmt.Errorf("the service is still creating: %s", body)
		}
		return nil
	})
	r = do(t, "PUT", st.URL+"/api/v2/services/local/warned", []byte(`{"name":"warned","processor":"echo","metadata":{"instance":1,"memory":2000}}`), h)
	ans = controlapi.ChangeAnswer{}
	must(t, json.Unmarshal([]byte(r.body), &ans))
	if r.code != http.StatusOK || len(ans.Warnings) != 1 || !strings.HasPrefix(ans.Warnings[0], "metadata.memory:") {
		t.Fatalf("modify answered %d %s", r.code, r.body)
	}
	r = do(t, "POST", st.URL+"/api/v2/services", []byte(`{"name":"plain","processor":"echo","metadata":{"instance":1}}`), h)
	if r.code != http.StatusCreated || strings.Contains(r.body, "Warnings") {
		t.Fatalf("plain create answered %d %s", r.code, r.body)
	}
}
