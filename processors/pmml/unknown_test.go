package pmml_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/teststack"
)

// postHeader posts body and returns the status, the body and the unknown
// fields header.
func postHeader(t *testing.T, url, body string) (int, string, string) {
	t.Helper()
	code, b, h := teststack.Do(t, "POST", url, "T", []byte(body))
	return code, string(b), h.Get("X-Eas-Unknown-Fields")
}

func lrWith(name, config string) string {
	return `{"name":"` + name + `","processor":"pmml","model_path":"../../engines/pmml/testdata/lr.pmml","token":"T","metadata":{"instance":1}` + config + `}`
}

// TestUnknownFields: misspelled record keys are flagged (warn, the
// default), refused with suggestions (reject) or dropped (ignore), through
// the real HTTP router.
func TestUnknownFields(t *testing.T) {
	url := serve(t,
		lrWith("lrwarn", ""),
		lrWith("lrreject", `,"model_config":{"unknown_fields":"reject"}`),
		lrWith("lrignore", `,"model_config":{"unknown_fields":"ignore"}`))
	good := `[{"sex":1,"cp":3,"fbs":0,"age":63,"trestbps":145,"thal":"fix"}]`
	typo := `[{"sex":1,"cp":3,"fbs":0,"agee":63,"trestbp":145,"thal":"fix"},{"sex":0,"agee":41,"zzz_extra":1}]`

	code, body, hdr := postHeader(t, url+"/api/predict/lrwarn", good)
	if code != 200 || hdr != "" {
		t.Fatalf("good records: %d %s, header %q", code, body, hdr)
	}
	code, body, hdr = postHeader(t, url+"/api/predict/lrwarn", typo)
	if code != 200 || hdr != "agee,trestbp,zzz_extra" {
		t.Errorf("warn: %d %s, header %q, want 200 and agee,trestbp,zzz_extra", code, body, hdr)
	}
	code, body, _ = postHeader(t, url+"/api/predict/lrreject", typo)
	for _, w := range []string{`"agee" (did you mean "age"?)`, `"trestbp" (did you mean "trestbps"?)`, `zzz_extra`} {
		if code != 400 || !strings.Contains(body, w) {
			t.Errorf("reject: %d %s, want 400 with %s", code, body, w)
		}
	}
	if code, body, _ := postHeader(t, url+"/api/predict/lrreject", good); code != 200 {
		t.Errorf("reject, good records: %d %s", code, body)
	}
	code, body, hdr = postHeader(t, url+"/api/predict/lrignore", typo)
	if code != 200 || hdr != "" {
		t.Errorf("ignore: %d %s, header %q", code, body, hdr)
	}

	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(m), `eas_unknown_fields_total{service="lrwarn"} 1`) {
		t.Errorf("metrics lack eas_unknown_fields_total for lrwarn:\n%s", m)
	}
}
