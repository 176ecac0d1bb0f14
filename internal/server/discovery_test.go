package server_test

import (
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"testing"

	"github.com/eas-server/eas-server/internal/teststack"
)

// TestServiceDiscovery: the DIRECT endpoint type's discovery names the
// address the request came in on, for any name and without a token.
func TestServiceDiscovery(t *testing.T) {
	st := teststack.Start(t)
	host, port, _ := net.SplitHostPort(st.HTTP.Listener.Addr().String())
	for _, name := range []string{"echo", "no_such_service"} {
		code, body, _ := teststack.Do(t, http.MethodGet, st.URL+"/api/v1/servicediscovery/upstreams/"+name, "", nil)
		var got struct {
			Endpoints struct {
				Items []struct {
					App    string `json:"app"`
					IP     string `json:"ip"`
					Port   int    `json:"port"`
					Weight int    `json:"weight"`
				} `json:"items"`
			} `json:"endpoints"`
		}
		if code != http.StatusOK || json.Unmarshal(body, &got) != nil || len(got.Endpoints.Items) != 1 {
			t.Fatalf("%s: %d %s", name, code, body)
		}
		it := got.Endpoints.Items[0]
		if it.App != name || it.IP != host || strconv.Itoa(it.Port) != port || it.Weight <= 0 {
			t.Errorf("%s: %+v, want app %s at %s:%s with a weight", name, it, name, host, port)
		}
	}
}
