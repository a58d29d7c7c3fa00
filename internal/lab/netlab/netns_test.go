package netlab_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"testing"
	"time"
)

func TestDialContextReachesListenerInNamespace(t *testing.T) {
	l := newLab(t, "nl-d-")
	w1 := addHost(t, l, "w1", "172.18.0.3")
	w2 := addHost(t, l, "w2", "172.18.0.4")

	ln, err := w1.Listen("tcp", "172.18.0.3:8080")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.WriteString(c, c.RemoteAddr().String()+"\n")
			}()
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, h := range []struct {
		from interface {
			DialContext(context.Context, string, string) (net.Conn, error)
		}
		wantSrc string
	}{{w1, "172.18.0.3"}, {w2, "172.18.0.4"}} {
		c, err := h.from.DialContext(ctx, "tcp", "172.18.0.3:8080")
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		// The listener saw the connection come from the dialling host's address: the
		// socket lives in that host's namespace.
		host, _, _ := net.SplitHostPort(line[:len(line)-1])
		if host != h.wantSrc {
			t.Fatalf("connection came from %s, want %s", host, h.wantSrc)
		}
	}

	if _, err := w1.DialContext(ctx, "tcp", "localhost:8080"); err == nil {
		t.Fatal("DialContext accepted a name")
	}
}
