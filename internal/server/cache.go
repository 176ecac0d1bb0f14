package server

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/eas-server/eas-server/internal/controlapi"
	"github.com/eas-server/eas-server/internal/storage"
)

// cacheRoutes adds the model cache's admin routes (docs/protocol.md "Model
// cache"), behind the admin token: what `eas-server cache ls` and `cache
// prune` call.
func (s *Server) cacheRoutes(r *gin.Engine) {
	g := r.Group("/api/v2/cache", s.adminAuth)
	g.GET("", func(c *gin.Context) {
		entries, use := s.opt.Manager.Fetcher().CacheList()
		if entries == nil {
			entries = []storage.CacheEntry{}
		}
		c.JSON(http.StatusOK, controlapi.CacheList{Entries: entries, Usage: use})
	})
	g.POST("/prune", func(c *gin.Context) {
		res, err := s.opt.Manager.Fetcher().Prune()
		if err != nil {
			s.log.Warn("cache prune left files behind", "err", err)
			controlFail(c, http.StatusInternalServerError, "PruneFailed", "pruned "+strconv.Itoa(res.Removed)+" entries, but some files could not be removed: "+err.Error())
			return
		}
		s.log.Info("model cache pruned", "entries", res.Removed, "partial_files", res.PartialFiles, "freed_bytes", res.FreedBytes, "kept_in_use", res.KeptInUse)
		c.JSON(http.StatusOK, res)
	})
}
