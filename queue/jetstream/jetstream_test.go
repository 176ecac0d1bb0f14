package jetstream_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/eas-server/eas-server/queue"
	"github.com/eas-server/eas-server/queue/jetstream"
	"github.com/eas-server/eas-server/queue/jetstream/natstest"
	"github.com/eas-server/eas-server/queue/queuetest"
)

var services atomic.Int64

func TestJetStreamSuite(t *testing.T) {
	url := natstest.Start(t)
	queuetest.Run(t, func(t *testing.T) queue.Backend {
		b, err := jetstream.Open(context.Background(), url, fmt.Sprintf("svc%d", services.Add(1)))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}, queuetest.Caps{})
}
