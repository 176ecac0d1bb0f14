package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/eas-server/eas-server/internal/cli"
	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/internal/storage"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/servicejson"
)

func validateCmd() *cobra.Command {
	var target string
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check service.json files and print every problem (no network I/O)",
		Long: "Check service.json files: keys, values, processor codes, device rules and the processor's own\n" +
			"checks of model_config and model_path (what its Configure step does before any download).\n" +
			"With --target local (the default) a service that needs a GPU is also checked against this\n" +
			"machine; --target any checks the files only. Keys accepted for EAS compatibility that have\n" +
			"no effect here are printed as warnings. Prints every problem of every file; exits 1 when\n" +
			"any file has one, 0 when all are valid (warnings or not).",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if target != "local" && target != "any" {
				return fmt.Errorf("--target: must be local (check against this machine) or any (the file only), got %q", target)
			}
			bad := 0
			for _, path := range args {
				if !validateFile(cmd.OutOrStdout(), cmd.ErrOrStderr(), path, target) {
					bad++
				}
			}
			if bad > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "%d of %d files invalid\n", bad, len(args))
				return cli.ExitError{Code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&target, "target", "local", "local: also check what this machine must provide (a GPU); any: check the file only")
	return cmd
}

// validateFile checks one file and prints its problems, or its warnings
// and "ok"; it reports whether the file is valid.
func validateFile(stdout, stderr io.Writer, path, target string) bool {
	svc, err := servicejson.ParseFile(path)
	if err == nil {
		if err = checkService(svc, target); err != nil {
			err = fmt.Errorf("%s: %w", path, err)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "%v\n", err)
		return false
	}
	for _, w := range svc.Warnings() {
		fmt.Fprintf(stderr, "%s: warning: %s\n", path, w)
	}
	fmt.Fprintf(stdout, "%s: ok (service %q, processor %s)\n", path, svc.Name, svc.ProcessorName())
	return true
}

// checkService runs what deploy runs before any download (checkProcessor)
// and, for target local, checks that this machine has what the service
// needs.
func checkService(svc *servicejson.Service, target string) error {
	if err := checkProcessor(svc); err != nil {
		return err
	}
	if target == "local" {
		if err := checkLocalFiles(svc); err != nil {
			return err
		}
		return checkDevice(svc, detectGPUs())
	}
	return nil
}

// checkLocalFiles checks that the local files svc names exist on this
// machine, as a server started here would resolve them (relative to its
// working directory).
func checkLocalFiles(svc *servicejson.Service) error {
	for _, f := range []struct{ key, loc string }{
		{"model_path", svc.ModelPath}, {"processor_path", svc.ProcessorPath}, {"warm_up_data_path", svc.WarmUpDataPath},
	} {
		path, local := storage.LocalPath(f.loc)
		if f.loc == "" || !local {
			continue
		}
		if _, err := os.Stat(path); err != nil {
			abs, _ := filepath.Abs(path)
			wd, _ := os.Getwd()
			return fmt.Errorf("%s: no file or directory at %s (a relative path is resolved against the server's working directory, here %s); give an absolute path, or --target any to check the file only", f.key, abs, wd)
		}
	}
	return nil
}

// checkProcessor runs the processor's own Configure on svc, without I/O,
// through the code deploy runs (service.Configure): a Java processor, a
// custom processor's bad processor_entry, a code this build cannot serve,
// or a model_config the processor refuses is found here, with deploy's
// message, rather than after a model download.
func checkProcessor(svc *servicejson.Service) error {
	if svc.Processor != "" {
		if _, ok := processors.Lookup(svc.Processor); !ok {
			_, err := processors.New(svc.Processor)
			return fmt.Errorf("processor: %q is an EAS code this server does not serve: %v", svc.Processor, err)
		}
	}
	ps, _, err := service.ProcessorSpec(svc, 0, nil)
	if err == nil {
		_, err = service.Configure(svc, ps)
	}
	return err
}

// gpus is what this machine offers: the NVIDIA GPUs its driver lists, and
// how that was found (for the message).
type gpus struct {
	count int
	seen  string // where they were found, or where none were
}

// detectGPUs is the GPU probe validate uses; tests replace it.
var detectGPUs = func() gpus { return nvidiaGPUs("/") }

// nvidiaGPUs counts the NVIDIA GPUs under root cheaply and without cgo:
// the driver's /proc/driver/nvidia/gpus entries, else /dev/nvidiaN device
// nodes (a container that is given GPUs gets the nodes, not always /proc).
func nvidiaGPUs(root string) gpus {
	procDir := filepath.Join(root, "proc/driver/nvidia/gpus")
	if entries, err := os.ReadDir(procDir); err == nil && len(entries) > 0 {
		return gpus{count: len(entries), seen: procDir}
	}
	devDir := filepath.Join(root, "dev")
	entries, _ := os.ReadDir(devDir)
	n := 0
	for _, e := range entries {
		if nvidiaDevice.MatchString(e.Name()) {
			n++
		}
	}
	if n > 0 {
		return gpus{count: n, seen: filepath.Join(devDir, "nvidia*")}
	}
	return gpus{seen: "no " + procDir + " and no " + filepath.Join(devDir, "nvidia0")}
}

var nvidiaDevice = regexp.MustCompile(`^nvidia[0-9]+$`)

// checkDevice refuses a service that needs more GPUs than the machine has:
// it would pass the file checks and then fail at load (or never get CUDA).
func checkDevice(svc *servicejson.Service, have gpus) error {
	need := svc.Metadata.GPU
	if need == 0 && (svc.UsesGPU() || svc.Code.IsGPU()) {
		need = 1
	}
	if need == 0 || need <= have.count {
		return nil
	}
	what := fmt.Sprintf("metadata.gpu is %d", svc.Metadata.GPU)
	if svc.Metadata.GPU == 0 {
		what = fmt.Sprintf("processor %s needs a GPU", svc.Processor)
	}
	var fix []string
	if cpu := cpuTwin(svc.Code); cpu != "" {
		fix = append(fix, "use "+cpu+" with metadata.gpu 0")
	}
	fix = append(fix, "deploy on a machine with an NVIDIA GPU and its driver", "or check the file only with validate --target any")
	return fmt.Errorf("metadata.gpu: %s but this machine has %d NVIDIA GPUs (%s); %s", what, have.count, have.seen, strings.Join(fix, ", "))
}

// cpuTwin is the CPU code of a GPU code's family and version, "" when the
// code has none (or already runs on CPU).
func cpuTwin(c servicejson.Code) string {
	if !c.IsGPU() {
		return ""
	}
	for _, code := range servicejson.KnownCodes() {
		k, _ := servicejson.ParseCode(code)
		if k.Family == c.Family && k.Version == c.Version && k.IsCPU() {
			return code
		}
	}
	return ""
}
