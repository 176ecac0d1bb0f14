package require

import (
	"os"
	"path/filepath"
)

// TokenizerCache is where scripts/fetch-tokenizers.sh puts the real
// tokenizer files (and all-MiniLM-L6-v2's directory) that tests read:
// $EAS_TOKENIZER_CACHE, else $XDG_CACHE_HOME/eas-server/tokenizers, else
// ~/.cache/eas-server/tokenizers, as the script decides.
func TokenizerCache() string {
	if d := os.Getenv("EAS_TOKENIZER_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "eas-server", "tokenizers")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "eas-server", "tokenizers")
}
