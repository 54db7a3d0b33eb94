package etcdlock

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// connectionRefusal is what gRPC says when every endpoint refused the
// connection: nothing listening (Open waited out its connect bound, and
// said only "context deadline exceeded"), or at the TLS or HTTP/2 level a
// certificate not trusted or for another name, a client certificate
// missing, or TLS on one side only.
// clientv3 hides it: its calls wait for a connection until ctx ends and
// then report only the ctx's error. nil means no such refusal was seen
// (the connect check that follows judges the rest).
func connectionRefusal(ctx context.Context, cli *clientv3.Client, tc *tls.Config, clientCert bool, connect time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, connect)
	defer cancel()
	// WaitForReady(false): fail as soon as no endpoint can be connected to,
	// with the last connection error. Status needs no rights.
	_, err := pb.NewMaintenanceClient(cli.ActiveConnection()).Status(ctx, &pb.StatusRequest{}, grpc.WaitForReady(false))
	st, ok := status.FromError(err)
	if err == nil || !ok || st.Code() != codes.Unavailable {
		return nil // connected, or a failure the connect check reports
	}
	msg := st.Message()
	if tc != nil && isDropped(msg) && len(cli.Endpoints()) > 0 {
		// A server that refuses a client certificate after a TLS 1.3
		// handshake drops the connection, which gRPC reports as a broken
		// pipe; its alert says why, which a connection of our own reads.
		addr := cli.Endpoints()[0]
		addr = addr[strings.Index(addr, "://")+3:]
		if perr := tlsProbe(ctx, addr, tc); perr != nil {
			msg = perr.Error()
		}
	}
	for _, s := range []string{"handshake", "certificate", "tls:", "server preface", "first record does not look like a TLS handshake"} {
		if strings.Contains(msg, s) {
			switch {
			case tc == nil:
				msg += " (if the server takes TLS only, use etcds://)"
			case !clientCert && (strings.Contains(msg, "bad certificate") || strings.Contains(msg, "certificate required")):
				msg += " (the server may want a client certificate: cert= and key=)"
			}
			return fmt.Errorf("etcdlock: connect: %s", msg)
		}
	}
	if strings.Contains(msg, "connection refused") {
		return fmt.Errorf("etcdlock: connect: %s", msg)
	}
	return nil
}

func isDropped(msg string) bool {
	return strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset") || strings.Contains(msg, "EOF")
}

// tlsProbe connects to addr with tc, sends an HTTP/2 preface and an empty
// SETTINGS frame, and returns the error of reading the server's answer:
// nil when it answers, the server's TLS alert when it refused us.
func tlsProbe(ctx context.Context, addr string, tc *tls.Config) error {
	tc = tc.Clone()
	tc.NextProtos = []string{"h2"}
	d := tls.Dialer{Config: tc}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	if _, err := conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")); err != nil {
		return err
	}
	_, err = conn.Read(make([]byte, 1))
	return err
}
