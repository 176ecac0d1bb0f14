package processors

import (
	"reflect"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/scheduler"
)

// TestRouteConfig checks the rule that combines a service's metadata.rpc
// limits with a routed model's own configuration.
func TestRouteConfig(t *testing.T) {
	svc := scheduler.Config{Workers: 5, QueueSize: 64, Timeout: 5 * time.Second, RateLimit: 10}
	batching := svc
	batching.Batching, batching.MaxBatchSize, batching.MaxBatchTimeout, batching.PreferredBatchSizes = true, 8, 50*time.Millisecond, []int{2, 4, 16}
	for _, tc := range []struct {
		name string
		svc  scheduler.Config
		m    ModelSchedule
		want scheduler.Config
	}{
		{"the service decides what the model leaves out", svc, ModelSchedule{},
			scheduler.Config{Workers: 5, QueueSize: 64, Timeout: 5 * time.Second, RateLimit: 10}},
		{"the model's instances, queue and shorter timeout", svc, ModelSchedule{Instances: 2, QueueSize: 256, Timeout: time.Second},
			scheduler.Config{Workers: 2, QueueSize: 256, Timeout: time.Second, RateLimit: 10}},
		{"a longer model timeout keeps the keepalive", svc, ModelSchedule{Timeout: time.Minute},
			scheduler.Config{Workers: 5, QueueSize: 64, Timeout: 5 * time.Second, RateLimit: 10}},
		{"dynamic batching, rpc.batching off", svc, ModelSchedule{MaxBatchSize: 16, DynamicBatching: true, MaxQueueDelay: 10 * time.Millisecond, PreferredBatchSizes: []int{8, 16}},
			scheduler.Config{Workers: 5, QueueSize: 64, Timeout: 5 * time.Second, RateLimit: 10, Batching: true, MaxBatchSize: 16, MaxBatchTimeout: 10 * time.Millisecond, PreferredBatchSizes: []int{8, 16}}},
		{"dynamic batching capped by rpc.max_batch_size", batching, ModelSchedule{MaxBatchSize: 16, DynamicBatching: true, PreferredBatchSizes: []int{4, 16}},
			scheduler.Config{Workers: 5, QueueSize: 64, Timeout: 5 * time.Second, RateLimit: 10, Batching: true, MaxBatchSize: 8, PreferredBatchSizes: []int{4}}},
		{"no dynamic_batching, rpc.batching on", batching, ModelSchedule{MaxBatchSize: 4},
			scheduler.Config{Workers: 5, QueueSize: 64, Timeout: 5 * time.Second, RateLimit: 10, Batching: true, MaxBatchSize: 4, MaxBatchTimeout: 50 * time.Millisecond, PreferredBatchSizes: []int{2, 4}}},
		{"no dynamic_batching, rpc.batching off", svc, ModelSchedule{MaxBatchSize: 4},
			scheduler.Config{Workers: 5, QueueSize: 64, Timeout: 5 * time.Second, RateLimit: 10}},
		{"max_batch_size 0 never batches", batching, ModelSchedule{DynamicBatching: true},
			scheduler.Config{Workers: 5, QueueSize: 64, Timeout: 5 * time.Second, RateLimit: 10}},
		{"no service deadline, the model's", scheduler.Config{Timeout: -1}, ModelSchedule{Timeout: time.Second},
			scheduler.Config{Timeout: time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RouteConfig(tc.svc, tc.m); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("RouteConfig:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
