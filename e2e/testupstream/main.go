// Command testupstream is the upstream server of the egress tests: it runs
// in a container on a sandbox's egress network under names such as
// api.allowed.test. On :80 it answers every HTTP request with its name; on
// :443 it writes its name to every connection and closes it (a CONNECT
// tunnel is blind, so the bytes need not be TLS).
package main

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
)

func main() {
	name := os.Getenv("UPSTREAM_NAME")
	if name == "" {
		name = "upstream"
	}
	l, err := net.Listen("tcp", ":443")
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "tunnel to %s\n", name)
			c.Close()
		}
	}()
	log.Fatal(http.ListenAndServe(":80", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s (%s)\n", name, r.Host)
	})))
}
