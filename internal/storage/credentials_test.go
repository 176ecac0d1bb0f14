package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadCredentials(t *testing.T) {
	home := t.TempDir()
	file := filepath.Join(home, "creds.ini")
	os.WriteFile(file, []byte("# team keys\n[default]\naccess_key_id = LTAIfile\naccess_key_secret = \"file-secret\"\n\n[ci]\naccess_key_id=LTAIci\naccess_key_secret=ci-secret\nsts_token=tok\n"), 0o600)
	vars := []string{"OSS_ACCESS_KEY_ID", "OSS_ACCESS_KEY_SECRET", "OSS_SESSION_TOKEN", "ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET", "ALIBABA_CLOUD_SECURITY_TOKEN", CredentialsFileEnv, ProfileEnv}
	tests := []struct {
		name                  string
		env                   map[string]string
		id, secret, tok, from string
		err                   string
	}{
		{"oss vars", map[string]string{"OSS_ACCESS_KEY_ID": "LTAIoss", "OSS_ACCESS_KEY_SECRET": "s", "OSS_SESSION_TOKEN": "t", "ALIBABA_CLOUD_ACCESS_KEY_ID": "LTAIali", "ALIBABA_CLOUD_ACCESS_KEY_SECRET": "s2"}, "LTAIoss", "s", "t", "OSS_ACCESS_KEY_ID", ""},
		{"alibaba vars", map[string]string{"ALIBABA_CLOUD_ACCESS_KEY_ID": "LTAIali", "ALIBABA_CLOUD_ACCESS_KEY_SECRET": "s2", "ALIBABA_CLOUD_SECURITY_TOKEN": "t2", CredentialsFileEnv: file}, "LTAIali", "s2", "t2", "ALIBABA_CLOUD_ACCESS_KEY_ID", ""},
		{"half set", map[string]string{"OSS_ACCESS_KEY_ID": "LTAIoss", CredentialsFileEnv: file}, "", "", "", "", "OSS_ACCESS_KEY_ID is set but OSS_ACCESS_KEY_SECRET is not"},
		{"file default", map[string]string{CredentialsFileEnv: file}, "LTAIfile", "file-secret", "", file, ""},
		{"file profile", map[string]string{CredentialsFileEnv: file, ProfileEnv: "ci"}, "LTAIci", "ci-secret", "tok", file, ""},
		{"file missing profile", map[string]string{CredentialsFileEnv: file, ProfileEnv: "prod"}, "", "", "", "", "no [prod] section"},
		{"explicit file missing", map[string]string{CredentialsFileEnv: filepath.Join(home, "nope")}, "", "", "", "", "credentials file: open"},
		{"nothing", map[string]string{"HOME": home}, "", "", "", "", "no OSS credentials: set OSS_ACCESS_KEY_ID"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range vars {
				t.Setenv(v, "")
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c, err := LoadCredentials()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("LoadCredentials = %v; want %q", err, tc.err)
				}
				if tc.name == "nothing" && !errors.Is(err, ErrNoCredentials) {
					t.Errorf("want ErrNoCredentials, got %v", err)
				}
				return
			}
			if err != nil || c.AccessKeyID != tc.id || c.AccessKeySecret != tc.secret || c.SecurityToken != tc.tok || c.Source != tc.from {
				t.Errorf("LoadCredentials = %q %q %q from %q, %v; want %q %q %q from %q", c.AccessKeyID, c.AccessKeySecret, c.SecurityToken, c.Source, err, tc.id, tc.secret, tc.tok, tc.from)
			}
		})
	}
}

func TestCredentialsRedacted(t *testing.T) {
	c := Credentials{AccessKeyID: "LTAIid", AccessKeySecret: "hunter2", SecurityToken: "tok3n", Source: "env"}
	var sb strings.Builder
	slog.New(slog.NewTextHandler(&sb, nil)).Info("x", "creds", c)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), sb.String()} {
		if strings.Contains(s, "hunter2") || strings.Contains(s, "tok3n") || strings.Contains(s, "LTAIid") {
			t.Errorf("credentials leak: %s", s)
		}
	}
}

func FuzzCredentialsFile(f *testing.F) {
	f.Add([]byte("[default]\naccess_key_id = a\naccess_key_secret = b\n"), "default")
	f.Add([]byte("[p]\naccess_key_id='a'\naccess_key_secret=\"b\"\nsecurity_token=c\n"), "p")
	f.Add([]byte("[broken\nx"), "default")
	f.Add([]byte("; c\n# c\n[default]\nno equals sign\n"), "default")
	f.Fuzz(func(t *testing.T, data []byte, profile string) {
		c, err := parseCredentialsFile(data, profile)
		if err == nil && (c.AccessKeyID == "" || c.AccessKeySecret == "") {
			t.Errorf("accepted credentials without an id or secret: %q", data)
		}
	})
}
