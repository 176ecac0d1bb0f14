package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/eas-server/eas-server/internal/controlapi"
	"github.com/eas-server/eas-server/queue"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/caffepb"
	"github.com/eas-server/eas-server/wire/hiepb"
	"github.com/eas-server/eas-server/wire/kserve"
	"github.com/eas-server/eas-server/wire/tfpb"
	"github.com/eas-server/eas-server/wire/torchpb"
)

// Wire formats of predict --tensors.
const (
	formatTorch  = "torch"  // EAS PyTorch PredictRequest, for pytorch_*
	formatTF     = "tf"     // EAS TensorFlow PredictRequest, for tensorflow_*
	formatHIE    = "hie"    // EAS ONNX (HIE) DataProto, for onnx_*
	formatCaffe  = "caffe"  // EAS Caffe PredictRequest, for caffe_*
	formatKServe = "kserve" // KServe v2 JSON, for every other tensor service
)

func predictCmd() *cobra.Command {
	var f clientFlags
	var serviceToken, format string
	var tensors bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "predict NAME FILE",
		Short: "Send a request to a service and print the answer",
		Long: "Send FILE (- for stdin) to /api/predict/NAME with the service's token and print the\n" +
			"answer. FILE is sent as is, or, with --tensors, is a JSON list of tensors\n" +
			`  [{"name": "input", "shape": [1, 16], "datatype": "FP32", "data": [...]}]` + "\n" +
			"that predict encodes in the service's own wire format (the EAS PyTorch protobuf for\n" +
			"pytorch_*, the TensorFlow PredictRequest for tensorflow_*, the HIE DataProto for\n" +
			"onnx_*, the Caffe PredictRequest for caffe_*, KServe v2 JSON on /v2/models/NAME/infer\n" +
			"otherwise), printing the answer's\n" +
			"tensors as JSON the same way.\n\n" +
			"The token is --service-token, else the service's AccessToken fetched with the admin\n" +
			"token, which also tells the processor when --format is not given.\n\n" +
			"An asynchronous service queues the request: predict prints its index and request id,\n" +
			"and with --wait reads its answer from the sink and prints that.",
		Example: "  eas-server predict echo_svc request.bin\n" +
			"  eas-server predict pytorch_mlp --tensors input.json\n" +
			`  echo '[{"name":"input","shape":[1,16],"datatype":"FP32","data":[...]}]' | eas-server predict onnx_mlp --tensors -`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, file := args[0], args[1]
			switch format {
			case "", formatTorch, formatTF, formatHIE, formatCaffe, formatKServe:
			default:
				return fmt.Errorf("--format: must be torch, tf, hie, caffe or kserve, got %q", format)
			}
			c, err := f.connect(false)
			if err != nil {
				return err
			}
			body, err := readInput(cmd, file)
			if err != nil {
				return err
			}
			token := serviceToken
			if token == "" || (tensors && format == "") {
				switch {
				case c.token == "" && token == "":
					return fmt.Errorf("no token for service %s: give --service-token, or an admin token (--token or $EAS_ADMIN_TOKEN) to fetch it", name)
				case c.token == "":
					return fmt.Errorf("--tensors needs service %s's wire format: give --format (torch, tf, hie, caffe or kserve), or an admin token (--token or $EAS_ADMIN_TOKEN) to look up its processor", name)
				}
				var obj controlapi.ServiceObject
				if err := c.call(cmd.Context(), http.MethodGet, c.servicePath(name, ""), nil, &obj); err != nil {
					return err
				}
				if token == "" {
					token = obj.AccessToken
				}
				if format == "" {
					format = formatOf(obj.ServiceConfig)
				}
			}
			path := "/api/predict/" + url.PathEscape(name)
			contentType := "application/octet-stream"
			if tensors {
				inputs, err := parseTensors(body)
				if err != nil {
					return fmt.Errorf("--tensors: %s: %w", file, err)
				}
				if body, err = encodeTensors(format, inputs); err != nil {
					return err
				}
				if format == formatKServe {
					path, contentType = "/v2/models/"+url.PathEscape(name)+"/infer", "application/json"
				}
			}
			answer, hdr, err := c.predict(cmd, path, token, contentType, body)
			if err != nil {
				return err
			}
			if id := hdr.Get(requestIDHeader); id != "" { // an asynchronous service queued it
				fmt.Fprintf(cmd.ErrOrStderr(), "queued: index %s, request id %s\n", strings.TrimSpace(string(answer)), id)
				if wait <= 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "its answer: eas-server predict %s %s --wait 30s, or GET /api/predict/%s/sink?requestId=%s\n", name, file, name, id)
					return nil
				}
				if answer, err = c.readAnswer(cmd, name, token, id, wait); err != nil {
					return err
				}
			}
			if !tensors {
				_, err := cmd.OutOrStdout().Write(answer)
				return err
			}
			outputs, err := decodeTensors(format, answer, hdr)
			if err != nil {
				return err
			}
			return printTensors(cmd.OutOrStdout(), outputs)
		},
	}
	f.addConn(cmd)
	fl := cmd.Flags()
	fl.StringVar(&serviceToken, "service-token", "", "the service's token (default: its AccessToken, fetched with the admin token)")
	fl.BoolVar(&tensors, "tensors", false, "FILE is a JSON list of tensors to encode in the service's wire format; print the answer's tensors as JSON")
	fl.DurationVar(&wait, "wait", 0, "for an asynchronous service: wait this long for the answer in its sink and print it (default: print the queued request's index and id)")
	fl.StringVar(&format, "format", "", "with --tensors: torch, tf, hie, caffe or kserve (default: from the service's processor, fetched with the admin token)")
	return cmd
}

// readInput reads FILE, or stdin for "-".
func readInput(cmd *cobra.Command, file string) ([]byte, error) {
	if file == "-" {
		b, err := io.ReadAll(cmd.InOrStdin())
		if err != nil {
			return nil, fmt.Errorf("read stdin: %w", err)
		}
		return b, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read the request: %w", err)
	}
	return b, nil
}

// formatOf is the --tensors wire format of a service from its
// service.json's processor code.
func formatOf(config string) string {
	var head struct {
		Processor string `json:"processor"`
	}
	_ = json.Unmarshal([]byte(config), &head)
	switch p := head.Processor; {
	case strings.HasPrefix(p, "pytorch_"):
		return formatTorch
	case strings.HasPrefix(p, "tensorflow_"):
		return formatTF
	case strings.HasPrefix(p, "onnx_"):
		return formatHIE
	case strings.HasPrefix(p, "caffe_"):
		return formatCaffe
	}
	return formatKServe
}

// parseTensors reads a JSON list of KServe v2 tensors, or a whole KServe
// request object {"inputs": [...]}, with kserve's own decoder.
func parseTensors(body []byte) ([]tensor.Tensor, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		trimmed = append(append([]byte(`{"inputs":`), trimmed...), '}')
	}
	req, err := kserve.DecodeRequest(trimmed, "")
	if err != nil { // the user wrote a tensor list, not a KServe request
		return nil, errors.New(strings.TrimPrefix(err.Error(), "kserve request: "))
	}
	if len(req.Inputs) == 0 {
		return nil, fmt.Errorf("no tensors: want a JSON list like [{\"name\": \"input\", \"shape\": [1, 16], \"datatype\": \"FP32\", \"data\": [...]}]")
	}
	return req.Inputs, nil
}

// encodeTensors builds the request body in format, with the wire package's
// client-side encoders.
func encodeTensors(format string, inputs []tensor.Tensor) ([]byte, error) {
	var body []byte
	var err error
	switch format {
	case formatTorch:
		body, err = torchpb.EncodeRequest(inputs, false, nil)
	case formatTF:
		body, err = tfpb.EncodeRequest("", inputs, nil)
	case formatHIE:
		body, err = hiepb.EncodeDataProto(inputs)
	case formatCaffe:
		body, err = caffepb.EncodeRequest(inputs, nil)
	default:
		body, _, err = kserve.EncodeRequest(&kserve.InferRequest{Inputs: inputs}, false)
	}
	if err != nil {
		return nil, fmt.Errorf("--tensors: %w", err)
	}
	return body, nil
}

// decodeTensors reads the answer's tensors in format.
func decodeTensors(format string, answer []byte, hdr http.Header) ([]tensor.Tensor, error) {
	var out []tensor.Tensor
	var err error
	switch format {
	case formatTorch:
		out, err = torchpb.DecodeResponse(answer, nil)
	case formatTF:
		out, err = tfpb.DecodeResponse(answer)
	case formatHIE:
		out, err = hiepb.DecodeResponse(answer)
	case formatCaffe:
		out, err = caffepb.DecodeResponse(answer)
	default:
		var resp *kserve.InferResponse
		if resp, err = kserve.DecodeResponse(answer, hdr.Get(kserve.HeaderContentLength)); err == nil {
			out = resp.Outputs
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the answer is not a %s response: %w", format, err)
	}
	return out, nil
}

// printTensors prints tensors as the JSON list --tensors reads, with
// kserve's encoder.
func printTensors(w io.Writer, ts []tensor.Tensor) error {
	b, _, err := kserve.EncodeResponse(&kserve.InferResponse{Outputs: ts}, nil)
	if err != nil {
		return err
	}
	var resp struct {
		Outputs json.RawMessage `json:"outputs"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, resp.Outputs, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}

// predict posts body to path with the service token and returns the
// answer; a non-2xx answer is an error carrying its body.
func (c *apiClient) predict(cmd *cobra.Command, path, token, contentType string, body []byte) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(cmd.Context(), http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", token)
	req.Header.Set("Content-Type", contentType)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot reach the server at %s: %w; start it with 'eas-server serve' or point --endpoint (or %s) at it", c.base, err, endpointEnv)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, fmt.Errorf("POST %s: reading the answer: %w", path, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, nil, fmt.Errorf("POST %s: server answered %s: %s", path, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, resp.Header, nil
}

// requestIDHeader is on the answer to a put into an asynchronous service's
// queue, and names the request whose answer the sink will hold.
const requestIDHeader = "X-Eas-Queueservice-Request-Id"

// readAnswer reads request id's answer from service name's sink, waiting
// up to wait for it, and returns its data; an answer whose status tag is
// not 200 is an error carrying its message.
func (c *apiClient) readAnswer(cmd *cobra.Command, name, token, id string, wait time.Duration) ([]byte, error) {
	q := url.Values{"requestId": {id}, "_timeout_": {wait.String()}, "_length_": {"1"}}
	path := "/api/predict/" + url.PathEscape(name) + "/sink?" + q.Encode()
	req, err := http.NewRequestWithContext(cmd.Context(), http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", token)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: reading the answer: %w", path, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("GET %s: server answered %s: %s", path, resp.Status, strings.TrimSpace(string(b)))
	}
	frames, err := queue.ParseFrameList(b)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if len(frames) == 0 {
		return nil, fmt.Errorf("no answer to request %s within %s; read it later with GET /api/predict/%s/sink?requestId=%s", id, wait, name, id)
	}
	f := frames[0]
	if st := f.Tags["status"]; st != "" && st != "200" {
		return nil, fmt.Errorf("request %s was answered %s: %s", id, st, f.Tags["message"])
	}
	return f.Data, nil
}
