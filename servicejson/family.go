package servicejson

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// familyNotes answer an unknown code that names a model family rather than
// a code: what a user who writes "lightgbm" or "sklearn" should deploy
// with. Edit distance cannot find these (lightgbm is far from every code).
var familyNotes = map[string]string{
	"lightgbm":     "LightGBM models (text or JSON dump) are served by parameter_server (also registered as xgboost); use processor parameter_server",
	"xgb":          "use processor xgboost (or parameter_server): XGBoost JSON, UBJSON and binary models",
	"sklearn":      "scikit-learn models are served as pmml (export with sklearn2pmml) or onnx_cpu (export with skl2onnx)",
	"onnx":         "use processor onnx_cpu (onnx_cu100 on a GPU)",
	"onnxruntime":  "use processor onnx_cpu (onnx_cu100 on a GPU)",
	"caffe":        "use processor caffe_cpu (caffe_gpu on a GPU): deploy.prototxt and its .caffemodel, in an archive or folder",
	"tensorrt":     "TensorRT engines are not served here: deploy the ONNX model with onnx_cu100, or a Triton model repository with triton",
	"keras":        "save the Keras model as a TensorFlow SavedModel and use tensorflow_cpu_2.7 (or another tensorflow_* code)",
	"paddle":       "PaddlePaddle models are not served here: export them to ONNX (paddle2onnx) and use onnx_cpu",
	"paddlepaddle": "PaddlePaddle models are not served here: export them to ONNX (paddle2onnx) and use onnx_cpu",
}

// familyAliases maps the spellings of a versioned family to its name in
// codes.
var familyAliases = map[string]string{
	"tensorflow": "tensorflow", "tf": "tensorflow",
	"pytorch": "pytorch", "torch": "pytorch",
	"lightgbm": "lightgbm", "lgbm": "lightgbm", "lgb": "lightgbm",
	"sklearn": "sklearn", "scikit-learn": "sklearn", "scikit_learn": "sklearn", "scikitlearn": "sklearn",
	"onnx": "onnx", "caffe": "caffe", "xgb": "xgb",
	"easytransfer": "easytransfer",
}

// familyCode splits a code-like string: family, an optional device (cpu,
// gpu, cuda...) and an optional version, separated by _ or -.
var familyCode = regexp.MustCompile(`^([a-z][a-z_-]*?)(?:[_-](cpu|gpu|cuda|cu\d+))?(?:[_-]v?(\d+(?:\.\d+)*))?$`)

// familyHint explains an unknown code that names a family, or a version of
// a family, that this server knows: "torch" lists the PyTorch codes,
// "tensorflow_cpu_2.12" names the nearest TensorFlow versions, "lightgbm"
// names the code that serves LightGBM. "" when code names no family.
func familyHint(code string) string {
	m := familyCode.FindStringSubmatch(strings.ToLower(strings.TrimSpace(code)))
	if m == nil {
		return ""
	}
	fam, ok := familyAliases[m[1]]
	if !ok {
		if _, known := familyNotes[m[1]]; !known {
			return ""
		}
		fam = m[1]
	}
	if note, ok := familyNotes[fam]; ok {
		return note
	}
	device := m[2]
	if strings.HasPrefix(device, "cu") {
		device = "gpu"
	}
	codes, label := familyCodes(fam, device), fam+" "+device
	if len(codes) == 0 || device == "" {
		codes, label = familyCodes(fam, ""), fam
	}
	if len(codes) == 0 {
		return ""
	}
	if m[3] == "" {
		return fmt.Sprintf("did you mean %s? the %s codes are %s (the version is EAS's image; this server loads any version's export)",
			newest(codes), label, strings.Join(codes, ", "))
	}
	near := nearestVersions(codes, m[3])
	what := "it is the nearest version"
	if len(near) > 1 {
		what = "they are the nearest versions"
	}
	return fmt.Sprintf("did you mean %s? %s %s is no EAS code; %s served here", strings.Join(near, " or "), fam, m[3], what)
}

// familyCodes lists the known codes of family on device ("" for any),
// sorted by version, CPU first.
func familyCodes(family, device string) []string {
	var out []string
	for c, info := range knownCodes {
		if info.Family == family && info.Version != "" && (device == "" || info.Device == device) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		x, y := knownCodes[a], knownCodes[b]
		if x.Device != y.Device {
			return strings.Compare(x.Device, y.Device)
		}
		return versionKey(x.Version) - versionKey(y.Version)
	})
	return out
}

// newest is the code of the highest version in codes (CPU before GPU).
func newest(codes []string) string {
	best := codes[0]
	for _, c := range codes {
		k, b := knownCodes[c], knownCodes[best]
		if k.Device == b.Device && versionKey(k.Version) > versionKey(b.Version) {
			best = c
		}
	}
	return best
}

// nearestVersions returns the codes whose version is nearest to v, by
// major version first: 2.12 is nearest 2.7, not 1.12 (which edit distance
// would pick). Several codes come back on a tie (pytorch 1.8: 1.7, 1.9).
func nearestVersions(codes []string, v string) []string {
	want := versionKey(v)
	bestD := math.MaxInt
	var out []string
	for _, c := range codes {
		d := versionKey(knownCodes[c].Version) - want
		if d < 0 {
			d = -d
		}
		switch {
		case d < bestD:
			bestD, out = d, []string{c}
		case d == bestD:
			out = append(out, c)
		}
	}
	return out
}

// versionKey orders "major.minor" numerically: 1.10 after 1.9, and every
// 2.x after every 1.x.
func versionKey(v string) int {
	major, minor, _ := strings.Cut(v, ".")
	a, _ := strconv.Atoi(major)
	b, _ := strconv.Atoi(minor)
	return a*1000 + min(b, 999)
}
