// Command ginecho is the peer of the echo benchmark: a bare gin handler that
// returns the request body, with nothing of eas-server in the path. It
// measures what the load generator and gin alone can do on a machine, so the
// full stack's echo throughput can be stated as a ratio of it.
package main

import (
	"flag"
	"io"
	"log"
	"net/http"

	"github.com/gin-gonic/gin"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:18081", "address to listen on")
	flag.Parse()
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.POST("/api/predict/:name", func(c *gin.Context) {
		body, err := io.ReadAll(c.Request.Body)
		if err != nil {
			c.String(http.StatusBadRequest, err.Error())
			return
		}
		c.Data(http.StatusOK, "application/octet-stream", body)
	})
	log.Fatal(http.ListenAndServe(*addr, r))
}
