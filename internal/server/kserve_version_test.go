package server_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/internal/wait"
	"github.com/eas-server/eas-server/servicejson"
)

// Issue 34: /v2/models/<m>/versions/<v>/infer was answered by the serving
// version whatever v said (999, abc, an older version).
func TestKServeVersionPathMustServe(t *testing.T) {
	model, err := filepath.Abs("../../engines/trees/testdata/xgboost/binary.json")
	if err != nil {
		t.Fatal(err)
	}
	spec := func(instances int) string {
		return fmt.Sprintf(`{"name":"trees","processor":"xgboost","model_path":%q,"token":"T","metadata":{"instance":%d}}`, model, instances)
	}
	body := []byte(`{"inputs":[{"name":"input","shape":[1,30],"datatype":"FP32","data":[` + strings.TrimSuffix(strings.Repeat("0,", 30), ",") + `]}]}`)
	st := teststack.Start(t, spec(1))
	infer := func(version string) reply {
		return do(t, "POST", st.URL+"/v2/models/trees/versions/"+version+"/infer", body, map[string]string{"Authorization": "T"})
	}
	if r := infer("1"); r.code != http.StatusOK {
		t.Fatalf("the serving version 1: %d %s", r.code, r.body)
	}
	for _, v := range []string{"999", "abc", "0"} {
		if r := infer(v); r.code != http.StatusNotFound || !strings.Contains(r.body, "version "+v+" is not found") {
			t.Errorf("version %s, which does not exist: %d %s, want 404", v, r.code, r.body)
		}
	}

	svc, err := servicejson.Parse([]byte(spec(2)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Manager.Deploy(t.Context(), svc); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 10*time.Second, func() error {
		if r := infer("2"); r.code != http.StatusOK {
			return fmt.Errorf("version 2 after the update: %d %s", r.code, r.body)
		}
		return nil
	})
	if r := infer("1"); r.code != http.StatusNotFound || !strings.Contains(r.body, "version 2 serves") {
		t.Errorf("version 1 once version 2 serves: %d %s, want 404", r.code, r.body)
	}
	if r := do(t, "POST", st.URL+"/v2/models/trees/infer", body, map[string]string{"Authorization": "T"}); r.code != http.StatusOK {
		t.Errorf("no version named: %d %s", r.code, r.body)
	}
}
