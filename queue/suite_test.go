package queue_test

import (
	"path/filepath"
	"testing"

	"github.com/eas-server/eas-server/queue"
	"github.com/eas-server/eas-server/queue/queuetest"
)

func TestStoreSuite(t *testing.T) {
	queuetest.Run(t, func(t *testing.T) queue.Backend {
		s, err := queue.Open(filepath.Join(t.TempDir(), "q.db"), queue.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, queuetest.Caps{Priority: true})
}
