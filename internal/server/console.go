package server

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/eas-server/eas-server/internal/console"
)

// consoleRoutes serves the web console at /console/ and sends / there,
// unless Options.NoConsole.
func (s *Server) consoleRoutes(r *gin.Engine) {
	if s.opt.NoConsole {
		return
	}
	h := http.StripPrefix("/console/", console.Handler())
	serve := func(c *gin.Context) { h.ServeHTTP(c.Writer, c.Request) }
	r.GET("/console/*path", serve)
	r.HEAD("/console/*path", serve)
	home := func(c *gin.Context) { c.Redirect(http.StatusFound, "/console/") }
	r.GET("/", home)
	r.GET("/console", home)
}
