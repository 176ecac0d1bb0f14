package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/eas-server/eas-server/internal/storage"
)

// uploadCmd is `eas-server upload FILE oss://bucket/path`, the counterpart
// of `eascmd upload`: it puts a model on OSS and prints the oss:// path to
// use as model_path.
func uploadCmd() *cobra.Command {
	var (
		endpoint      string
		partMiB       int64
		parallel      int
		checkpointDir string
		quiet         bool
	)
	cmd := &cobra.Command{
		Use:   "upload FILE oss://bucket/path",
		Short: "Put a model file on OSS and print its oss:// path for model_path",
		Long: "Upload FILE to OSS. A path ending in / (or a bare bucket) gets FILE's name appended.\n" +
			"Files larger than --part-size go up as a multipart upload in parallel; if it is\n" +
			"interrupted, running the same command again sends only the missing parts.\n\n" +
			"The endpoint is --endpoint, else $OSS_ENDPOINT (a host such as oss-cn-hangzhou.aliyuncs.com,\n" +
			"or an http:// URL for a local OSS-compatible server). Credentials come from\n" +
			"OSS_ACCESS_KEY_ID / OSS_ACCESS_KEY_SECRET (/ OSS_SESSION_TOKEN), then\n" +
			"ALIBABA_CLOUD_ACCESS_KEY_ID / ALIBABA_CLOUD_ACCESS_KEY_SECRET (/ ALIBABA_CLOUD_SECURITY_TOKEN),\n" +
			"then the [default] section (or $ALIBABA_CLOUD_PROFILE) of $ALIBABA_CLOUD_CREDENTIALS_FILE,\n" +
			"else ~/.alibabacloud/credentials.ini, with access_key_id, access_key_secret and security_token.\n\n" +
			"A directory must be packed first (tar czf model.tar.gz -C DIR .); the server unpacks\n" +
			".zip, .tar, .tar.gz/.tgz and .tar.bz2 model_path archives.",
		Example: "  eas-server upload model.onnx oss://my-models/resnet/\n" +
			"  # prints oss://my-models/resnet/model.onnx",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, dst := args[0], args[1]
			st, err := os.Stat(src)
			if err != nil {
				return fmt.Errorf("upload: %w", err)
			}
			if partMiB < 1 || partMiB > 5*1024 {
				return fmt.Errorf("--part-size: must be between 1 and 5120 MiB, got %d", partMiB)
			}
			opts := storage.UploadOptions{
				Endpoint:      endpoint,
				PartSize:      partMiB << 20,
				Parallel:      parallel,
				CheckpointDir: checkpointDir,
			}
			var bar *progressbar.ProgressBar
			if !quiet {
				bar = progressbar.NewOptions64(st.Size(),
					progressbar.OptionSetWriter(cmd.ErrOrStderr()),
					progressbar.OptionSetDescription(filepath.Base(src)),
					progressbar.OptionShowBytes(true),
					progressbar.OptionShowCount(),
					progressbar.OptionThrottle(200*time.Millisecond),
					progressbar.OptionOnCompletion(func() { fmt.Fprintln(cmd.ErrOrStderr()) }),
				)
				opts.Progress = func(done, _ int64) { _ = bar.Set64(done) }
			}
			url, err := storage.Upload(cmd.Context(), src, dst, opts)
			if err != nil {
				if bar != nil {
					fmt.Fprintln(cmd.ErrOrStderr())
				}
				return err
			}
			if bar != nil {
				_ = bar.Finish()
			}
			fmt.Fprintln(cmd.OutOrStdout(), url)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&endpoint, "endpoint", "", "OSS endpoint (default $OSS_ENDPOINT)")
	f.Int64Var(&partMiB, "part-size", 16, "multipart part size in MiB; smaller files go up in one request")
	f.IntVar(&parallel, "parallel", 4, "parts uploaded at once")
	f.StringVar(&checkpointDir, "checkpoint-dir", "", "where an interrupted upload's state is kept (default: the user cache directory)")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress bar")
	return cmd
}
