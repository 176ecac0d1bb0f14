package server

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/eas-server/eas-server/internal/history"
)

// MetricsHistory answers GET /api/v2/metrics: each service's points, oldest
// first, from the server's in-memory history (internal/history). The names
// are the web console's.
type MetricsHistory struct {
	IntervalMs int64 // time between points
	WindowMs   int64 // how far back points are kept
	Services   map[string][]history.Point
}

// metricsHistory serves the history, of one service with ?service=<name>,
// only the points after ?since=<unix ms> when given. A service the control
// plane does not know is 404; a known one may have no points yet.
func (s *Server) metricsHistory(c *gin.Context) {
	h := s.opt.History
	if h == nil {
		controlFail(c, http.StatusNotFound, "NotFound", "this server keeps no metrics history (eas-server serve keeps one; the controller does not): scrape /metrics with Prometheus instead")
		return
	}
	var since int64
	if v := c.Query("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			controlFail(c, http.StatusBadRequest, "InvalidParameter", "since: must be a time in unix milliseconds, e.g. the T of the last point received, got "+strconv.Quote(v))
			return
		}
		since = n
	}
	out := MetricsHistory{IntervalMs: h.Interval().Milliseconds(), WindowMs: h.Window().Milliseconds()}
	name, one := c.GetQuery("service")
	if !one {
		out.Services = h.All(since)
		c.Header("Cache-Control", "no-store")
		c.JSON(http.StatusOK, out)
		return
	}
	if _, err := s.control().Describe(c.Request.Context(), name); err != nil {
		s.controlErr(c, err)
		return
	}
	pts, _ := h.Points(name, since)
	if pts == nil {
		pts = []history.Point{}
	}
	out.Services = map[string][]history.Point{name: pts}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, out)
}
