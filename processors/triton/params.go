package triton

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Params are the processor_params of a triton service: Triton's own flags,
// plus --url, ours, which selects proxy mode.
type Params struct {
	Repository      string   // --model-repository (alias --model-store)
	URL             string   // --url: proxy to this KServe v2 server
	UpstreamToken   string   // --upstream-token: sent as Authorization to the upstream (an eas-server peer)
	StrictConfig    bool     // --strict-model-config: config.pbtxt is required and complete
	ExitOnError     bool     // --exit-on-error (default true): one bad model fails the deploy
	ControlMode     string   // --model-control-mode: none (default) or explicit
	LoadModels      []string // --load-model: with explicit control, the models loaded at start
	StrictReadiness bool     // --strict-readiness (default true): ready only when every model is
	LogVerbose      int      // --log-verbose
	BackendConfig   []string // --backend-config, as given; only onnxruntime settings are accepted
	// Ignored lists accepted flags that change nothing here (ports,
	// thread counts, memory pools), for the deploy log.
	Ignored []string
}

type flagKind int

const (
	fString flagKind = iota
	fBool
	fInt
	fIgnored     // takes a value, has no effect here
	fIgnoredBool // may stand alone, has no effect here
)

// flags lists the documented Triton flags we accept.
var flags = map[string]flagKind{
	"model-repository": fString, "model-store": fString, "url": fString, "upstream-token": fString,
	"strict-model-config": fBool, "disable-auto-complete-config": fBool,
	"exit-on-error": fBool, "strict-readiness": fBool,
	"model-control-mode": fString, "load-model": fString,
	"log-verbose": fInt, "backend-config": fString,
	"allow-http": fIgnoredBool, "allow-grpc": fIgnoredBool, "allow-metrics": fIgnoredBool,
	"allow-gpu-metrics": fIgnoredBool, "allow-cpu-metrics": fIgnoredBool,
	"log-info": fIgnoredBool, "log-warning": fIgnoredBool, "log-error": fIgnoredBool,
	"http-port": fIgnored, "grpc-port": fIgnored, "metrics-port": fIgnored,
	"http-thread-count": fIgnored, "exit-timeout-secs": fIgnored, "id": fIgnored,
	"pinned-memory-pool-byte-size": fIgnored, "cuda-memory-pool-byte-size": fIgnored,
	"min-supported-compute-capability": fIgnored, "backend-directory": fIgnored,
	"buffer-manager-thread-count": fIgnored, "log-format": fIgnored, "http-address": fIgnored,
	"grpc-address": fIgnored,
}

// ParseParams reads processor_params. Each element is `--flag=value`,
// `--flag value` (two elements) or, for boolean flags, `--flag` alone.
// Unknown and unsupported flags are reported together in one error.
func ParseParams(args []string) (Params, error) {
	p := Params{ExitOnError: true, StrictReadiness: true, ControlMode: "none"}
	var unknown, errs []string
	for i := 0; i < len(args); i++ {
		arg := strings.TrimSpace(args[i])
		if arg == "" {
			continue
		}
		if !strings.HasPrefix(arg, "-") {
			errs = append(errs, fmt.Sprintf("%q is not a flag; write --name=value", arg))
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		kind, ok := flags[name]
		if !ok {
			unknown = append(unknown, "--"+name)
			continue
		}
		if !hasValue {
			switch kind {
			case fBool, fIgnoredBool:
				value, hasValue = "true", true
			default:
				if i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
					i++
					value, hasValue = strings.TrimSpace(args[i]), true
				}
			}
		}
		if !hasValue {
			errs = append(errs, fmt.Sprintf("--%s needs a value: --%s=<value>", name, name))
			continue
		}
		if err := p.set(name, kind, value); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(unknown) > 0 {
		errs = append([]string{fmt.Sprintf("unknown or unsupported flags %s; supported: --%s", strings.Join(unknown, ", "), strings.Join(sortedKeys(flags), ", --"))}, errs...)
	}
	if len(errs) > 0 {
		return p, fmt.Errorf("processor_params: %s", strings.Join(errs, "; "))
	}
	return p, nil
}

func (p *Params) set(name string, kind flagKind, value string) error {
	var b bool
	if kind == fBool {
		var err error
		if b, err = strconv.ParseBool(value); err != nil {
			return fmt.Errorf("--%s: %q is not a boolean; use true or false", name, value)
		}
	}
	switch name {
	case "model-repository", "model-store":
		if p.Repository != "" {
			return errors.New("--model-repository given twice; this server serves one repository per service, deploy one service per repository")
		}
		p.Repository = value
	case "url":
		u, err := url.Parse(value)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "grpc") {
			return fmt.Errorf("--url: %q must be http://host:port, https://host:port or grpc://host:port", value)
		}
		p.URL = value
	case "upstream-token":
		p.UpstreamToken = value
	case "strict-model-config":
		p.StrictConfig = b
	case "disable-auto-complete-config":
		p.StrictConfig = b
	case "exit-on-error":
		p.ExitOnError = b
	case "strict-readiness":
		p.StrictReadiness = b
	case "model-control-mode":
		switch value {
		case "none", "explicit":
			p.ControlMode = value
		case "poll":
			return errors.New("--model-control-mode=poll is not supported: update the service (eas-server modify) to pick up repository changes, or use explicit and POST /v2/repository/models/<m>/load")
		default:
			return fmt.Errorf("--model-control-mode: %q is not one of none, explicit", value)
		}
	case "load-model":
		p.LoadModels = append(p.LoadModels, value)
	case "log-verbose":
		n, err := strconv.Atoi(value)
		if err != nil || n < 0 {
			return fmt.Errorf("--log-verbose: %q is not a level >= 0", value)
		}
		p.LogVerbose = n
	case "backend-config":
		backend, setting, ok := strings.Cut(value, ",")
		if !ok || !strings.Contains(setting, "=") {
			return fmt.Errorf("--backend-config: %q must be <backend>,<setting>=<value>", value)
		}
		if backend != "onnxruntime" {
			return fmt.Errorf("--backend-config: backend %q is not served here; only onnxruntime settings apply", backend)
		}
		p.BackendConfig = append(p.BackendConfig, value)
	default:
		p.Ignored = append(p.Ignored, "--"+name)
	}
	return nil
}
