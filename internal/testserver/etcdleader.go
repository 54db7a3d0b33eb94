package testserver

import (
	"context"
	"io"
	"net/http"
	"strings"
	"time"
)

// EtcdIsLeader says whether the etcd member s is its cluster's leader (false
// when it is down), from its /metrics.
func EtcdIsLeader(s *Server) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.Addr()+"/metrics", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return err == nil && strings.Contains(string(body), "\netcd_server_is_leader 1")
}
