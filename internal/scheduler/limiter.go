package scheduler

import (
	"sync"
	"time"
)

// limiter is a token bucket: rate tokens per second, a burst of one second's
// worth (at least 1). It is safe for concurrent use.
type limiter struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func newLimiter(rate float64) *limiter {
	burst := max(rate, 1)
	return &limiter{rate: rate, burst: burst, tokens: burst, last: time.Now()}
}

func (l *limiter) allow() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	l.last = now
	if l.tokens < 1 {
		return false
	}
	l.tokens--
	return true
}

// ready reports whether allow would succeed now, without taking a token.
func (l *limiter) ready() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tokens+time.Since(l.last).Seconds()*l.rate >= 1
}
