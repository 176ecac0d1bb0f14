package tensorflow_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/eas-server/eas-server/engines/libtf/libtftest"
	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/wire/tfpb"
)

// BenchmarkZoo times each model family of TestTensorFlowZoo on both
// runtimes through the router: its reference request (a few rows), one at
// a time, one intra-op thread. A runtime that cannot serve a model (the
// translator refuses it) is skipped, saying why.
func BenchmarkZoo(b *testing.B) {
	env := libtftest.Setup(b)
	dir, refs := zooGenerate(b, env)
	for _, m := range zooModels {
		c := refs[m.dir]
		body, err := tfpb.EncodeRequest("", c.Sorted(), nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, rt := range []string{"onnx", "libtensorflow"} {
			b.Run(m.dir+"/"+rt, func(b *testing.B) {
				st := teststack.New(b, teststack.Options{AllowFailedDeploys: true}, fmt.Sprintf(
					`{"name":"m","processor":"tensorflow_cpu_2.7","model_path":%q,"token":"T","metadata":{"instance":1,"cpu":1},"model_config":{"runtime":%q}}`,
					filepath.Join(dir, m.dir), rt))
				if err := st.DeployErrors["m"]; err != nil {
					b.Skipf("not served on %s: %s", rt, firstLine(err.Error()))
				}
				for b.Loop() {
					if code, resp, _ := teststack.Do(b, http.MethodPost, st.URL+"/api/predict/m", "T", body); code != http.StatusOK {
						b.Fatalf("%d %s", code, resp)
					}
				}
			})
		}
	}
}
