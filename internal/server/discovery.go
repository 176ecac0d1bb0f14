package server

import (
	"net"
	"net/http"

	"github.com/gin-gonic/gin"
)

// upstreams answers GET /api/v1/servicediscovery/upstreams/<service>, the
// service discovery the EAS SDKs' DIRECT endpoint type asks before sending
// to an instance's ip:port itself. One process serves every instance of its
// services, so the answer is the one address this request came in on, for
// any name: whether the service exists and the token opens it is for the
// predict request to say, so this unauthenticated route tells nobody which
// services there are.
func (s *Server) upstreams(c *gin.Context) {
	addr, _ := c.Request.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	if addr == nil {
		s.fail(c, http.StatusNotFound, "service discovery: this server is not on a TCP listener, so it has no address to give; use the gateway endpoint type")
		return
	}
	c.JSON(http.StatusOK, gin.H{
		"correlative": []string{},
		"endpoints": gin.H{"items": []gin.H{{
			"app": c.Param("name"), "ip": addr.IP.String(), "port": addr.Port, "weight": 100,
		}}},
	})
}
