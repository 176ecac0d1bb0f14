package server

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// kserveRoutes adds the KServe v2 / Open Inference Protocol routes.
func (s *Server) kserveRoutes(r *gin.Engine) {
	r.GET("/v2/health/live", func(c *gin.Context) { c.Status(http.StatusOK) })
	r.GET("/v2/health/ready", func(c *gin.Context) {
		if ok, _ := s.opt.Manager.Ready(); !ok || s.draining.Load() {
			c.Status(http.StatusServiceUnavailable)
			return
		}
		c.Status(http.StatusOK)
	})
}
