// Package egress owns a sandbox's way out to the network: the allow list
// (entries, where each came from, how a destination matches), the proxy that
// enforces it (CONNECT tunnels and plain HTTP, names resolved and vetted by
// the proxy itself), the credential broker (placeholders in the container,
// real values swapped in only on TLS the proxy terminates for the hosts a
// secret is bound to), the per-sandbox certificate authority that
// termination needs, the decision log and its summary, and the
// configuration file the proxy reads.
//
// The proxy runs as `git-sandbox __proxy --config FILE` in a container of its
// own. The agent's container reaches nothing but that proxy; everything here
// assumes the agent is hostile and the proxy is the only thing standing
// between it and the network.
//
// What the proxy sees:
//
//   - Plain HTTP: everything (URL, headers, body). Placeholders anywhere in
//     it are refused: real values are only ever sent inside TLS.
//   - CONNECT to a host no secret is bound to and not marked for
//     inspection: the host name and port of the tunnel, and how many bytes
//     pass. The bytes are TLS the proxy cannot
//     read; a placeholder sent in there is useless to whoever receives it.
//   - CONNECT to a host a secret is bound to: the proxy terminates TLS with a
//     certificate from the sandbox's CA and reads each request (HTTP/1.1 or
//     HTTP/2), swaps the bound placeholders for the real values in request
//     headers, refuses requests carrying another secret's placeholder, and
//     forwards over TLS verified against the system roots.
//   - CONNECT to a host the user marks inspect = true: terminated the same
//     way, with no value swapped in, so that method and path rules apply to
//     each request.
package egress
