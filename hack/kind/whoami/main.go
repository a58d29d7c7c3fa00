// Command whoami stands in for the traefik/whoami image of the walkthrough, which no
// registry here serves: on every request it answers with the pod's hostname, its
// addresses and the request as received, in the same "Key: value" lines, so that
// `curl VIP | grep Hostname` reads the same. Its own module: nothing of the product
// imports it and `go test ./...` at the repository root does not see it.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
)

func main() {
	port := 80
	if v, err := strconv.Atoi(os.Getenv("WHOAMI_PORT_NUMBER")); err == nil {
		port = v
	}
	flag.IntVar(&port, "port", port, "the TCP port to serve on")
	flag.Parse()
	http.HandleFunc("/", whoami)
	log.Fatal(http.ListenAndServe(":"+strconv.Itoa(port), nil))
}

func whoami(w http.ResponseWriter, r *http.Request) {
	host, _ := os.Hostname()
	fmt.Fprintf(w, "Hostname: %s\n", host)
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() {
				fmt.Fprintf(w, "IP: %s\n", n.IP)
			}
		}
	}
	fmt.Fprintf(w, "RemoteAddr: %s\n", r.RemoteAddr)
	fmt.Fprintf(w, "%s %s %s\n", r.Method, r.URL.RequestURI(), r.Proto)
	fmt.Fprintf(w, "Host: %s\n", r.Host)
	for k, vs := range r.Header {
		for _, v := range vs {
			fmt.Fprintf(w, "%s: %s\n", k, v)
		}
	}
}
