package storage

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// Credentials are an OSS access key, with a security token for temporary
// (STS) keys. They print and log as "[redacted]".
type Credentials struct {
	AccessKeyID     string
	AccessKeySecret string
	SecurityToken   string
	// Source says where they came from, for messages: an environment
	// variable's name or the file's path.
	Source string
}

// String hides the secret parts.
func (c Credentials) String() string { return "[redacted credentials from " + c.Source + "]" }

// GoString hides the secret parts from %#v.
func (c Credentials) GoString() string { return c.String() }

// LogValue hides the secret parts from slog.
func (c Credentials) LogValue() slog.Value { return slog.StringValue(c.String()) }

// ErrNoCredentials means no OSS credentials were found anywhere.
var ErrNoCredentials = errors.New("no OSS credentials")

// CredentialsFileEnv names the variable that overrides the credentials
// file's path; ProfileEnv names the variable that picks its section.
const (
	CredentialsFileEnv = "ALIBABA_CLOUD_CREDENTIALS_FILE"
	ProfileEnv         = "ALIBABA_CLOUD_PROFILE"
)

// DefaultCredentialsFile is where LoadCredentials looks when
// ALIBABA_CLOUD_CREDENTIALS_FILE is unset: ~/.alibabacloud/credentials.ini.
func DefaultCredentialsFile() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".alibabacloud", "credentials.ini")
}

// LoadCredentials finds OSS credentials, first found wins:
//
//  1. OSS_ACCESS_KEY_ID, OSS_ACCESS_KEY_SECRET and optionally OSS_SESSION_TOKEN;
//  2. ALIBABA_CLOUD_ACCESS_KEY_ID, ALIBABA_CLOUD_ACCESS_KEY_SECRET and
//     optionally ALIBABA_CLOUD_SECURITY_TOKEN;
//  3. the INI file named by ALIBABA_CLOUD_CREDENTIALS_FILE, else
//     ~/.alibabacloud/credentials.ini, section ALIBABA_CLOUD_PROFILE else
//     "default", keys access_key_id, access_key_secret and optionally
//     security_token (or sts_token).
//
// Credentials never come from a URL. A half-set pair is an error, not a
// fall-through, so that a typo does not silently pick other keys.
func LoadCredentials() (Credentials, error) {
	for _, set := range [][3]string{
		{"OSS_ACCESS_KEY_ID", "OSS_ACCESS_KEY_SECRET", "OSS_SESSION_TOKEN"},
		{"ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET", "ALIBABA_CLOUD_SECURITY_TOKEN"},
	} {
		id, secret := os.Getenv(set[0]), os.Getenv(set[1])
		switch {
		case id != "" && secret != "":
			return Credentials{AccessKeyID: id, AccessKeySecret: secret, SecurityToken: os.Getenv(set[2]), Source: set[0]}, nil
		case id != "":
			return Credentials{}, fmt.Errorf("%s is set but %s is not; set both", set[0], set[1])
		case secret != "":
			return Credentials{}, fmt.Errorf("%s is set but %s is not; set both", set[1], set[0])
		}
	}
	path := os.Getenv(CredentialsFileEnv)
	explicit := path != ""
	if !explicit {
		path = DefaultCredentialsFile()
	}
	profile := os.Getenv(ProfileEnv)
	if profile == "" {
		profile = "default"
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && !explicit {
			return Credentials{}, fmt.Errorf("%w: set OSS_ACCESS_KEY_ID and OSS_ACCESS_KEY_SECRET (and OSS_SESSION_TOKEN for a temporary key), or write them to %s", ErrNoCredentials, path)
		}
		return Credentials{}, fmt.Errorf("credentials file: %w", err)
	}
	c, err := parseCredentialsFile(data, profile)
	if err != nil {
		return Credentials{}, fmt.Errorf("credentials file %s: %w", path, err)
	}
	c.Source = path
	return c, nil
}

// parseCredentialsFile reads one profile of an INI credentials file:
//
//	[default]
//	access_key_id = LTAI...
//	access_key_secret = ...
//	security_token = ...   (optional)
//
// Lines starting with # or ; are comments; keys and section names are
// case-insensitive; values may be quoted.
func parseCredentialsFile(data []byte, profile string) (Credentials, error) {
	var c Credentials
	section := ""
	found := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			end := strings.IndexByte(line, ']')
			if end < 0 {
				return Credentials{}, fmt.Errorf("line %d: section header without ']'", n)
			}
			section = strings.ToLower(strings.TrimSpace(line[1:end]))
			if section == strings.ToLower(profile) {
				found = true
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return Credentials{}, fmt.Errorf("line %d: want key = value", n)
		}
		if section != strings.ToLower(profile) {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
			v = v[1 : len(v)-1]
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "access_key_id":
			c.AccessKeyID = v
		case "access_key_secret":
			c.AccessKeySecret = v
		case "security_token", "sts_token":
			c.SecurityToken = v
		}
	}
	if err := sc.Err(); err != nil {
		return Credentials{}, err
	}
	if !found {
		return Credentials{}, fmt.Errorf("no [%s] section; add one or set %s to the section to use", profile, ProfileEnv)
	}
	if c.AccessKeyID == "" || c.AccessKeySecret == "" {
		return Credentials{}, fmt.Errorf("section [%s] needs access_key_id and access_key_secret", profile)
	}
	return c, nil
}
