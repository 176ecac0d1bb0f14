package treeensemble_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/teststack"
)

// TestUnknownFields: a real XGBoost model behind the real router flags
// misspelled record keys and dense columns (warn, the default), refuses
// them with the nearest feature names (reject), or drops them (ignore).
func TestUnknownFields(t *testing.T) {
	st := teststack.Start(t,
		service_("xwarn", "xgboost", xgbDir+"/binary.json", ""),
		service_("xreject", "xgboost", xgbDir+"/binary.json", `{"unknown_fields":"reject"}`),
		service_("xignore", "xgboost", xgbDir+"/binary.json", `{"unknown_fields":"ignore"}`))
	post := func(name, body string) (int, string, string) {
		code, b, h := teststack.Do(t, "POST", st.URL+"/api/predict/"+name, "T", []byte(body))
		return code, string(b), h.Get("X-Eas-Unknown-Fields")
	}

	good := `[{"mean_radius": 12.0, "worst_radius": 13.0}]`
	typo := `[{"mean_radus": 12.0, "worst_radius": 13.0, "temprature": 1},{"mean_radus": 11.0}]`
	dense := `{"columns":["mean_radius","wrst_radius"],"data":[[12.0,13.0]]}`
	if code, body, hdr := post("xwarn", good); code != 200 || hdr != "" {
		t.Fatalf("good: %d %s, header %q", code, body, hdr)
	}
	if code, body, hdr := post("xwarn", typo); code != 200 || hdr != "mean_radus,temprature" {
		t.Errorf("warn: %d %s, header %q", code, body, hdr)
	}
	if code, body, hdr := post("xwarn", dense); code != 200 || hdr != "wrst_radius" {
		t.Errorf("warn, dense: %d %s, header %q", code, body, hdr)
	}
	code, body, _ := post("xreject", typo)
	for _, w := range []string{`"mean_radus" (did you mean "mean_radius"?)`, `"temprature"`, "unknown_fields"} {
		if code != 400 || !strings.Contains(body, w) {
			t.Errorf("reject: %d %s, want 400 with %s", code, body, w)
		}
	}
	if code, body, _ := post("xreject", good); code != 200 {
		t.Errorf("reject, good: %d %s", code, body)
	}
	if code, body, hdr := post("xignore", typo); code != 200 || hdr != "" {
		t.Errorf("ignore: %d %s, header %q", code, body, hdr)
	}

	resp, err := http.Get(st.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(m), `eas_unknown_fields_total{service="xwarn"} 2`) {
		t.Errorf("metrics lack eas_unknown_fields_total 2 for xwarn:\n%s", m)
	}
}
