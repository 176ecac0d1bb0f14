package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/eas-server/eas-server/internal/auth"
)

// Environment variables of the client verbs; the flags win over them.
const (
	endpointEnv     = "EAS_ENDPOINT"
	defaultEndpoint = "http://127.0.0.1:8080"
)

// clientFlags are the flags every control-plane verb takes.
type clientFlags struct {
	endpoint string
	token    string
	region   string
	output   string
	poll     time.Duration
	timeout  time.Duration
}

// add registers the flags on cmd; waits adds the ones of verbs that wait
// for a deploy to finish.
func (f *clientFlags) add(cmd *cobra.Command, waits bool) {
	f.addConn(cmd)
	fl := cmd.Flags()
	fl.StringVarP(&f.output, "output", "o", "table", "output format: table or json")
	if waits {
		fl.DurationVar(&f.poll, "poll", 500*time.Millisecond, "how often to check progress")
		fl.DurationVar(&f.timeout, "timeout", 30*time.Minute, "how long to wait for Running or Failed")
	}
}

// addConn registers the flags that say which server to reach and how.
func (f *clientFlags) addConn(cmd *cobra.Command) {
	fl := cmd.Flags()
	// The defaults are read from the environment at run time, so that help
	// never prints a token.
	fl.StringVar(&f.endpoint, "endpoint", "", "server URL (default $"+endpointEnv+", then "+defaultEndpoint+")")
	fl.StringVar(&f.token, "token", "", "admin token (default $"+auth.AdminTokenEnv+")")
	fl.StringVar(&f.region, "region", "local", "region segment of the API paths")
}

// client checks the flags and builds the API client.
func (f *clientFlags) client() (*apiClient, error) {
	if f.output != "table" && f.output != "json" {
		return nil, fmt.Errorf("--output: must be table or json, got %q", f.output)
	}
	return f.connect(true)
}

// Endpoint is the server a client verb reaches: flag when given, else
// $EAS_ENDPOINT, else http://127.0.0.1:8080; "http://" is added to a bare
// host:port. Every verb that calls a server (bench too) reads it so.
func Endpoint(flag string) string {
	endpoint := flag
	if endpoint == "" {
		endpoint = os.Getenv(endpointEnv)
	}
	if endpoint == "" {
		endpoint = defaultEndpoint
	}
	if !strings.Contains(endpoint, "://") {
		endpoint = "http://" + endpoint
	}
	return endpoint
}

// connect builds the API client; needAdmin makes a missing admin token an
// error, else the client may have none (token "").
func (f *clientFlags) connect(needAdmin bool) (*apiClient, error) {
	endpoint := Endpoint(f.endpoint)
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("--endpoint: %q is not a URL; use http://HOST:PORT", endpoint)
	}
	token := f.token
	if token == "" {
		token = strings.TrimSpace(os.Getenv(auth.AdminTokenEnv))
	}
	if token == "" && needAdmin {
		return nil, fmt.Errorf("no admin token: set %s or --token (the server printed it at its first start and keeps it in <state-dir>/%s)", auth.AdminTokenEnv, auth.AdminTokenFile)
	}
	return &apiClient{
		base:   strings.TrimRight(endpoint, "/"),
		token:  token,
		region: f.region,
		hc:     &http.Client{Timeout: 2 * time.Minute},
	}, nil
}

// apiClient talks to the control plane of one server.
type apiClient struct {
	base, token, region string
	hc                  *http.Client
}

// apiError is a non-2xx answer of the control plane.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("server answered %d %s: %s", e.Status, e.Code, e.Message)
}

// servicePath is the path of one service, plus an optional sub-resource.
func (c *apiClient) servicePath(name, sub string) string {
	p := "/api/v2/services/" + url.PathEscape(c.region) + "/" + url.PathEscape(name)
	if sub != "" {
		p += "/" + sub
	}
	return p
}

// call sends one request and decodes a JSON answer into out (may be nil).
func (c *apiClient) call(ctx context.Context, method, path string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("cannot reach the server at %s: %w; start it with 'eas-server serve' or point --endpoint (or %s) at it", c.base, err, endpointEnv)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		ae := &apiError{Status: resp.StatusCode, Code: http.StatusText(resp.StatusCode)}
		var eo struct{ Code, Message string }
		if json.Unmarshal(b, &eo) == nil && eo.Message != "" {
			ae.Code, ae.Message = eo.Code, eo.Message
		} else {
			ae.Message = strings.TrimSpace(string(b))
		}
		return ae
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: the answer is not the expected JSON: %w", method, path, err)
		}
	}
	return nil
}
